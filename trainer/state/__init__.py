"""The training state on disk: checkpoints, how they are named, hashed and chosen."""
