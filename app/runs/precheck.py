"""The lab's one pre-check of a run, before a run folder or history row exists.

`precheck(config)` is what every way of starting a run passes through (`ternit run start`,
the window's «Старт» and «Продолжить», a retry, a Kaggle start before anything is
uploaded): through `RunManager.create`, which calls it before it makes the folder. It runs
the trainer's own rules, not a restatement of them: run.json's contract
(`trainer.config`: every key, every range, a step no machine holds) and the checks the
trainer makes at its start before it builds anything (`trainer.preflight`: the data folder
against the model, the checkpoint it resumes from). Both are torch-free, so the lab runs
them in its own process. Then the machine: a local run's cards must be this PC's
(`process.absent_cards`). A refusal is a RunError with the trainer's (or the lab's) line.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from trainer.checkpoint_index import CheckpointError
from trainer.config import ConfigError, from_dict, parse_json
from trainer.preflight import DataError, check_start

from ..base import paths
from ..base.i18n import t
from .process import absent_cards


class RunError(ValueError):
    """A run cannot be started or changed as asked: the message says why and what to do."""


def precheck(config: dict[str, Any]) -> list[str]:
    """The trainer's verdict on `config` (a run.json as the lab will write it: paths
    absolute, see `normalize_config`), before anything is created: RunError naming the key,
    the data or the checkpoint when the trainer would refuse to start it; else the notes
    to say (an older checkpoint whose run cannot be checked)."""
    try:
        cfg = from_dict(copy.deepcopy(config))
        notes = check_start(cfg)
    except (ConfigError, DataError, CheckpointError) as e:
        raise RunError(t(f"run.json не пройдёт проверку тренера: {e}",
                         f"the trainer would refuse this run.json: {e}")) from None
    if cfg.target.kind == "local":  # the machine: a card it names must be one of this PC's
        absent = absent_cards(cfg.target.gpu)
        if absent:
            raise RunError(absent)
    return notes


def load_config(source: dict[str, Any] | str | Path) -> tuple[dict[str, Any], Path | None]:
    """A run.json as a dict (from a dict or a file, read as the trainer reads it: a key
    written twice is refused), and the folder it came from."""
    if isinstance(source, dict):
        return copy.deepcopy(source), None
    path = Path(source)
    try:
        raw = parse_json(path.read_text(encoding="utf-8"), path)
    except FileNotFoundError:
        raise RunError(t(f"Файла {path} нет.", f"{path} does not exist.")) from None
    except ConfigError as e:
        raise RunError(str(e)) from None
    except ValueError as e:
        if isinstance(e, UnicodeDecodeError):
            raise RunError(t(f"{path}: не текст UTF-8 (байт {e.start}); сохраните его в UTF-8.",
                             f"{path} is not UTF-8 text (byte {e.start}); save it as UTF-8.")) from None
        line = getattr(e, "lineno", "?")
        raise RunError(t(f"{path}: не JSON (строка {line}: {getattr(e, 'msg', e)}).",
                         f"{path} is not valid JSON (line {line}: {getattr(e, 'msg', e)}).")) from None
    if not isinstance(raw, dict):
        raise RunError(t(f"{path}: нужен один JSON-объект.", f"{path} must hold one JSON object."))
    return raw, path.resolve().parent


def normalize_config(config: dict[str, Any], base: Path | None = None) -> dict[str, Any]:
    """The run.json the lab writes: data.dir and resume_from made absolute paths.

    A relative data.dir is looked up from the current folder, then next to the config
    file, then among the lab's prepared data (`ternit data prepare` puts sets there); a
    relative resume_from from the current folder, then next to the config file. A section
    given as null is a missing one (as the trainer reads it). Nothing else is judged here:
    a value of the wrong kind is left for `precheck` (the trainer's rules) to name.
    """
    cfg = copy.deepcopy(config)
    for section in ("model", "training", "data", "target"):
        if section in cfg and cfg[section] is None:
            cfg[section] = {}
    data = cfg.setdefault("data", {})
    d = data.get("dir") if isinstance(data, dict) else None
    if isinstance(d, str) and d and not Path(d).is_absolute():
        candidates = [Path.cwd() / d] + ([base / d] if base else []) + [paths.prepared_dir() / d]
        found = next((c for c in candidates if c.is_dir()), None)
        data["dir"] = str((found or candidates[0]).resolve())
    # A checkpoint is a step-*.pt file or, from a sharded run, a step-*.dcp folder.
    resume = cfg.get("resume_from")
    if isinstance(resume, str) and resume and not Path(resume).is_absolute():
        r = Path(resume)
        cands = [Path.cwd() / r] + ([base / r] if base else [])
        cfg["resume_from"] = str(next((c for c in cands if c.exists()), cands[0]).resolve())
    return cfg
