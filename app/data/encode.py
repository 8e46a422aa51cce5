"""The one pass that turns text into the trainer's token files (app.data.prepare's core).

- Streaming. Text is read unit by unit (app.data.readers) and encoded in batches of about
  BATCH_CHARS characters with `encode_batch_fast` (Rust threads, the GIL released), in three
  overlapping stages: a reader thread reads the next batches, an encoder thread encodes one,
  and the calling thread writes the one before. Memory holds a few batches, however large
  the input.
- The held-out sample is chosen by the hash of each unit's text (a document, or a ~16k-char
  run of a long one's paragraphs), deterministically: the units with the smallest hashes go
  to val until it holds max(1 % of the tokens, 96 segments of the context), never more than
  10 % of the data. Equal text has an equal hash, so it is never in both train and val. In
  one pass the reader cannot know where the cut-off falls, so units that might be chosen
  (the lowest 1/8 of the hash range, or among the 256 smallest hashes so far) are written
  to a side file; after the pass the cut-off is fixed, the chosen ones become val.bin and the
  rest are appended to train.bin.
- A floor the evaluation needs: at least EVAL_FLOOR_SEGMENTS segments of context + 1
  tokens. A small text has few, large units (a 64 KB file is three or four), and the one
  with the smallest hash may hold two tokens; when the whole units fall short, the next
  units in hash order are held out by tokens: whole while they fit, then the last one cut,
  its end going to val (a unit whose text occurs twice is never cut). Up to a quarter of the
  text may go to val this way; a text too small for even that is refused in plain words.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import queue
import threading
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..base.i18n import said, t
from ..base.numbers import counted, plural_ru
from .library import Dataset, Library, LibraryError
from .progress import VAL_SAMPLE_WARNING, CancelToken, Reporter, check

EOT = "<|endoftext|>"
VAL_FRACTION = 0.01
MIN_VAL_SEGMENTS = 96
MAX_VAL_FRACTION = 0.10
EVAL_FLOOR_SEGMENTS = 4  # the fewest segments an evaluation's mean and interval are worth
MAX_FLOOR_FRACTION = 0.25  # what the floor may take of a small text
CANDIDATE_REGION = 1 << 61  # the lowest 1/8 of the 64-bit hash range
CANDIDATE_SMALLEST = 256
BATCH_CHARS = 1 << 19  # enough 16k-char units per batch to keep 16+ cores busy
COPY_TOKENS = 1 << 23  # tokens per read when candidates are copied to their file


class PrepareError(LibraryError):
    """Data that cannot be prepared; the message names what is wrong and what to do."""


@dataclass
class Source:
    constellation: str
    dataset: Dataset


def unit_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


class Writer:
    """A token file written in order, hashed as it goes."""

    def __init__(self, path: Path) -> None:
        self.f = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.hash = hashlib.sha256()
        self.tokens = 0

    def write(self, arr: np.ndarray) -> None:
        data = arr.astype("<u2", copy=False).tobytes()
        self.f.write(data)
        self.hash.update(data)
        self.tokens += len(arr)

    def close(self) -> None:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()


def iter_units(lib: Library, sources: list[Source], cancel: CancelToken | None
               ) -> Iterator[tuple[int, str, bool]]:
    """(source index, text, ends a document) for every unit of the sources, in order."""
    for i, s in enumerate(sources):
        for unit, end, _stats in lib.iter_units(s.dataset):
            check(cancel)
            yield i, unit, end


def _batches(lib: Library, sources: list[Source], cancel: CancelToken | None
             ) -> Iterator[tuple[list[str], list[int], list[bool], list[int]]]:
    """(texts, source index, ends document, hash) per batch of about BATCH_CHARS characters."""
    texts: list[str] = []
    src: list[int] = []
    ends: list[bool] = []
    hashes: list[int] = []
    size = 0
    for i, unit, end in iter_units(lib, sources, cancel):
        texts.append(unit)
        src.append(i)
        ends.append(end)
        hashes.append(unit_hash(unit))
        size += len(unit)
        if size >= BATCH_CHARS:
            yield texts, src, ends, hashes
            texts, src, ends, hashes, size = [], [], [], [], 0
    if texts:
        yield texts, src, ends, hashes


def _prefetch(gen: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """Run a generator in a thread, `depth` items ahead (reading overlaps encoding)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(entry: tuple[str, Any]) -> bool:
        # Never block for good: once the consumer has gone (stop), give up.
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in gen:
                if not put(("item", item)):
                    return
            put(("end", done))
        except BaseException as exc:  # handed to the consumer, raised there
            put(("error", exc))

    th = threading.Thread(target=run, name="ternit-data-reader", daemon=True)
    th.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        th.join(timeout=5)


