"""Texts, icons and the kernel script template."""
