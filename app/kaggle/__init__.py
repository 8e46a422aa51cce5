"""The lab's Kaggle side: accounts and their quota, datasets by content hash, kernels on
2×T4, following their logs, the Auto machine and continuing a run across accounts.

Layers, bottom-up: credentials (secrets, file 0600) → client (one KaggleApi per account,
backoff) → quota/store (SQLite, public details only) → datasets/kernel/follow → picker →
runner (one run's legs on Kaggle). Nothing here imports Qt or torch; `kaggle` itself is
imported lazily (see client.import_kaggle).
"""
