"""The runs' views: the history, the followed run's banner, the loss plot, exporting weights and metrics."""