class _Candidates:
    """Units that might go to val, in a side file until the cut-off is known: per unit its
    hash, token count (EOT included) and start in the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.f = open(path, "wb")  # noqa: SIM115 - closed by the caller
        self.hash, self.len, self.start = array("Q"), array("q"), array("q")
        self.tokens = 0
        self.smallest: list[int] = []  # max-heap (negated) of the CANDIDATE_SMALLEST smallest hashes

    def offer(self, h: int, ids: list[int]) -> bool:
        """Keep the unit if it might go to val (True); False: it goes straight to train."""
        small = len(self.smallest) < CANDIDATE_SMALLEST or h < -self.smallest[0]
        if small:
            if len(self.smallest) < CANDIDATE_SMALLEST:
                heapq.heappush(self.smallest, -h)
            else:
                heapq.heapreplace(self.smallest, -h)
        if not (h < CANDIDATE_REGION or small):
            return False
        self.hash.append(h)
        self.len.append(len(ids))
        self.start.append(self.tokens)
        self.f.write(np.asarray(ids, dtype="<u2").tobytes())
        self.tokens += len(ids)
        return True

    def limit(self) -> int:
        """Every unit below this hash is a candidate (nothing below it went straight to train)."""
        full = len(self.smallest) == CANDIDATE_SMALLEST
        return max(CANDIDATE_REGION, -self.smallest[0] + 1 if full else 1 << 64)

    def hashes(self) -> np.ndarray:
        return np.frombuffer(self.hash, dtype=np.uint64) if len(self.hash) else np.zeros(0, np.uint64)

    def lens(self) -> np.ndarray:
        return np.frombuffer(self.len, dtype=np.int64) if len(self.len) else np.zeros(0, np.int64)


@dataclass
class _Tally:
    """What the pass counted, per source and in all."""

    sources: int
    units: int = 0
    chars: int = 0
    tokens: list[int] = field(default_factory=list)
    docs: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokens = [0] * self.sources
        self.docs = [0] * self.sources


def _encode_pass(lib: Library, sources: list[Source], tok: Any, train: Writer, cands: _Candidates,
                 tally: _Tally, total_chars: int, report: Reporter, cancel: CancelToken | None) -> None:
    """Read, encode and write every unit: straight to train.bin, or to the candidates."""
    eot = tok.token_to_id(EOT)

    def encoded(batches: Iterator[Any]) -> Iterator[Any]:
        # Runs in its own thread: encode_batch_fast releases the GIL, so while Rust encodes
        # batch N+1 on every core, this thread's consumer turns batch N into uint16 files and
        # the reader thread reads batch N+2.
        for texts, src, ends, hashes in batches:
            yield texts, src, ends, hashes, tok.encode_batch_fast(texts, add_special_tokens=False)

    for texts, src, ends, hashes, encodings in _prefetch(encoded(_prefetch(_batches(lib, sources, cancel))), 1):
        check(cancel)
        train_ids: list[int] = []
        for enc, s, end, h, text in zip(encodings, src, ends, hashes, texts, strict=True):
            ids = enc.ids
            if end:
                ids.append(eot)
                tally.docs[s] += 1
            tally.tokens[s] += len(ids)
            tally.units += 1
            tally.chars += len(text)
            if not cands.offer(h, ids):
                train_ids.extend(ids)
        if train_ids:
            train.write(np.asarray(train_ids, dtype=np.uint16))
        report("tokenize", tally.chars, total_chars, "chars")
    cands.f.close()
    report("tokenize", total_chars, total_chars, "chars", force=True)


def _copy_candidates(cands: _Candidates, chosen: np.ndarray, train: Writer, val: Writer,
                     report: Reporter, cancel: CancelToken | None, cut: tuple[int, int] | None = None) -> None:
    """Copy runs of consecutive candidates that go the same way, in their original order;
    `cut` (a candidate, n): that unit's last n tokens go to val, the rest to train."""
    cand_mm = np.memmap(cands.path, dtype="<u2", mode="r") if cands.tokens else np.zeros(0, "<u2")
    lens = cands.lens()
    edges = np.flatnonzero(np.diff(chosen.astype(np.int8))) + 1
    starts = np.concatenate([[0], edges]).astype(np.int64)
    stops = np.concatenate([edges, [len(chosen)]]).astype(np.int64)
    starts_tok = np.frombuffer(cands.start, dtype=np.int64)
    done = 0
    for a, b in zip(starts, stops, strict=True):
        check(cancel)
        lo = int(starts_tok[a])
        hi = int(starts_tok[b - 1] + lens[b - 1])
        w = val if chosen[a] else train
        pieces = [(lo, hi, w)]
        if cut is not None and a <= cut[0] < b:  # a run of train units holding the cut one
            end = int(starts_tok[cut[0]] + lens[cut[0]])
            pieces = [(lo, end - cut[1], train), (end - cut[1], end, val), (end, hi, train)]
        for p_lo, p_hi, p_w in pieces:
            for x in range(p_lo, p_hi, COPY_TOKENS):
                p_w.write(np.asarray(cand_mm[x:min(p_hi, x + COPY_TOKENS)]))
        done += hi - lo
        report("split", done, cands.tokens, "tokens")
    del cand_mm


