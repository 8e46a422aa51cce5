"""The training loop and what it runs with: control, events, data, samples during training, the parts built from the plan."""
