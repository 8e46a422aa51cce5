"""A fake Kaggle API server for tests (stdlib http.server on 127.0.0.1, in a thread)."""

from .server import FakeKaggle

__all__ = ["FakeKaggle"]
