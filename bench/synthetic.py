"""A small but real prepared-data folder for the trainer's tests and the benchmarks.

The text is made here (Russian and English sentences from a fixed grammar), a byte-level
BPE tokenizer is trained on it with `tokenizers`, and the token ids are written as the
trainer reads them. It does not use app/'s pipeline on purpose: the trainer's tests must
not depend on the data side. In bench/ (not tests/) because `ternit bench economical`
makes its data with it when given none.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np

SUBJECTS = ["кот", "пёс", "the cat", "a dog", "лиса", "the fox", "робот", "a robot"]
VERBS = ["видит", "любит", "sees", "likes", "ждёт", "waits for", "ищет", "finds"]
OBJECTS = ["мяч", "дом", "the ball", "a house", "звезду", "a star", "реку", "the river"]


def make_text(sentences: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}." for _ in range(sentences)
    ]


def make_prepared(out: Path, vocab: int = 300, sentences: int = 6000) -> Path:
    from app.data.prepare import new_tokenizer  # the lab's own byte-level BPE set-up

    out.mkdir(parents=True, exist_ok=True)
    lines = make_text(sentences)
    tok, trainer = new_tokenizer(vocab)
    tok.train_from_iterator(lines, trainer)
    tok.save(str(out / "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    ids: list[int] = []
    for enc in tok.encode_batch(lines):
        ids.extend(enc.ids)
        ids.append(eot)
    arr = np.asarray(ids, dtype=np.uint16)
    split = int(len(arr) * 0.9)
    arr[:split].tofile(out / "train.bin")
    arr[split:].tofile(out / "val.bin")
    meta = {
        "format": 1,
        "vocab_size": tok.get_vocab_size(),
        "dtype": "uint16",
        "train_tokens": int(split),
        "val_tokens": int(len(arr) - split),
        "constellations": ["tiny"],
        "tokens_by_constellation": {"tiny": int(len(arr))},
        "tokenizer_sha256": hashlib.sha256((out / "tokenizer.json").read_bytes()).hexdigest(),
    }
    meta["data_id"] = hashlib.sha256(arr.tobytes()).hexdigest()
    (out / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return out
