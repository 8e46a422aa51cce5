"""The run.json contract: its fields, defaults, loading and validation, and the reasons and refusals as codes."""
