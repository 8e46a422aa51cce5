"""What a run executes on a machine (the plan), the start checks, and whether this torch drives the card."""
