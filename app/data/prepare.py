"""Prepared data: the byte-level BPE tokenizer and the uint16 token files the trainer reads.

    <out>/tokenizer.json   HF tokenizers byte-level BPE, "<|endoftext|>" between documents
    <out>/train.bin        uint16 little-endian token ids
    <out>/val.bin          uint16, the held-out sample
    <out>/meta.json        counts, sources and their hashes, how val was chosen, data_id

How it works, and why:
- Streaming, and the held-out sample chosen by the hash of each unit's text: the one pass
  over the text is app.data.encode's (its docstring says how and why).
- Cached by (sources' hashes, tokenizer, vocab, context, split rule): the same request returns
  the existing folder at once.
- Atomic: everything is written into a temporary sibling folder, fsynced and renamed into
  place at the end; an interrupted prepare leaves no folder that looks complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from trainer.config.run_config import MAX_VOCAB

from ..base import paths
from ..base.atomic import fsync_dir, fsync_file
from ..base.i18n import said, t
from .encode import (
    EOT,
    MAX_VAL_FRACTION,
    MIN_VAL_SEGMENTS,
    VAL_FRACTION,
    PrepareError,
    Source,
    encode_and_split,
    iter_units,
    unit_hash,
)
from .library import Dataset, Library
from .progress import CancelToken, ProgressFn, Reporter, check

FORMAT = 1
PIPELINE = "ternit-prepare-2"  # change when the same inputs would give different files (2: cp1251 text)
DEFAULT_VOCAB = 4000
DEFAULT_CONTEXT = 1024
# At least every byte; at most what uint16 ids hold, 0…65,535: 65,536 tokens, the trainer's
# own limit (trainer.config.run_config.MAX_VOCAB, the one place it is stated).
MIN_VOCAB = 256
TOKENIZER_SAMPLE_CHARS = 100_000_000  # BPE is trained on at most about this much text (its memory grows with the unique words seen)
REQUIRED = ("tokenizer.json", "train.bin", "val.bin", "meta.json")


@dataclass
class PrepareResult:
    path: Path
    meta: dict[str, Any]
    cached: bool
    warnings: list[str] = field(default_factory=list)


def validate_vocab(vocab: int) -> None:
    if not isinstance(vocab, int) or not MIN_VOCAB <= vocab <= MAX_VOCAB:
        raise PrepareError(t(
            f"словарь {vocab} не подходит: нужно от {MIN_VOCAB} (все 256 байт) до {MAX_VOCAB} "
            "(номера токенов хранятся в uint16)",
            f"vocabulary {vocab} refused: it must be from {MIN_VOCAB} (all 256 bytes) to {MAX_VOCAB} "
            "(token ids are stored as uint16)",
        ), exit_code=2)


def new_tokenizer(vocab: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[EOT],
        show_progress=False,
    )
    return tok, trainer


# tokenizers 0.23 keeps ~10 MB per Tokenizer that has encoded text even after it is dropped
# (seen here: RSS +10..17 MB per load-encode-drop, none when one instance is reused; cf.
# huggingface/tokenizers#1539). The window prepares many times in one process, so loaded
# and trained tokenizers are kept and reused by the sha256 of their tokenizer.json.
_TOKENIZERS: OrderedDict[str, Any] = OrderedDict()
_TOKENIZERS_LOCK = threading.Lock()
_TOKENIZERS_KEPT = 4


def _remember_tokenizer(sha: str, tok: Any) -> Any:
    with _TOKENIZERS_LOCK:
        tok = _TOKENIZERS.setdefault(sha, tok)
        _TOKENIZERS.move_to_end(sha)
        while len(_TOKENIZERS) > _TOKENIZERS_KEPT:
            _TOKENIZERS.popitem(last=False)
        return tok


def load_tokenizer(path: Path, sha: str | None = None):
    """The tokenizer in `path`, checked (ids fit uint16, has the end-of-text token); one
    instance per content in this process."""
    from tokenizers import Tokenizer

    if not path.is_file():
        raise PrepareError(t(f"нет файла токенизатора: {path}", f"no tokenizer file: {path}"), exit_code=2)
    sha = sha or _sha256_file(path)
    with _TOKENIZERS_LOCK:
        if sha in _TOKENIZERS:
            return _TOKENIZERS[sha]
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises plain Exception for a bad file
        raise PrepareError(t(
            f"{path} — не токенизатор Hugging Face tokenizers ({exc})",
            f"{path} is not a Hugging Face tokenizers file ({exc})",
        )) from exc
    if tok.get_vocab_size() > MAX_VOCAB:
        raise PrepareError(t(
            f"в токенизаторе {path} {tok.get_vocab_size()} токенов: номера не помещаются в uint16",
            f"the tokenizer {path} has {tok.get_vocab_size()} tokens: ids do not fit uint16",
        ))
    if tok.token_to_id(EOT) is None:
        raise PrepareError(t(
            f"в токенизаторе {path} нет токена {EOT}, который разделяет документы",
            f"the tokenizer {path} lacks the {EOT} token that separates documents",
        ))
    return _remember_tokenizer(sha, tok)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# The readable part of a prepared folder's name (its cache key's start follows it): long
# constellation names would otherwise push the files inside past Windows' 260-character path
# limit (MAX_PATH), and past 255 bytes a name is refused on Linux too.
NAME_CHARS = 40


def _safe_name(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text, flags=re.UNICODE).strip("_")[:NAME_CHARS].rstrip("_.") or "data"


def _intact(folder: Path, key: str | None = None) -> dict[str, Any] | None:
    """The folder's meta if it is a complete prepared folder (and of `key`, if given)."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT or (key is not None and meta.get("cache_key") != key):
            return None
        if (folder / "train.bin").stat().st_size != 2 * meta["train_tokens"]:
            return None
        if (folder / "val.bin").stat().st_size != 2 * meta["val_tokens"]:
            return None
        if _sha256_file(folder / "tokenizer.json") != meta["tokenizer_sha256"]:
            return None
        return meta
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remove_temps_of(pid: int, folder: Path | None = None) -> list[Path]:
    """The temporary folders a prepare in process `pid` left (it was killed after «Отмена»
    before it could remove them), removed now, so that «незаконченная папка удалена» holds.
    The folders of prepares still running elsewhere are not touched (they carry their pid)."""
    folder = Path(folder) if folder is not None else paths.prepared_dir()
    gone = []
    for p in folder.glob(f".*.tmp-{int(pid)}-*"):
        shutil.rmtree(p, ignore_errors=True)
        if not p.exists():
            gone.append(p)
    return gone


