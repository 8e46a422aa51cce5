"""`ternit`, the lab without the window: the dispatcher (`main`) that hands each command to
its group's module (`app.data.cli`, `app.runs.cli`, `app.text.sample_cli`, …), and `ternit
bench` (`bench`). `python -m app.cli` runs the same dispatcher."""
