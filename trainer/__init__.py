"""The training program: torch, numpy and the standard library only."""
