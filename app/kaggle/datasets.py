"""What a kernel needs, as private datasets of the account, uploaded once per content hash.

Three kinds, each with a marker file (TERNIT_MARKER.json: kind + hash) at its root so that
the kernel finds it under the input root wherever Kaggle mounts it:
- code: the trainer package (trainer/*.py), uploaded as a folder (dir_mode="zip"; Kaggle
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

from trainer.config import lean_mode

from ..base import paths
from ..base.i18n import t
from ..base.numbers import decimal_text
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
                f"не удалось скачать {LEAN_LIBRARY} для ядра Kaggle ({reason}). Экономное состояние "
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


def checkpoint_bundle(path: Path, store: KaggleStore) -> Bundle:
    path = Path(path)
    digest = store.file_sha256(path)
    return Bundle("checkpoint", digest, ((path.name, path),), t(f"чекпоинт {path.name}", f"checkpoint {path.name}"))


def _stage(bundle: Bundle, username: str, folder: Path) -> None:
    meta = {"id": bundle.ref(username), "title": bundle.slug, "licenses": [{"name": "CC0-1.0"}],
            "subtitle": "Ternit Lab: private files for training kernels"}
    (folder / "dataset-metadata.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    (folder / MARKER).write_text(json.dumps({"kind": bundle.kind, "hash": bundle.content_hash,
                                             "lab": "ternit-lab"}), encoding="utf-8")
    for name, src in bundle.files:
        dst = folder / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:  # a link, not a copy: the data can be gigabytes
            os.symlink(src.resolve(), dst)
        except OSError:
            shutil.copy2(src, dst)


def ensure(client: AccountClient, store: KaggleStore, bundle: Bundle, progress: Progress | None = None,
           ready_timeout_s: float = 3600.0, poll_s: float = 5.0) -> str:
    """The dataset's ref on this account, uploading it first unless the account holds it."""
    say = progress or (lambda _msg: None)
    user = client.username
    ref = bundle.ref(user)
    known = store.dataset(user, bundle.content_hash)
    state = client.dataset_ready(ref)
    if state is None:
        if known is not None:  # deleted on Kaggle since: upload again
            store.drop_dataset(user, bundle.content_hash)
        mb = bundle.size / 1e6
        say(t(f"загрузка на {user}: {bundle.label} ({decimal_text(mb, 1, 'ru')} МБ)",
              f"uploading to {user}: {bundle.label} ({decimal_text(mb, 1, 'en')} MB)"))
        with tempfile.TemporaryDirectory(prefix="ternit-dataset-") as tmp:
            _stage(bundle, user, Path(tmp))
            created = client.dataset_create(Path(tmp))
        if created and created.strip("/").split("/")[-2:] != ref.split("/"):
            raise UploadFailed(t(f"Kaggle создал {created} вместо {ref}", f"Kaggle created {created} instead of {ref}"))
        state = client.dataset_ready(ref)
    deadline = time.monotonic() + ready_timeout_s
    while not state:
        if time.monotonic() > deadline:
            raise UploadFailed(t(f"датасет {ref} так и не стал готов на Kaggle", f"dataset {ref} never became ready on Kaggle"))
        say(t(f"Kaggle обрабатывает {ref}…", f"Kaggle is processing {ref}…"))
        time.sleep(poll_s)
        state = client.dataset_ready(ref)
    store.record_dataset(user, bundle.content_hash, bundle.kind, ref, bundle.label, bundle.size)
    return ref
