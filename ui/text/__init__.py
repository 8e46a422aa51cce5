"""The «Текст» tab: text from a checkpoint and the child that makes it."""
