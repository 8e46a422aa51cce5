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
import json
import os
from pathlib import Path
from typing import Any

from trainer.config.run_config import ConfigError, check_shape, check_size, from_dict, read_json
from trainer.plan.preflight import DataError, check_start
from trainer.state.checkpoint_index import CheckpointError

from ..base import paths
from ..base.i18n import t
from ..base.numbers import counted
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
        check_size(len(json.dumps(config, ensure_ascii=False, default=str)))  # what the state stores of it
        cfg = from_dict(copy.deepcopy(config))
        notes = check_start(cfg)
    except (ConfigError, DataError, CheckpointError) as e:
        said = refusal_text(e.refusal) if isinstance(e, ConfigError) else str(e)
        raise RunError(t(f"run.json не пройдёт проверку тренера: {said}",
                         f"the trainer would refuse this run.json: {said}")) from None
    too_long = path_too_long(paths.runs_dir(), str(config.get("name") or "run"))
    if too_long:
        raise RunError(too_long)
    if cfg.target.kind == "local":  # the machine: a card it names must be one of this PC's
        absent = absent_cards(cfg.target.gpu)
        if absent:
            raise RunError(absent)
    try:  # what it runs on its target's machine (trainer/plan/planner.py): refused there, refused now
        check_plan(config)
    except ValueError as e:  # the plan's refusal in the interface's language
        raise RunError(t(f"тренер не запустит этот прогон: {e}", f"the trainer would refuse this run: {e}")) from None
    return notes


# The longest paths a run writes or reads under its folder: a checkpoint's hash beside it, a
# sharded checkpoint's shard, each also under the lab's pinned second name
# (app/runs/checkpoints.pinned_choice), and a Kaggle leg's downloaded outputs.
LONGEST_TAILS = ("checkpoints/.pinned/4294967295-999/step-00000000.dcp/__15_0.distcp",
                 "checkpoints/.pinned/4294967295-999/step-00000000.pt.sha256",
                 "outputs/run/checkpoints/.pinned/4294967295-999/step-00000000.pt.sha256")
WINDOWS_MAX_PATH = 260


def path_limit() -> int | None:
    """The longest path this PC's file calls take: Windows' 260 characters unless long paths
    are turned on (LongPathsEnabled); None elsewhere."""
    if os.name != "nt":
        return None
    try:
        import winreg

        with winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, r"SYSTEM\CurrentControlSet\Control\FileSystem") as key:
            if int(winreg.QueryValueEx(key, "LongPathsEnabled")[0]) == 1:
                return None
    except (OSError, ValueError, ImportError):
        pass
    return WINDOWS_MAX_PATH


def path_too_long(runs_root: Path, name: str, limit: int | None = None) -> str | None:
    """Why a run named `name` could write a path this PC cannot read back (a checkpoint that
    `sample` and `export` then cannot open: WinError 234), with the fix; None when it fits."""
    from .files import slug

    limit = path_limit() if limit is None else limit
    if limit is None:
        return None
    folder = Path(runs_root) / f"20260101-0000-{slug(name)}-99"
    longest = max(len(str(folder / tail)) for tail in LONGEST_TAILS)
    if longest < limit:
        return None
    return t(f"пути файлов прогона дойдут до {counted(longest, ('символа', 'символов', 'символов'), ('character', 'characters'), 'ru')}, а Windows без длинных путей читает не больше "
             f"{limit - 1}: чекпоинт запишется, но не откроется. Перенесите папку данных лаборатории ближе к "
             f"корню диска (TERNIT_HOME, сейчас {Path(runs_root).parent}), укоротите имя прогона или включите "
             "длинные пути Windows (LongPathsEnabled)",
             f"the run's file paths would reach {counted(longest, ('символа', 'символов', 'символов'), ('character', 'characters'), 'en')}, and Windows without long paths reads at "
             f"most {limit - 1}: a checkpoint would be written but not open. Move the lab's data folder nearer "
             f"the drive's root (TERNIT_HOME, now {Path(runs_root).parent}), shorten the run's name, or turn on "
             "Windows long paths (LongPathsEnabled)")


def load_config(source: dict[str, Any] | str | Path) -> tuple[dict[str, Any], Path | None]:
    """A run.json as a dict (from a dict or a file, read as the trainer reads it: a key
    written twice is refused), and the folder it came from."""
    if isinstance(source, dict):
        return copy.deepcopy(source), None
    path = Path(source)
    try:  # the trainer's own reading of a run.json, its refusal said in the interface's language
        raw = read_json(path)
        check_shape(raw, path)
    except ConfigError as e:
        raise RunError(refusal_text(e.refusal)) from None
    return raw, path.resolve().parent


def normalize_config(config: dict[str, Any], base: Path | None = None) -> dict[str, Any]:
    """The run.json the lab writes: data.dir and resume_from made absolute paths.

    A relative data.dir is looked up from the current folder, then next to the config
    file, then among the lab's prepared data (`ternit data prepare` puts sets there); a
    relative resume_from from the current folder, then next to the config file. A section
    given as null is a missing one (as the trainer reads it); a section that is not an
    object is refused here (the lab reads the sections before the whole check). Nothing
    else is judged here: a value of the wrong kind is left for `precheck` (the trainer's
    rules) to name.
    """
    try:
        check_shape(config)
    except ConfigError as e:
        raise RunError(refusal_text(e.refusal)) from None
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
