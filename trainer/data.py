"""Reading prepared data: batches as a pure function of (seed, step, rank).

train.bin/val.bin are uint16 token ids, memory-mapped (never read whole). A batch's
offsets come from a generator seeded with (seed, step, rank), so a resumed run reads
exactly what an uninterrupted one would, without any loader state in the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

REQUIRED_FILES = ("tokenizer.json", "train.bin", "val.bin", "meta.json")


class DataError(ValueError):
    """Prepared data that cannot be read: the message names the file and what to do."""


@dataclass
class PreparedData:
    dir: Path
    train: np.memmap
    val: np.memmap
    meta: dict
    vocab_size: int
    data_id: str
    tokenizer_sha256: str


def open_prepared(data_dir: str | Path) -> PreparedData:
    d = Path(data_dir)
    if not str(data_dir) or not d.is_dir():
        raise DataError(f"data.dir {str(data_dir)!r} is not a folder: prepare data first (ternit data prepare)")
    missing = [f for f in REQUIRED_FILES if not (d / f).is_file()]
    if missing:
        raise DataError(f"{d} lacks {', '.join(missing)}: prepare the data again (ternit data prepare)")
    try:
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    except ValueError as e:
        raise DataError(f"{d / 'meta.json'} is not valid JSON ({e}): prepare the data again") from None
    arrays = {}
    for split in ("train", "val"):
        path = d / f"{split}.bin"
        if path.stat().st_size < 4 or path.stat().st_size % 2:
            raise DataError(f"{path} is empty or not uint16 token ids: prepare the data again")
        arrays[split] = np.memmap(path, dtype=np.uint16, mode="r")
    tok_sha = hashlib.sha256((d / "tokenizer.json").read_bytes()).hexdigest()
    data_id = meta.get("data_id") or hashlib.sha256((d / "meta.json").read_bytes()).hexdigest()
    return PreparedData(d, arrays["train"], arrays["val"], meta, int(meta.get("vocab_size", 0)), data_id, tok_sha)


def batch_offsets(n_tokens: int, context: int, batch: int, seed: int, step: int, rank: int) -> np.ndarray:
    """Start positions of a batch's sequences: deterministic in (seed, step, rank)."""
    rng = np.random.default_rng([seed, step, rank])
    return rng.integers(0, n_tokens - context - 1, size=batch, endpoint=True)


def get_batch(
    tokens: np.ndarray, context: int, batch: int, seed: int, step: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets) as int64 CPU tensors of shape (batch, context)."""
    offsets = batch_offsets(len(tokens), context, batch, seed, step, rank)
    rows = np.stack([np.asarray(tokens[o : o + context + 1], dtype=np.int64) for o in offsets])
    t = torch.from_numpy(rows)
    return t[:, :-1], t[:, 1:]


def eval_offsets(n_tokens: int, context: int, segments: int) -> np.ndarray:
    """A fixed set of non-overlapping validation segments, evenly spread over val.bin."""
    available = (n_tokens - 1) // context
    count = min(segments, available)
    picks = np.linspace(0, available - 1, num=count).round().astype(np.int64)
    return np.unique(picks) * context


class Prefetcher:
    """Builds the next batch while the current step runs, and moves it to the device
    without a host stall (pinned memory, non-blocking copy) on CUDA."""

    def __init__(self, tokens: np.ndarray, context: int, batch: int, seed: int, rank: int, device: torch.device) -> None:
        self.tokens, self.context, self.batch, self.seed, self.rank = tokens, context, batch, seed, rank
        self.device = device
        self._next: tuple[int, tuple[torch.Tensor, torch.Tensor]] | None = None

    def _load(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = get_batch(self.tokens, self.context, self.batch, self.seed, step, self.rank)
        if self.device.type == "cuda":
            x, y = x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        return x, y

    def get(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch for `step`, then start loading the one for `step + 1`."""
        if self._next is not None and self._next[0] == step:
            batch = self._next[1]
        else:
            batch = self._load(step)
        self._next = (step + 1, self._load(step + 1))
        return batch
