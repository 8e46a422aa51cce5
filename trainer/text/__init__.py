"""Text from the model: the tokenizer in plain Python, how tokens are sampled, generation and scoring."""
