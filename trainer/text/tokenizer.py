"""The prepared data's tokenizer (tokenizer.json, Hugging Face byte-level BPE) in plain Python.

The trainer ships to a Kaggle kernel with torch and numpy only, yet it writes samples during
training and the sampler reads prompts: so it encodes and decodes the lab's tokenizer files
itself. It covers exactly what `ternit data prepare` writes: a ByteLevel pre-tokenizer with
GPT-2's split rule, BPE merges by rank, and added special tokens (`<|endoftext|>`) matched
whole in the text. tests/test_generate.py checks it token for token against `tokenizers`.
"""

from __future__ import annotations

import codecs
import json
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

EOT = "<|endoftext|>"
_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")


class TokenizerError(ValueError):
    """A tokenizer.json this module cannot read: the message names the file and why."""


@lru_cache(maxsize=1)
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte (what ByteLevel writes in the vocab)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def _kind(c: str) -> str:
    """'L' letter, 'N' number, 'S' white space, 'O' anything else (the split rule's classes)."""
    if c.isspace():
        return "S"
    cat = unicodedata.category(c)[0]
    return cat if cat in ("L", "N") else "O"


def split_words(text: str) -> list[str]:
    """GPT-2's pre-tokenizer rule, written out (Python's `re` lacks \\p{L}/\\p{N}):
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"""
    words, i, n = [], 0, len(text)
    kinds = [_kind(c) for c in text]
    while i < n:
        if text[i] == "'":
            hit = next((c for c in _CONTRACTIONS if text.startswith(c, i)), None)
            if hit:
                words.append(hit)
                i += len(hit)
                continue
        start = i
        if text[i] == " " and i + 1 < n and kinds[i + 1] != "S":
            i += 1  # the optional leading space of the next three rules
        k = kinds[i]
        if k != "S":
            j = i + 1
            while j < n and kinds[j] == k:
                j += 1
            words.append(text[start:j])
            i = j
            continue
        j = i
        while j < n and kinds[j] == "S":
            j += 1
        if j < n and j - i > 1:
            j -= 1  # \s+(?!\S): leave the last space to lead the next word
        words.append(text[i:j])
        i = j
    return words


class Tokenizer:
    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], special: dict[str, int]) -> None:
        self.vocab = vocab
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.special = special
        self.id_to_token = {i: s for s, i in vocab.items()}
        self.id_to_token.update({i: s for s, i in special.items()})
        self.eot = special.get(EOT)
        b2u = byte_to_unicode()
        self._u2b = {u: b for b, u in b2u.items()}
        self._b2u = b2u
        self._split_special = (
            re.compile("(" + "|".join(re.escape(s) for s in sorted(special, key=len, reverse=True)) + ")")
            if special else None
        )
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            model = raw["model"]
            if model.get("type") != "BPE" or (raw.get("pre_tokenizer") or {}).get("type") != "ByteLevel":
                raise TokenizerError(f"{path} is not a byte-level BPE tokenizer as `ternit data prepare` writes")
            merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
            special = {a["content"]: int(a["id"]) for a in raw.get("added_tokens", [])}
            return cls(dict(model["vocab"]), merges, special)
        except FileNotFoundError:
            raise TokenizerError(f"{path} does not exist: the run's prepared data (its tokenizer.json) is gone") from None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TokenizerError(f"{path} cannot be read as a tokenizer ({type(e).__name__}: {e})") from None

    @property
    def size(self) -> int:
        return max(self.id_to_token) + 1

    def _bpe(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        parts = [self._b2u[b] for b in word.encode("utf-8")]
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 60), k) for k, (a, b) in enumerate(zip(parts, parts[1:], strict=False))]
            rank, k = min(pairs)
            if rank == 1 << 60:
                break
            a, b = parts[k], parts[k + 1]
            merged, i = [], 0
            while i < len(parts):  # merge every occurrence of the pair, left to right
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        ids = [self.vocab[p] for p in parts]
        if len(self._cache) < 200_000:
            self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        pieces = self._split_special.split(text) if self._split_special else [text]
        ids: list[int] = []
        for piece in pieces:
            if piece in self.special:
                ids.append(self.special[piece])
                continue
            for word in split_words(piece):
                ids.extend(self._bpe(word))
        return ids

    def token_bytes(self, token_id: int) -> bytes:
        token = self.id_to_token.get(int(token_id), "")
        if token in self.special:
            return token.encode("utf-8")
        return bytes(self._u2b[c] for c in token if c in self._u2b)

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def stream(self) -> StreamDecoder:
        return StreamDecoder(self)


class StreamDecoder:
    """Text as tokens arrive: a character split across two tokens waits for its second half."""

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, token_id: int) -> str:
        return self._utf8.decode(self.tok.token_bytes(token_id))

    def finish(self) -> str:
        return self._utf8.decode(b"", final=True)
