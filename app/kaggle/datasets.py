"""What a kernel needs, as private datasets of the account, uploaded once per content hash.

Three kinds, each with a marker file (TERNIT_MARKER.json: kind + hash) at its root so that
the kernel finds it under the input root wherever Kaggle mounts it:
- code: the trainer package (trainer/*.py), uploaded as a folder (dir_mode="zip"; Kaggle
  unpacks it back into trainer/);
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
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..i18n import t
from ..numbers import decimal_text
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


def code_bundle() -> Bundle:
    root = trainer_dir()
    files = []
    parts = []
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        name = "trainer/" + p.relative_to(root).as_posix()
        files.append((name, p))
        parts.append((name, hashlib.sha256(p.read_bytes()).hexdigest()))
    return Bundle("code", combine(parts), tuple(files), t("код тренера", "trainer code"))


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
