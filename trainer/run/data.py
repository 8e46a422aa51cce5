"""Reading prepared data: batches as a pure function of (seed, step, rank).

train.bin/val.bin are uint16 token ids, memory-mapped (never read whole). A batch's
offsets come from a generator seeded with (seed, step, rank), so a resumed run reads
exactly what an uninterrupted one would, without any loader state in the checkpoint.
With gradient accumulation, micro-step m of rank r reads the batch of the "virtual rank"
m × world_size + r: one card accumulating two micro-steps reads what two cards read in
one, so a run that changes machine at the same tokens per step keeps its data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from trainer.plan.preflight import DataFolder, data_folder


@dataclass
class PreparedData:
    dir: Path
    train: np.memmap
    val: np.memmap
    meta: dict
    vocab_size: int
    data_id: str
    tokenizer_sha256: str
    folder: DataFolder  # what the checks read (trainer.plan.preflight.check_data takes it)


def open_prepared(data_dir: str | Path) -> PreparedData:
    """The prepared data, memory-mapped, after the folder's checks (trainer.plan.preflight: the
    same the lab makes before it creates a run)."""
    folder = data_folder(data_dir)
    d = folder.dir
    arrays = {split: np.memmap(d / f"{split}.bin", dtype=np.uint16, mode="r") for split in ("train", "val")}
    return PreparedData(d, arrays["train"], arrays["val"], folder.meta, folder.vocab_size, folder.data_id(),
                        folder.tokenizer_sha256(), folder)


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

    def __init__(self, tokens: np.ndarray, context: int, batch: int, seed: int, rank: int, device: torch.device,
                 world_size: int = 1, accumulation: int = 1) -> None:
        self.tokens, self.context, self.batch, self.seed, self.rank = tokens, context, batch, seed, rank
        self.device, self.world_size, self.accumulation = device, world_size, accumulation
        self._next: tuple[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] | None = None

    def _load(self, step: int, micro: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        rank = micro * self.world_size + self.rank  # micro 0: the rank itself, as without accumulation
        x, y = get_batch(self.tokens, self.context, self.batch, self.seed, step, rank)
        if self.device.type == "cuda":
            x, y = x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        return x, y

    def get(self, step: int, micro: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch for micro-step `micro` of `step`, then start loading the next one."""
        if self._next is not None and self._next[0] == (step, micro):
            batch = self._next[1]
        else:
            batch = self._load(step, micro)
        after = (step, micro + 1) if micro + 1 < self.accumulation else (step + 1, 0)
        self._next = (after, self._load(*after))
        return batch

    def get_step(self, step: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every micro-batch of `step`, in order."""
        return [self.get(step, m) for m in range(self.accumulation)]
