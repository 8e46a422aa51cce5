"""What every room of the trainer stands on: the processes' UTF-8 streams and the OS lock."""
