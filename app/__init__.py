"""Ternit Lab core: plain Python, no Qt widgets, no torch."""
