"""Thin PySide6 views over app/, one room a kind of view (docs/ARCHITECTURE.md, «The rooms of ui/»);
ui.main is the program's start."""
