"""What every view stands on, no view: the palette, settings, the wheel guard, background threads, child tasks, status messages, tooltips."""
