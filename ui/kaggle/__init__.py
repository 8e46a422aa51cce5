"""Kaggle's views: the accounts dialog and its clean-up."""
