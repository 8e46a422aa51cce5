"""What a kernel needs, as private datasets of the account, uploaded once per content hash.

Three kinds, each with a marker file (TERNIT_MARKER.json: kind + hash) at its root so that
the kernel finds it under the input root wherever Kaggle mounts it:
- code: the trainer package (trainer/**/*.py: every room), uploaded as a folder (dir_mode="zip"; Kaggle
  unpacks it back into trainer/); for a run with training.lean_state on, also the wheel of
  the library the lean state needs (bitsandbytes), at the dataset's root, which the kernel
  installs offline (Kaggle's image does not ship it: docs/KAGGLE.md);
- data: the prepared data (tokenizer.json, train.bin, val.bin, meta.json);
- checkpoint: one checkpoint file, when a run continues.
The slug is the hash, so the same content is the same dataset: an account that holds it
already (per the state, confirmed with Kaggle) is not uploaded to again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.config.run_config import lean_mode
from trainer.state.checkpoint_index import hash_path, is_dcp

from ..base import paths
from ..base.i18n import t
from ..base.numbers import decimal_text, duration_text
from .client import AccountClient
from .errors import KaggleError, UploadFailed
from .store import KaggleStore, combine

MARKER = "TERNIT_MARKER.json"
DATA_FILES = ("tokenizer.json", "train.bin", "val.bin", "meta.json")
SLUG_KIND = {"code": "code", "data": "data", "checkpoint": "ckpt"}
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Bundle:
    kind: str                        # code | data | checkpoint
    content_hash: str
    files: tuple[tuple[str, Path], ...]  # (name inside the dataset, local file)
    label: str
    marker: tuple[tuple[str, Any], ...] = ()  # more for the marker file (a sharded checkpoint's layout)

    @property
    def slug(self) -> str:
        return f"ternit-{SLUG_KIND[self.kind]}-{self.content_hash[:16]}"

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for _, p in self.files)

    def ref(self, username: str) -> str:
        return f"{username}/{self.slug}"


def trainer_dir() -> Path:
    spec = importlib.util.find_spec("trainer")
    if spec is None or not spec.submodule_search_locations:
        raise KaggleError(t("не найден пакет trainer лаборатории", "the lab's trainer package is not found"))
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def code_bundle(lean: bool = False, progress: Progress | None = None) -> Bundle:
    """The trainer package; with `lean`, also the lean state's library as a wheel (fetched
    once into the lab's cache: lean_wheel)."""
    root = trainer_dir()
    files = []
    parts = []
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        name = "trainer/" + p.relative_to(root).as_posix()
        files.append((name, p))
        parts.append((name, hashlib.sha256(p.read_bytes()).hexdigest()))
    label = t("код тренера", "trainer code")
    if lean:
        wheel = lean_wheel(progress)
        files.append((wheel.name, wheel))
        parts.append((wheel.name, sha256_of(wheel)))
        label = t(f"код тренера и {wheel.name}", f"trainer code and {wheel.name}")
    return Bundle("code", combine(parts), tuple(files), label)


def needs_wheel(config: dict[str, Any]) -> bool:
    """Whether a run's kernel needs the lean state's library (training.lean_state on)."""
    return lean_mode((config.get("training") or {}).get("lean_state", False)) != "off"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---- the lean state's library for a kernel (internet off) ------------------------------------
# Kaggle's GPU image has no bitsandbytes (docs/KAGGLE.md says where that was checked), and a
# kernel has no internet, so the wheel travels in the code dataset. Fetched from PyPI on the
# user's machine for the kernel's platform, not the user's: a Linux x86-64 wheel whatever
# the lab runs on (a Windows PC would otherwise get a win_amd64 wheel). bitsandbytes ships
# one py3-none wheel for every CPython ≥ 3.10 with its CUDA builds inside (T4 included);
# KAGGLE_PYTHON is the image's Python (3.12), for pip's Requires-Python check. Its
# dependencies (torch, numpy, packaging) are in the image: --no-deps.
LEAN_LIBRARY = "bitsandbytes"
LEAN_SPEC = "bitsandbytes>=0.45,<1"
KAGGLE_PYTHON = "3.12"
KAGGLE_PLATFORMS = ("manylinux_2_24_x86_64", "manylinux_2_28_x86_64", "manylinux2014_x86_64")
_WHEEL = re.compile(rf"^{LEAN_LIBRARY}-(\d+(?:\.\d+)*)[^-]*-[^-]+-[^-]+-([^-]+)\.whl$")


def wheel_cache_dir() -> Path:
    path = paths.data_dir() / "cache" / "kaggle-wheels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached_lean_wheel(folder: Path) -> Path | None:
    """The newest bitsandbytes wheel in `folder` that a Kaggle kernel can install."""
    found = []
    for p in folder.glob(f"{LEAN_LIBRARY}-*.whl"):
        m = _WHEEL.match(p.name)
        if m and p.is_file() and (m.group(2) == "any" or "linux" in m.group(2) and "x86_64" in m.group(2)):
            found.append((tuple(int(x) for x in m.group(1).split(".")), p.name, p))
    return max(found)[2] if found else None


