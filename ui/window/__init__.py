"""The main window, composing the views: its menu, its memory, the close question, the notifier, Qt's language, its benchmarks and the demo screenshot."""
