"""Samples during training: a short continuation of a few fixed prompts, as `sample` events.

The prompts are run.json's `training.sample_prompts`, or else the first words of a few
held-out documents: the tokens after an end-of-text mark at evenly spread places of val.bin,
a pure function of the data, so every sample of a run (and of its continuations on the same
data) continues the same prompts. Each prompt is continued at a fixed seed by
trainer.text.generate, whose random numbers come from a generator of its own: the training's
random streams, its batches and its weights are untouched, so a run with samples ends in
the same state as one without.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainer.config.run_config import TrainingConfig
from trainer.text.tokenizer import Tokenizer

PROMPTS = 3
PROMPT_TOKENS = 6
SEARCH = 4096  # how far after a spread point an end-of-text mark is looked for


def held_out_prompts(val: np.ndarray, eot: int | None, count: int = PROMPTS, length: int = PROMPT_TOKENS) -> list[list[int]]:
    """The first `length` tokens of `count` documents spread over val.bin (ending early at
    the next end-of-text mark); without marks, the tokens at the spread points."""
    prompts: list[list[int]] = []
    # the starts of `count` equal parts, so each has room after it to find a document
    for point in np.linspace(0, len(val), num=count + 1)[:-1].astype(np.int64):
        window = np.asarray(val[point : point + SEARCH], dtype=np.int64)
        marks = np.flatnonzero(window == eot) if eot is not None else np.empty(0, dtype=np.int64)
        # the first document after the point whose start is not a prompt already
        for start in [int(point + m + 1) for m in marks] or [int(point)]:
            ids = [int(x) for x in val[start : start + length]]
            if eot in ids:
                ids = ids[: ids.index(eot)]
            if ids and ids not in prompts:
                prompts.append(ids)
                break
    return prompts


class Sampler:
    """What the trainer holds for samples: the tokenizer, the prompts and when to sample."""

    def __init__(self, tok: Tokenizer, prompts: list[list[int]], t: TrainingConfig, vocab: int) -> None:
        self.tok, self.prompts = tok, prompts
        self.every = t.sample_every or t.eval_every
        self.tokens, self.seed = t.sample_tokens, t.seed
        self.allowed = min(tok.size, vocab)

    @classmethod
    def open(cls, data_dir: Path, val: np.ndarray, t: TrainingConfig, vocab: int) -> Sampler | None:
        """None when samples are off; TokenizerError when the data's tokenizer cannot be read."""
        if t.sample_tokens == 0:
            return None
        tok = Tokenizer.from_file(Path(data_dir) / "tokenizer.json")
        if t.sample_prompts:
            prompts = [tok.encode(p) or ([tok.eot] if tok.eot is not None else []) for p in t.sample_prompts]
            prompts = [p for p in prompts if p]
        else:
            prompts = held_out_prompts(val, tok.eot)
        return cls(tok, prompts, t, vocab) if prompts else None

    def due(self, step: int, steps_to: int) -> bool:
        return step % self.every == 0 or step == steps_to

    def run(self, model, precision: str) -> list[dict]:
        from trainer.text.generate import training_samples

        return training_samples(model, self.prompts, self.tokens, self.seed, precision, self.tok.decode,
                                self.tok.eot, self.allowed)