def pip_download_command(dest: Path) -> list[str]:
    """pip download of the lean library's wheel for Kaggle's platform and Python."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--python-version", KAGGLE_PYTHON, "--implementation", "cp",
           "--dest", str(dest)]
    for platform in KAGGLE_PLATFORMS:
        cmd += ["--platform", platform]
    return [*cmd, LEAN_SPEC]


def lean_wheel(progress: Progress | None = None, timeout_s: float = 900.0) -> Path:
    """The wheel for the kernel: from the lab's cache, else downloaded into it once (into a
    temporary folder first, so a cut-off download never lies in the cache)."""
    folder = wheel_cache_dir()
    have = cached_lean_wheel(folder)
    if have is not None:
        return have
    if progress:
        progress(t(f"загрузка {LEAN_LIBRARY} для ядра Kaggle (с PyPI, один раз)",
                   f"downloading {LEAN_LIBRARY} for the Kaggle kernel (from PyPI, once)"))
    with tempfile.TemporaryDirectory(prefix="download-", dir=folder) as tmp:
        try:
            done = subprocess.run(pip_download_command(Path(tmp)), capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL)
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] if done.returncode else []
        except (OSError, subprocess.SubprocessError) as e:
            why = [str(e)]
        got = cached_lean_wheel(Path(tmp)) if not why else None
        if got is None:
            reason = why[0][:300] if why else t("pip не нашёл подходящего колеса", "pip found no suitable wheel")
            raise KaggleError(t(
                f"не удалось скачать {LEAN_LIBRARY} для ядра Kaggle ({reason}). Облегчённое состояние "
                f"(lean_state) на Kaggle требует его: проверьте интернет и повторите, положите колесо "
                f"{LEAN_LIBRARY} для Linux x86-64 в {folder} или выключите lean_state",
                f"could not download {LEAN_LIBRARY} for the Kaggle kernel ({reason}). The lean state "
                f"(lean_state) on Kaggle needs it: check the internet connection and retry, put a Linux "
                f"x86-64 {LEAN_LIBRARY} wheel into {folder}, or turn lean_state off",
            ))
        os.replace(got, folder / got.name)
    return folder / got.name


def data_bundle(data_dir: Path, store: KaggleStore) -> Bundle:
    data_dir = Path(data_dir)
    missing = [n for n in DATA_FILES if not (data_dir / n).is_file()]
    if missing:
        raise KaggleError(t(
            f"в папке данных {data_dir} нет {', '.join(missing)}: подготовьте данные (ternit data prepare)",
            f"the data folder {data_dir} lacks {', '.join(missing)}: prepare the data (ternit data prepare)",
        ))
    files = tuple((n, data_dir / n) for n in DATA_FILES)
    digest = combine((n, store.file_sha256(p)) for n, p in files)
    return Bundle("data", digest, files, t(f"данные {data_dir.name}", f"data {data_dir.name}"))


def data_hash_cached(data_dir: Path, store: KaggleStore) -> str | None:
    """The data's hash only if every file's hash is cached (no reading): for the form."""
    parts = []
    for n in DATA_FILES:
        h = store.cached_sha256(Path(data_dir) / n)
        if h is None:
            return None
        parts.append((n, h))
    return combine(parts)


def checkpoint_hash_cached(path: Path, store: KaggleStore) -> str | None:
    """A checkpoint's dataset hash without reading it whole (for the form): a .dcp folder's
    from its SHA-256 list, a .pt file's if cached."""
    path = Path(path)
    if is_dcp(path):
        try:
            return hashlib.sha256(hash_path(path).read_text(encoding="utf-8").encode()).hexdigest()
        except OSError:
            return None
    return store.cached_sha256(path)


def checkpoint_bundle(path: Path, store: KaggleStore) -> Bundle:
    """A checkpoint to continue from: a step-*.pt file as it is; a sharded run's step-*.dcp
    folder as its files, flat, under plain names (dcp-000…: no folder to archive, no dot
    file such as .metadata to lose), their real names and the folder's SHA-256 list in the
    marker, from which the kernel puts the folder back together (links, no copy). Its
    size is bounded by Kaggle's outputs (app/kaggle/room.py), far under a dataset's limit."""
    path = Path(path)
    label = t(f"чекпоинт {path.name}", f"checkpoint {path.name}")
    if not is_dcp(path):
        return Bundle("checkpoint", store.file_sha256(path), ((path.name, path),), label)
    try:
        manifest = hash_path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise KaggleError(t(f"у чекпоинта {path.name} нет списка SHA-256 ({hash_path(path).name}): он неполон",
                            f"checkpoint {path.name} has no SHA-256 list ({hash_path(path).name}): it is incomplete")) from e
    inside = sorted(f for f in path.rglob("*") if f.is_file())
    staged = tuple((f"dcp-{i:03d}", f) for i, f in enumerate(inside))
    layout = {"name": path.name, "manifest": manifest,
              "files": {name: f.relative_to(path).as_posix() for name, f in staged}}
    digest = hashlib.sha256(manifest.encode()).hexdigest()  # the checkpoint's own hash (its event's)
    return Bundle("checkpoint", digest, staged, label, (("dcp", layout),))