def _too_little_text(total: int, units: int) -> PrepareError:
    return PrepareError(t(
        f"слишком мало текста, чтобы отложить проверочную выборку ({total} "
        f"{plural_ru(total, 'токен', 'токена', 'токенов')}, {units} "
        f"{plural_ru(units, 'кусок', 'куска', 'кусков')}): добавьте данных",
        f"too little text to hold out a validation sample ({total} {'token' if total == 1 else 'tokens'} "
        f"in {units} {'piece' if units == 1 else 'pieces'}): add more data",
    ))


def encode_and_split(lib: Library, sources: list[Source], tok: Any, tmp: Path, context: int,
                     total_chars: int, report: Reporter, cancel: CancelToken | None,
                     warnings: list[str]) -> dict[str, Any]:
    """Write tmp/train.bin and tmp/val.bin from the sources; the meta's counts and split."""
    train = Writer(tmp / "train.bin")
    cands = _Candidates(tmp / "candidates.bin")
    tally = _Tally(len(sources))
    val: Writer | None = None
    try:
        _encode_pass(lib, sources, tok, train, cands, tally, total_chars, report, cancel)
        total = train.tokens + cands.tokens
        target = max(int(np.ceil(VAL_FRACTION * total)), MIN_VAL_SEGMENTS * context + 1)
        cap = max(int(MAX_VAL_FRACTION * total), min(context + 1, total // 2))
        chosen = choose_val(cands.hashes(), cands.lens(), cands.limit(), target, cap)
        floor = EVAL_FLOOR_SEGMENTS * (context + 1)
        held = int(cands.lens()[chosen].sum())
        cut = None
        if held < floor:
            if floor > MAX_FLOOR_FRACTION * total:
                raise _too_small_to_evaluate(total, floor, context)
            chosen, cut = top_up_val(cands.hashes(), cands.lens(), cands.limit(), chosen, floor - held)
        if not chosen.any() and cut is None:
            raise _too_little_text(total, tally.units)
        val = Writer(tmp / "val.bin")
        _copy_candidates(cands, chosen, train, val, report, cancel, cut)
        train.close()
        val.close()
        cands.path.unlink()
        report("split", cands.tokens, cands.tokens, "tokens", force=True)
    except BaseException:
        cands.f.close()
        train.f.close()
        if val is not None:
            val.f.close()
        raise
    if val.tokens < target:
        segments = val.tokens // context
        warnings.append(said(
            f"проверочная выборка меньше желаемой: {segments} "
            f"{plural_ru(segments, 'отрезок', 'отрезка', 'отрезков')} по {context} (нужно {MIN_VAL_SEGMENTS}); данных мало",
            f"the validation sample is smaller than wanted: {segments} segments of "
            f"{context} (wanted {MIN_VAL_SEGMENTS}); there is little data",
            key=VAL_SAMPLE_WARNING,
        ))
    meta = _split_meta(sources, tally, train, val, int(chosen.sum()), context, target)
    meta["val_split"].update(floor_segments=EVAL_FLOOR_SEGMENTS, cut_tokens=cut[1] if cut else 0)
    return meta


def _split_meta(sources: list[Source], tally: _Tally, train: Writer, val: Writer, val_units: int,
                context: int, target: int) -> dict[str, Any]:
    total = train.tokens + val.tokens
    tokens_by_const: dict[str, int] = {}
    for s, n in zip(sources, tally.tokens, strict=True):
        tokens_by_const[s.constellation] = tokens_by_const.get(s.constellation, 0) + n
    return {
        "train_tokens": train.tokens,
        "val_tokens": val.tokens,
        "tokens_by_constellation": {n: tokens_by_const.get(n, 0) for n in dict.fromkeys(s.constellation for s in sources)},
        "sources": [
            {"dataset": s.dataset.name, "constellation": s.constellation, "sha256": s.dataset.sha256,
             "kind": s.dataset.kind, "files": s.dataset.files, "bytes": s.dataset.bytes,
             "documents": tally.docs[i], "characters": s.dataset.characters,
             "tokens": tally.tokens[i]}
            for i, s in enumerate(sources)
        ],
        "val_split": {
            "method": "unit-hash",
            "about": "units (documents, or ~16k-character runs of paragraphs of a long one) with the "
                     "smallest blake2b-64 hashes of their text go to val; equal text goes the same way",
            "target_fraction": VAL_FRACTION,
            "min_segments": MIN_VAL_SEGMENTS,
            "max_fraction": MAX_VAL_FRACTION,
            "context": context,
            "target_tokens": target,
            "val_units": val_units,
            "train_units": tally.units - val_units,
            "segments": val.tokens // context,
            "fraction": val.tokens / total if total else 0.0,
        },
        "_train_sha": train.hash.hexdigest(),
        "_val_sha": val.hash.hexdigest(),
    }


def _too_small_to_evaluate(total: int, floor: int, context: int) -> PrepareError:
    tokens = (("токен", "токена", "токенов"), ("token", "tokens"))
    segments = (("отрезок", "отрезка", "отрезков"), ("segment", "segments"))
    return PrepareError(t(
        f"текст слишком мал, чтобы проверять на нём обучение: в нём {counted(total, *tokens, 'ru')}, а для "
        f"проверки нужно отложить хотя бы {counted(floor, *tokens, 'ru')} "
        f"({counted(EVAL_FLOOR_SEGMENTS, *segments, 'ru')} по контексту {context} + 1) — больше четверти "
        "текста. Добавьте текста или уменьшите контекст",
        f"the text is too small to evaluate training on: it has {counted(total, *tokens, 'en')}, and an "
        f"evaluation needs at least {counted(floor, *tokens, 'en')} held out "
        f"({counted(EVAL_FLOOR_SEGMENTS, *segments, 'en')} of context {context} + 1) — more than a quarter "
        "of the text. Add text or lower the context",
    ))


def top_up_val(hashes: np.ndarray, lens: np.ndarray, limit: int, chosen: np.ndarray,
               need: int) -> tuple[np.ndarray, tuple[int, int] | None]:
    """Hold out `need` more tokens by tokens, not whole units: the unchosen candidates in
    hash order (below `limit`), whole while they fit, then the last one's end cut off:
    (the new choice, (that candidate, its tokens to val) or None). A unit whose hash occurs
    twice (equal text) is taken whole or not at all, never cut."""
    chosen = chosen.copy()
    order = np.argsort(hashes, kind="stable")
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    twice = counts[inverse] > 1
    for i in order:
        if need <= 0:
            break
        if chosen[i] or (limit < 1 << 64 and hashes[i] >= np.uint64(limit)):
            continue
        group = hashes == hashes[i] if twice[i] else np.asarray([i])  # equal text goes the same way
        size = int(lens[group].sum())
        if size <= need:
            chosen[group] = True
            need -= size
        elif not twice[i]:
            return chosen, (int(i), need)
    return chosen, None


def choose_val(hashes: np.ndarray, lens: np.ndarray, limit: int, target: int, cap: int) -> np.ndarray:
    """Which candidates go to val: whole groups of equal hash, smallest first, until `target`
    tokens, never past `cap` tokens, and only below `limit` (where the candidates are all)."""
    chosen = np.zeros(len(hashes), dtype=bool)
    if not len(hashes):
        return chosen
    order = np.argsort(hashes, kind="stable")
    hs, ls = hashes[order], lens[order]
    if limit < 1 << 64:
        keep = hs < np.uint64(limit)
        hs, ls = hs[keep], ls[keep]
    if not len(hs):
        return chosen
    uniq, first = np.unique(hs, return_index=True)
    sums = np.cumsum(np.add.reduceat(ls, first))
    fits = int(np.searchsorted(sums, cap, side="right"))  # groups whose running total ≤ cap
    if fits == 0:
        return chosen
    reach = int(np.searchsorted(sums[:fits], target, side="left"))  # first group reaching target
    take = min(fits, reach + 1)
    cutoff = uniq[take - 1]
    chosen[order[: int(np.searchsorted(hashes[order], cutoff, side="right"))]] = True
    return chosen
