"""pytest fixtures for the Kaggle tests (import them into a test module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .server import FakeKaggle

KEYS = {
    "alice": "a1ice0000000000000000000000000ka",
    "bob": "b0b00000000000000000000000000kb1",
    "carol": "car01000000000000000000000000kc2",
    "dave": "dave0000000000000000000000000kd3",
}


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKaggle]:
    """A running fake Kaggle; every account client of the lab points at it; fast polling."""
    server = FakeKaggle(tmp_path / "fake-kaggle").start()
    monkeypatch.setenv("TERNIT_KAGGLE_ENDPOINT", server.url)
    monkeypatch.setenv("TERNIT_KAGGLE_POLL_S", "0.05")
    monkeypatch.setenv("TERNIT_KAGGLE_MARGIN_MIN", "1")
    monkeypatch.setenv("TERNIT_HOME", str(tmp_path / "lab"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    try:
        yield server
    finally:
        from app.kaggle import runner

        runner.shutdown_followers(timeout=2.0)
        server.stop()


def add_lab_accounts(*names: str, wrong_key: tuple[str, ...] = ()) -> None:
    """Put accounts in the lab's credentials file (wrong_key: a key the server refuses)."""
    from app.kaggle.credentials import Credential, CredentialStore
    from app.kaggle.store import KaggleStore

    store = KaggleStore()
    for n in names:
        key = KEYS[n] if n not in wrong_key else "wrongkey" + KEYS[n][8:]
        CredentialStore().add(Credential(n, key))
        store.ensure_account(n)
    store.close()


def tiny_config(data_dir: Path, steps_to: int = 30, limit_min: float = 5.0, **training: Any) -> dict[str, Any]:
    return {
        "name": "kaggle-tiny",
        "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
        "training": {"batch_per_card": 4, "steps_to": steps_to, "limit_min": limit_min, "eval_every": 10,
                     "eval_segments": 4, "warmup_steps": 2, **training},
        "data": {"dir": str(data_dir)},
        "target": {"kind": "kaggle", "account": "auto"},
    }
