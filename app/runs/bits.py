"""Bits per byte: the held-out loss in nats per token over the prepared data's UTF-8 bytes
per token. Unlike the loss per token it compares across vocabularies. The series' table, the
TensorBoard files and the lab's scaling law say it from here."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path


def bits_per_byte(loss: float | None, bytes_per_tok: float | None) -> float | None:
    if loss is None or not bytes_per_tok:
        return None
    return loss / math.log(2) / bytes_per_tok


def bytes_per_token(data_dir: str) -> float | None:
    """UTF-8 bytes per token of the prepared data's held-out set (val.bin): the loss in nats
    per token becomes bits per byte with it. The lab's tokenizer is byte-level BPE, where
    each symbol of a token's text stands for one byte; the end-of-text token stands for none."""
    if not data_dir:
        return None
    folder = Path(data_dir)
    try:
        stamp = ((folder / "val.bin").stat().st_mtime_ns, (folder / "tokenizer.json").stat().st_mtime_ns)
    except OSError:
        return None
    return _bytes_per_token(str(folder), stamp)


@functools.lru_cache(maxsize=16)
def _bytes_per_token(folder: str, stamp: tuple[int, int]) -> float | None:
    import numpy as np  # here: the window imports this module at its start

    try:
        spec = json.loads((Path(folder) / "tokenizer.json").read_text(encoding="utf-8"))
        if (spec.get("pre_tokenizer") or {}).get("type") != "ByteLevel":
            return None  # not the lab's kind of tokenizer: the bytes of a token are unknown here
        vocab = spec["model"]["vocab"]
        special = {a["id"] for a in spec.get("added_tokens", []) if a.get("special")}
        lengths = np.zeros(max(vocab.values()) + 1, dtype=np.int64)
        for text, i in vocab.items():
            lengths[i] = 0 if i in special else len(text)
        ids = np.fromfile(Path(folder) / "val.bin", dtype="<u2")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ids = ids[ids < len(lengths)]
    total = int(lengths[ids].sum())
    return total / len(ids) if len(ids) and total else None