def _clean_stale_temps(out: Path) -> None:
    """Temporary (and moved-aside old) folders of prepares that were killed: their process is gone."""
    for p in [*out.parent.glob(f".{out.name}.tmp-*"), *out.parent.glob(f".{out.name}.old-*")]:
        try:
            pid = int(re.split(r"\.(?:tmp|old)-", p.name)[-1].split("-")[0])
        except (ValueError, IndexError):
            continue
        # psutil, not os.kill(pid, 0): on Windows that call terminates the process
        if pid != os.getpid() and not psutil.pid_exists(pid):
            shutil.rmtree(p, ignore_errors=True)


def _replace_dir(tmp: Path, out: Path) -> None:
    """Put `tmp` at `out`: a rename; an older folder there is moved aside first, then removed."""
    for name in REQUIRED:
        fsync_file(tmp / name)
    fsync_dir(tmp)  # POSIX only: Windows cannot open a folder; NTFS journals the rename itself
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(out, old)
    os.rename(tmp, out)
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def prepare(
    constellations: Sequence[str],
    out: str | Path | None = None,
    vocab: int | None = None,
    tokenizer: str | Path | None = None,
    context: int = DEFAULT_CONTEXT,
    library: Library | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
    use_cache: bool = True,
) -> PrepareResult:
    """Prepare the text of the given constellations into a folder the trainer reads.

    `tokenizer`: an existing tokenizer.json to reuse (a continued run keeps its checkpoint's
    tokenizer); else a new one of `vocab` tokens is trained. `out`: the folder (default: under
    the lab's prepared/ folder, named after the request). Returns at once when the same
    request was prepared before. Raises PrepareError (with the reason) or Cancelled.
    """
    names = _requested(constellations, context)
    lib = library or Library()
    warnings: list[str] = []
    report = Reporter(progress)
    # The tokenizer first: a bad file or vocabulary is refused before any reading.
    given = _given_tokenizer(tokenizer, vocab, warnings)
    sources = _resolve_sources(lib, names, report, cancel, warnings)
    cache_key = _cache_key(sources, names, given.sha, given.vocab, context)
    if out is None:
        out = paths.prepared_dir() / f"{_safe_name('+'.join(names))}-v{given.vocab}-{cache_key[:12]}"
    out = Path(out).expanduser().resolve()
    _check_out(out)
    try:
        hit = _from_cache(lib, out, cache_key) if use_cache else None
        if hit is not None:
            report("done", 1, 1, force=True)
            return PrepareResult(out, hit, True, warnings)
        out.parent.mkdir(parents=True, exist_ok=True)
        _clean_stale_temps(out)
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        tmp.mkdir()
    except OSError as exc:  # a read-only disk, a folder that cannot be made
        raise _write_failed(exc, out) from exc
    try:
        meta = _write_prepared(tmp, lib, sources, given, names, context, cache_key, report, cancel, warnings)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
        check(cancel)
        _replace_dir(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _write_failed(exc, out) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _record_row(lib, out, meta)
    report("done", 1, 1, force=True)
    return PrepareResult(out, meta, False, warnings)


def _requested(constellations: Sequence[str], context: int) -> list[str]:
    """The constellations asked for, once each; a request that cannot be prepared refused."""
    names = list(dict.fromkeys(n.strip() for n in constellations if n.strip()))
    if not names:
        raise PrepareError(t("не выбрано ни одного созвездия", "no constellation selected"), exit_code=2)
    if not isinstance(context, int) or not 8 <= context <= 1 << 20:
        raise PrepareError(t(f"контекст {context} не подходит (8…1048576)", f"context {context} refused (8..1048576)"), exit_code=2)
    return names


@dataclass
class _Tokenizer:
    """The tokenizer a prepare starts with: a given file's (tok, path, sha) or none yet."""

    vocab: int  # what the request asks for (a given file's own size)
    tok: Any = None
    path: Path | None = None
    sha: str | None = None


def _given_tokenizer(tokenizer: str | Path | None, vocab: int | None, warnings: list[str]) -> _Tokenizer:
    tok_path = Path(tokenizer).expanduser() if tokenizer else None
    if tok_path is None:
        wanted = DEFAULT_VOCAB if vocab is None else vocab
        validate_vocab(wanted)
        return _Tokenizer(wanted)
    tok_sha = _sha256_file(tok_path) if tok_path.is_file() else None
    tok = load_tokenizer(tok_path, tok_sha)
    if vocab is not None and vocab != tok.get_vocab_size():
        warnings.append(said(
            f"словарь берётся из {tok_path.name}: {tok.get_vocab_size()} (а не {vocab})",
            f"the vocabulary comes from {tok_path.name}: {tok.get_vocab_size()} (not {vocab})",
        ))
    return _Tokenizer(tok.get_vocab_size(), tok, tok_path, tok_sha)


def _cache_key(sources: list[Source], names: list[str], tok_sha: str | None, vocab: int, context: int) -> str:
    key_doc = {
        "pipeline": PIPELINE,
        "sources": [[s.constellation, s.dataset.name, s.dataset.sha256] for s in sources],
        "constellations": names,
        "tokenizer": tok_sha,
        "vocab": vocab,
        "context": context,
        "val": [VAL_FRACTION, MIN_VAL_SEGMENTS, MAX_VAL_FRACTION],
    }
    return hashlib.sha256(json.dumps(key_doc, sort_keys=True).encode()).hexdigest()


def _write_prepared(tmp: Path, lib: Library, sources: list[Source], given: _Tokenizer, names: list[str],
                    context: int, cache_key: str, report: Reporter, cancel: CancelToken | None,
                    warnings: list[str]) -> dict[str, Any]:
    """tokenizer.json, train.bin and val.bin in `tmp`; their meta."""
    total_chars = sum(s.dataset.characters for s in sources)
    tok = given.tok
    if tok is None:
        tok = _train_tokenizer(lib, sources, given.vocab, total_chars, report, cancel)
        tok.save(str(tmp / "tokenizer.json"))
        _remember_tokenizer(_sha256_file(tmp / "tokenizer.json"), tok)
        if tok.get_vocab_size() < given.vocab:
            warnings.append(said(
                f"текста мало для словаря {given.vocab}: в токенизаторе {tok.get_vocab_size()} токенов",
                f"too little text for a vocabulary of {given.vocab}: the tokenizer has {tok.get_vocab_size()} tokens",
            ))
    else:
        shutil.copyfile(given.path, tmp / "tokenizer.json")  # type: ignore[arg-type]
    tok_sha = _sha256_file(tmp / "tokenizer.json")
    meta = encode_and_split(lib, sources, tok, tmp, context, total_chars, report, cancel, warnings)
    meta["tokens_by_constellation"] = {n: meta["tokens_by_constellation"].get(n, 0) for n in names}
    meta.update({
        "format": FORMAT,
        "vocab_size": tok.get_vocab_size(),
        "vocab_requested": given.vocab,
        "dtype": "uint16",
        "context": context,
        "constellations": names,
        "eot_token": EOT,
        "eot_id": tok.token_to_id(EOT),
        "tokenizer_sha256": tok_sha,
        "tokenizer_trained": given.path is None,
        "cache_key": cache_key,
        "created_at": time.time(),
        "warnings": warnings,
    })
    meta["data_id"] = hashlib.sha256(
        f"ternit-data-1\n{tok_sha}\n{meta.pop('_train_sha')}\n{meta.pop('_val_sha')}\n".encode()
    ).hexdigest()
    return meta


def _resolve_sources(lib: Library, names: list[str], report: Reporter, cancel: CancelToken | None,
                     warnings: list[str]) -> list[Source]:
    cons = [lib.constellation(n) for n in names]  # an unknown name is an error naming it
    for c in cons:
        if not c.datasets:
            raise PrepareError(t(
                f"в созвездии «{c.name}» нет наборов данных: добавьте (ternit data add ПУТЬ --constellation {c.name})",
                f"the constellation {c.name!r} has no datasets: add some (ternit data add PATH --constellation {c.name})",
            ))
    todo = list(dict.fromkeys(d for c in cons for d in c.datasets))
    fresh: dict[str, Dataset] = {}
    for i, name in enumerate(todo):
        check(cancel)
        report("check", i, len(todo), "", name)
        # Its own file-by-file progress: a changed dataset is read again here, and a big one
        # took minutes with the bar standing at "checking 0 %".
        res = lib.refresh(name, progress=report.callback, cancel=cancel)
        if res.status == "changed":
            warnings.append(said(f"набор «{name}» изменился: {', '.join(res.changes)}",
                              f"dataset {name!r} changed: {', '.join(res.changes)}"))
        for note in res.notes:
            warnings.append(f"{name}: {note}")
        fresh[name] = res.dataset
    report("check", len(todo), len(todo), force=True)
    for c in cons:
        if not any(fresh[d].documents for d in c.datasets):
            raise PrepareError(t(
                f"в созвездии «{c.name}» не осталось текста (файлы пустые, двоичные или нечитаемые: ternit data list)",
                f"the constellation {c.name!r} has no text left (its files are empty, binary or unreadable: ternit data list)",
            ))
    seen: set[str] = set()
    sources = []
    for c in cons:
        for d in c.datasets:
            if d in seen:
                continue
            seen.add(d)
            if fresh[d].documents:
                sources.append(Source(c.name, fresh[d]))
            else:
                warnings.append(said(f"в наборе «{d}» нет текста — пропущен", f"dataset {d!r} has no text: skipped"))
    return sources


def _write_failed(exc: OSError, out: Path) -> PrepareError:
    return PrepareError(t(
        f"подготовка не удалась: {exc}. Проверьте свободное место и доступ к {out.parent} "
        "(или укажите другую папку --out); ничего не записано",
        f"preparing failed: {exc}. Check free space and access to {out.parent} "
        "(or choose another --out); nothing was written",
    ))


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise PrepareError(t(f"{out} — файл, а нужна папка", f"{out} is a file, not a folder"), exit_code=2)
    if out.is_dir() and any(out.iterdir()) and not (out / "meta.json").is_file():
        raise PrepareError(t(
            f"папка {out} не пуста и не похожа на подготовленные данные: укажите новую или пустую папку",
            f"the folder {out} is not empty and holds no prepared data: choose a new or empty folder",
        ), exit_code=2)


def _from_cache(lib: Library, out: Path, key: str) -> dict[str, Any] | None:
    meta = _intact(out, key)
    if meta is not None:
        # (a prepare killed between its rename and its database row left the folder only)
        if lib.state.one("SELECT 1 FROM prepared WHERE path = ? AND data_id = ?", (str(out), meta["data_id"])) is None:
            _record_row(lib, out, meta)
        return meta
    for row in lib.state.query("SELECT path FROM prepared WHERE cache_key = ? ORDER BY created_at DESC", (key,)):
        src = Path(row["path"])
        if src == out or _intact(src, key) is None:
            continue
        # Same content elsewhere: link (or copy) it in; prepared files are never modified in
        # place (a new prepare renames a new folder over), so sharing the inodes is safe.
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        tmp.mkdir()
        try:
            for name in REQUIRED:
                try:
                    os.link(src / name, tmp / name)
                except OSError:
                    shutil.copy2(src / name, tmp / name)
            _replace_dir(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        meta = _intact(out, key)
        if meta is not None:
            _record_row(lib, out, meta)
            return meta
    return None


def _train_tokenizer(lib: Library, sources: list[Source], vocab: int, total_chars: int,
                     report: Reporter, cancel: CancelToken | None):
    tok, trainer = new_tokenizer(vocab)
    rate = min(1.0, TOKENIZER_SAMPLE_CHARS / max(1, total_chars))
    threshold = int(rate * (1 << 64))

    def texts() -> Iterator[str]:
        done = 0
        for _, unit, _end in iter_units(lib, sources, cancel):
            done += len(unit)
            report("tokenizer", done, total_chars, "chars")
            # Beyond the sample size, a fixed hash-chosen part of the text (deterministic).
            if rate >= 1.0 or unit_hash(unit) < threshold:
                yield unit
        report("tokenizer", total_chars, total_chars, "chars", t("слияния…", "merges…"), force=True)

    tok.train_from_iterator(texts(), trainer)
    check(cancel)
    if tok.token_to_id(EOT) is None:  # cannot happen with BpeTrainer, but the contract needs it
        raise PrepareError("internal: trained tokenizer lacks the end-of-text token")
    return tok


def _record_row(lib: Library, out: Path, meta: dict[str, Any]) -> int:
    with lib.state.transaction():
        lib.state.execute("DELETE FROM prepared WHERE path = ?", (str(out),))
        cur = lib.state.execute(
            "INSERT INTO prepared (cache_key, data_id, path, constellations, vocab_size, context,"
            " train_tokens, val_tokens, tokenizer_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (meta["cache_key"], meta["data_id"], str(out), json.dumps(meta["constellations"], ensure_ascii=False),
             meta["vocab_size"], meta["context"], meta["train_tokens"], meta["val_tokens"],
             meta["tokenizer_sha256"], time.time()))
        pid = int(cur.lastrowid)
        lib.state.executemany(
            "INSERT INTO prepared_sources (prepared_id, dataset_name, dataset_sha256, constellation,"
            " tokens, documents) VALUES (?, ?, ?, ?, ?, ?)",
            [(pid, s["dataset"], s["sha256"], s["constellation"], s["tokens"], s["documents"])
             for s in meta["sources"]])
    return pid


def prepared_entries(lib: Library) -> list[dict[str, Any]]:
    """The prepared folders the lab knows, newest first, with whether each is still intact."""
    out = []
    for r in lib.state.query("SELECT * FROM prepared ORDER BY created_at DESC"):
        d = dict(r)
        d["constellations"] = json.loads(d["constellations"])
        d["intact"] = _intact(Path(d["path"]), d["cache_key"]) is not None
        out.append(d)
    return out
