"""One training step: the optimizer and its schedule, precision, the lean state, compilation, memory accounting."""
