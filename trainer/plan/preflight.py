"""What the trainer checks before it builds anything, without torch: the prepared data
folder against the model (its files, vocabulary and size) and the checkpoint a run resumes
from (there, the run and step its content says, its model, its tokenizer, its step against
training.steps_to). run.json's own rules are trainer.config.run_config's.

The trainer runs these at its start (trainer/run/data.py, trainer/run/train.py); the lab runs the
same functions through `check_start` before it creates a run (app/runs/precheck.py), so a
run the trainer would refuse at once is refused before a run folder or history row exists,
by one rule. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.config.run_config import ConfigError, RunConfig
from trainer.state.checkpoint_index import (
    CheckpointError,
    identity,
    read_payload,
    resume_path,
)

REQUIRED_FILES = ("tokenizer.json", "train.bin", "val.bin", "meta.json")
TOKEN_BYTES = 2  # uint16 token ids


class DataError(ValueError):
    """Prepared data that cannot be read: the message names the file and what to do."""


@dataclass(frozen=True)
class DataFolder:
    """A prepared-data folder whose files are all there: what a run needs to know of it."""

    dir: Path
    meta: dict[str, Any]
    train_tokens: int
    val_tokens: int

    @property
    def vocab_size(self) -> int:
        return int(self.meta.get("vocab_size", 0) or 0)

    def tokenizer_sha256(self) -> str:
        return hashlib.sha256((self.dir / "tokenizer.json").read_bytes()).hexdigest()

    def data_id(self) -> str:
        return str(self.meta.get("data_id") or hashlib.sha256((self.dir / "meta.json").read_bytes()).hexdigest())


def data_folder(data_dir: str | Path) -> DataFolder:
    """The prepared-data folder run.json's data.dir names, with every file a run reads
    there and readable; DataError naming what is wrong (an empty data.dir, a folder that is
    missing, a file in its place, a file it lacks, a meta.json or .bin that is not one)."""
    if not str(data_dir):
        raise DataError("data.dir is empty: name a prepared-data folder (ternit data prepared lists them) "
                        "or prepare data first (ternit data prepare)")
    d = Path(data_dir)
    if d.is_file():
        raise DataError(f"data.dir {str(data_dir)!r} is a file, not a prepared-data folder: "
                        "name the folder that holds it, or prepare data first (ternit data prepare)")
    if not d.is_dir():
        raise DataError(f"data.dir {str(data_dir)!r} is not a folder: prepare data first (ternit data prepare)")
    missing = [f for f in REQUIRED_FILES if not (d / f).is_file()]
    if missing:
        raise DataError(f"{d} lacks {', '.join(missing)}: prepare the data again (ternit data prepare)")
    try:
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    except (ValueError, OSError) as e:
        raise DataError(f"{d / 'meta.json'} is not valid JSON ({e}): prepare the data again") from None
    if not isinstance(meta, dict):
        raise DataError(f"{d / 'meta.json'} does not hold a JSON object: prepare the data again")
    tokens = {}
    for split in ("train", "val"):
        path = d / f"{split}.bin"
        size = path.stat().st_size
        if size < 2 * TOKEN_BYTES or size % TOKEN_BYTES:
            raise DataError(f"{path} is empty or not uint16 token ids: prepare the data again")
        tokens[split] = size // TOKEN_BYTES
    return DataFolder(d, meta, tokens["train"], tokens["val"])


def check_data(cfg: RunConfig, data: DataFolder) -> None:
    """The rules that need the data: the context against its size, the vocabulary against its."""
    n = cfg.model.context
    if data.train_tokens < n + 2:
        raise ConfigError(f"model.context {n} is larger than the training data allows ({data.train_tokens} tokens): "
                          "lower the context or add data")
    if data.val_tokens < n + 1:
        raise ConfigError(f"model.context {n} is larger than the validation sample ({data.val_tokens} tokens): "
                          "lower the context or add data")
    if data.vocab_size > cfg.model.vocab:
        raise ConfigError(f"the data's vocabulary ({data.vocab_size}) is bigger than model.vocab ({cfg.model.vocab}): "
                          f"set model.vocab to at least {data.vocab_size}")


def check_resume(cfg: RunConfig, path: Path, payload: dict[str, Any], tokenizer_sha256: str | None) -> str | None:
    """Whether the run may go on from the checkpoint at `path` whose payload is `payload`
    (the trainer's torch.load, or read_payload without torch): its content is the step
    its name says of the run whose folder holds it, its model is run.json's, its tokenizer
    the data's (when `tokenizer_sha256` is given), its step below training.steps_to.
    CheckpointError or ConfigError when not; returns a note to say (an older checkpoint
    whose run could not be checked) or None."""
    who = identity(path, payload)
    if who.problem:
        raise CheckpointError(f"{who.problem}: it is another run's checkpoint or a copy put there by hand; "
                              "resume from one of this run's own checkpoints")
    saved_model = (payload.get("config") or {}).get("model") or {}
    for key, value in saved_model.items():
        mine = getattr(cfg.model, key, None)
        if mine != value:
            raise CheckpointError(f"model.{key} is {mine} in run.json but {value} in checkpoint {path}: "
                                  "a checkpoint continues only with its own model shape")
    saved_tokenizer = (payload.get("data") or {}).get("tokenizer_sha256")
    if tokenizer_sha256 and saved_tokenizer and tokenizer_sha256 != saved_tokenizer:
        raise ConfigError(f"the data in {cfg.data.dir} uses another tokenizer than checkpoint {path}: "
                          "prepare the new data with the checkpoint's tokenizer (ternit data prepare --tokenizer …)")
    step = payload.get("step")
    if isinstance(step, int) and cfg.training.steps_to < step:
        raise ConfigError(f"training.steps_to {cfg.training.steps_to} is below the checkpoint's step {step} ({path}): "
                          f"set it above {step} to train further")
    return f"checkpoint {path.name}: {who.note}" if who.note else None


def check_start(cfg: RunConfig, resume: str | None = None) -> list[str]:
    """Everything the trainer checks at its start before it builds the model, for a run.json
    already read by trainer.config.run_config: the data folder and, when the run resumes from a named
    checkpoint (`resume`, else run.json's resume_from), that checkpoint. Raises DataError,
    ConfigError or CheckpointError with the trainer's own message; returns notes to say."""
    data = data_folder(cfg.data.dir)
    check_data(cfg, data)
    spec = resume if resume is not None else cfg.resume_from
    if not spec or spec == "latest":  # `latest` is the run folder's own, read at the start
        return []
    path = resume_path(spec)
    note = check_resume(cfg, path, read_payload(path), data.tokenizer_sha256())
    return [note] if note else []
