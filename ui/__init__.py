"""Thin PySide6 views over app/."""
