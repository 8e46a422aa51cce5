"""Two or more processes: who is which rank, DDP and FSDP2 sharding, and launching the ranks."""
