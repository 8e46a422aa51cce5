"""The lab's GPT: its forward pass, the economical levels' recomputed forward, and its weights exported."""
