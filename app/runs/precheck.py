"""The lab's one pre-check of a run, before a run folder or history row exists.

`precheck(config)` is what every way of starting a run passes through (`ternit run start`,
the window's «Старт» and «Продолжить», a retry, a Kaggle start before anything is
uploaded): through `RunManager.create`, which calls it before it makes the folder. It runs
the trainer's own rules, not a restatement of them: run.json's contract
(`trainer.config.run_config`: every key, every range, a step no machine holds) and the checks the
trainer makes at its start before it builds anything (`trainer.plan.preflight`: the data folder
against the model, the checkpoint it resumes from). Both are torch-free, so the lab runs
them in its own process. Then the machine: a local run's cards must be this PC's
(`process.absent_cards`), and the plan of what the run executes there (trainer/plan/planner.py,
through `plan_check`) must not be a refusal. A refusal is a RunError with the trainer's
(or the lab's) line, a contract's refusal worded in the interface's language.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from trainer.config.reasons import Refusal
from trainer.config.run_config import ConfigError, from_dict, read_json
from trainer.plan.preflight import DataError, check_start
from trainer.state.checkpoint_index import CheckpointError

from ..base import paths
from ..base.i18n import t
from ..base.plan_texts import text as refusal_text
from .plan_check import check_plan
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
        said = refusal_text(e.refusal) if isinstance(e, ConfigError) else str(e)
        raise RunError(t(f"run.json не пройдёт проверку тренера: {said}",
                         f"the trainer would refuse this run.json: {said}")) from None
    if cfg.target.kind == "local":  # the machine: a card it names must be one of this PC's
        absent = absent_cards(cfg.target.gpu)
        if absent:
            raise RunError(absent)
    try:  # what it runs on its target's machine (trainer/plan/planner.py): refused there, refused now
        check_plan(config)
    except ValueError as e:  # the plan's refusal in the interface's language
        raise RunError(t(f"тренер не запустит этот прогон: {e}", f"the trainer would refuse this run: {e}")) from None
    return notes


def load_config(source: dict[str, Any] | str | Path) -> tuple[dict[str, Any], Path | None]:
    """A run.json as a dict (from a dict or a file, read as the trainer reads it: a key
    written twice is refused), and the folder it came from."""
    if isinstance(source, dict):
        return copy.deepcopy(source), None
    path = Path(source)
    try:  # the trainer's own reading of a run.json, its refusal said in the interface's language
        raw = read_json(path)
    except ConfigError as e:
        raise RunError(refusal_text(e.refusal)) from None
    if not isinstance(raw, dict):
        raise RunError(refusal_text(Refusal("not_an_object")))
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