def _stage(bundle: Bundle, username: str, folder: Path) -> None:
    meta = {"id": bundle.ref(username), "title": bundle.slug, "licenses": [{"name": "CC0-1.0"}],
            "subtitle": "Ternit Lab: private files for training kernels"}
    (folder / "dataset-metadata.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    (folder / MARKER).write_text(json.dumps({"kind": bundle.kind, "hash": bundle.content_hash,
                                             "lab": "ternit-lab", **dict(bundle.marker)}), encoding="utf-8")
    for name, src in bundle.files:
        dst = folder / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:  # a link, not a copy: the data can be gigabytes
            os.symlink(src.resolve(), dst)
        except OSError:
            shutil.copy2(src, dst)


class Cancelled(KaggleError):
    """The user stopped the run while the lab waited for Kaggle: nothing was pushed."""


# How many status answers in a row may say "not there" right after the lab created a
# dataset before it counts as deleted (Kaggle may take a moment to list a new one).
ABSENT_AFTER_CREATE = 3


def ensure(client: AccountClient, store: KaggleStore, bundle: Bundle, progress: Progress | None = None,
           ready_timeout_s: float = 3600.0, poll_s: float = 5.0,
           cancelled: Callable[[], bool] | None = None) -> str:
    """The dataset's ref on this account, uploading it first unless the account holds it,
    then waiting until Kaggle has processed it (a kernel cannot mount it before), saying how
    long it has waited. Absent is absent (403 or 404, never a refused key); a dataset deleted
    while the lab waits is said at once; `cancelled()` true stops the wait (Cancelled)."""
    say = progress or (lambda _msg: None)
    user = client.username
    ref = bundle.ref(user)
    stage = client.dataset_stage(ref)
    if stage is None:
        if store.dataset(user, bundle.content_hash) is not None:  # deleted on Kaggle since: upload again
            store.drop_dataset(user, bundle.content_hash)
        _upload(client, bundle, ref, say)
        stage = _stage_after_create(client, ref, poll_s)
    _wait_ready(client, bundle, ref, stage, say, ready_timeout_s, poll_s, cancelled)
    store.record_dataset(user, bundle.content_hash, bundle.kind, ref, bundle.label, bundle.size)
    return ref


def _upload(client: AccountClient, bundle: Bundle, ref: str, say: Progress) -> None:
    user = client.username
    mb = bundle.size / 1e6
    say(t(f"загрузка на {user}: {bundle.label} ({decimal_text(mb, 1, 'ru')} МБ)",
          f"uploading to {user}: {bundle.label} ({decimal_text(mb, 1, 'en')} MB)"))
    with tempfile.TemporaryDirectory(prefix="ternit-dataset-") as tmp:
        _stage(bundle, user, Path(tmp))
        created = client.dataset_create(Path(tmp))
    if created and created.strip("/").split("/")[-2:] != ref.split("/"):
        raise UploadFailed(t(f"Kaggle создал {created} вместо {ref}", f"Kaggle created {created} instead of {ref}"))


def _stage_after_create(client: AccountClient, ref: str, poll_s: float) -> str | None:
    for attempt in range(ABSENT_AFTER_CREATE):
        stage = client.dataset_stage(ref)
        if stage is not None or attempt == ABSENT_AFTER_CREATE - 1:
            return stage
        time.sleep(poll_s)
    return None


def _wait_ready(client: AccountClient, bundle: Bundle, ref: str, stage: str | None, say: Progress,
                timeout_s: float, poll_s: float, cancelled: Callable[[], bool] | None) -> None:
    started = time.monotonic()
    while stage != "ready":
        if stage is None:
            raise UploadFailed(t(
                f"датасет {ref} исчез с Kaggle (удалён?) — запустите прогон ещё раз, лаборатория загрузит его заново",
                f"dataset {ref} is gone from Kaggle (deleted?) — start the run again and the lab uploads it anew"))
        if stage == "failed":
            raise UploadFailed(t(f"Kaggle не смог обработать датасет {ref}; запустите прогон ещё раз",
                                 f"Kaggle failed to process dataset {ref}; start the run again"))
        waited = time.monotonic() - started
        if waited > timeout_s:
            raise UploadFailed(t(f"датасет {ref} так и не стал готов на Kaggle за {duration_text(waited)}",
                                 f"dataset {ref} never became ready on Kaggle in {duration_text(waited)}"))
        if cancelled is not None and cancelled():
            raise Cancelled(t("остановлен, пока Kaggle обрабатывал датасет: на Kaggle ничего не запущено",
                              "stopped while Kaggle processed a dataset: nothing runs on Kaggle"))
        say(t(f"Kaggle обрабатывает {bundle.label} ({ref}): {stage.replace('_', ' ')}, ждём {duration_text(waited, 'ru')}",
              f"Kaggle is processing {bundle.label} ({ref}): {stage.replace('_', ' ')}, waited {duration_text(waited, 'en')}"))
        time.sleep(poll_s)
        stage = client.dataset_stage(ref)
