"""«Продолжить»: a new run that picks up an earlier run's weights and step.

The new run gets its own folder; its run.json names the parent's latest checkpoint in
`resume_from` (a step-*.pt file, or a sharded run's step-*.dcp folder: the trainer reads
it whole or sharded, whatever number of processes the continuation has). The model is the checkpoint's (weights of another shape cannot be loaded),
so it is locked; data and training settings start from the parent's and may be changed.
New data means a new held-out sample: the validation curve starts anew.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.config.run_config import ConfigError, from_dict

from ..base.i18n import t
from ..base.plan_texts import text as refusal_text
from .checkpoints import checkpoint_step, checkpoint_steps, choose_checkpoint, usable_checkpoint
from .events import read_events
from .files import folder_gone
from .registry import Registry, RunRecord


class ContinueError(ValueError):
    """This run cannot be continued: the message says why and what to do."""


@dataclass
class ContinueCheck:
    """What the form shows next to a continuation."""

    parent_id: str
    checkpoint: str
    start_step: int | None
    model: dict[str, Any]       # locked: the checkpoint's architecture
    params: int | None
    validation_anew: bool       # the data changed: validation starts counting anew
    model_changed: bool         # the config asks for another shape: not allowed
    warning: str | None         # the line to show (interface language), if any


def parent_model(rec: RunRecord) -> dict[str, Any]:
    """The architecture the parent trained (its `start` event, else its run.json)."""
    start = _last_start(rec)
    cfg = (start or {}).get("config") or rec.config()
    return dict(cfg.get("model") or {})


def _last_start(rec: RunRecord) -> dict[str, Any] | None:
    starts = [e for e in read_events(rec.events_path) if e.get("event") == "start"]
    return starts[-1] if starts else None


def data_id_of(data: dict[str, Any]) -> str | None:
    """The content id of a prepared-data folder (meta.json's data_id), if readable."""
    d = data.get("dir")
    if not d:
        return None
    try:
        meta = json.loads((Path(d) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = meta.get("data_id")
    return str(value) if value else None


def data_changed(parent_cfg: dict[str, Any], parent_data_id: str | None, new_cfg: dict[str, Any]) -> bool:
    old, new = parent_cfg.get("data") or {}, new_cfg.get("data") or {}
    if sorted(old.get("constellations") or []) != sorted(new.get("constellations") or []):
        return True
    new_id = data_id_of(new)
    if parent_data_id and new_id:
        return parent_data_id != new_id
    return str(old.get("dir") or "") != str(new.get("dir") or "")


def refuse_running(rec: RunRecord) -> None:
    """A running run is not continued: its trainer still writes and prunes its checkpoints."""
    if rec.active:
        raise ContinueError(t(
            f"Прогон {rec.id} ещё идёт: продолжить можно после его конца (остановить: ternit run stop {rec.id}).",
            f"Run {rec.id} is still going: continue it once it has ended (to stop it: ternit run stop {rec.id}).",
        ))


def pick_checkpoint(rec: RunRecord, from_step: int | None = None, notes: list[str] | None = None) -> Path:
    """The checkpoint a continuation of `rec` starts from (`choose_checkpoint`: the newest
    that is what the trainer wrote, or the one at `from_step`); what was passed over on the
    way goes to `notes`."""
    choice = choose_checkpoint(rec.path, from_step)
    if choice.path is not None:
        if notes is not None:
            notes.extend(choice.said())
        return choice.path
    why = f" ({'; '.join(choice.passed_over)})" if choice.passed_over else ""
    if from_step is not None:
        have = checkpoint_steps(rec.path)
        raise ContinueError(t(
            f"У прогона {rec.id} нет целого чекпоинта на шаге {from_step}{why}"
            f". Есть шаги: {', '.join(map(str, have)) or 'никаких'}.",
            f"Run {rec.id} has no intact checkpoint at step {from_step}{why}"
            f". Steps there: {', '.join(map(str, have)) or 'none'}.",
        ))
    if choice.passed_over:
        raise ContinueError(t(
            f"Ни один чекпоинт прогона {rec.id} не годится{why}. Запустите его заново.",
            f"No checkpoint of run {rec.id} is usable{why}. Start it again instead.",
        ))
    raise ContinueError(t(f"У прогона {rec.id} нет чекпоинта: продолжать не с чего. Запустите его заново.",
                          f"Run {rec.id} has no checkpoint to continue from: start it again instead."))


def continue_config(
    registry: Registry, run_id: str, steps_to: int | None = None, *,
    from_step: int | None = None, notes: list[str] | None = None,
) -> dict[str, Any]:
    """The run.json of a continuation of `run_id` (not yet started).

    `steps_to` defaults to the parent's when the parent stopped short of it, and to twice
    the parent's when it had reached it (continuing to the same step would do nothing).
    """
    parent = registry.get(run_id)
    gone = folder_gone(parent.path)
    if gone:
        raise ContinueError(gone)
    refuse_running(parent)
    cfg = copy.deepcopy(parent.config())
    try:  # the folder's run.json as the pre-check reads a new one: a NaN, a wrong kind, named
        from_dict(copy.deepcopy(cfg))
    except ConfigError as e:
        raise ContinueError(f"{parent.run_json_path}: {refusal_text(e.refusal)}") from None
    ckpt = pick_checkpoint(parent, from_step, notes)
    cfg["model"] = parent_model(parent)
    cfg["resume_from"] = str(ckpt.resolve())
    training = cfg.setdefault("training", {})
    # The tokens per step the parent trained with, written out: continued on another
    # machine (2×T4 → one home card) the trainer makes up the difference with micro-steps
    # instead of silently halving the step.
    trained = (_last_start(parent) or {}).get("tokens_per_step")
    if not training.get("tokens_per_step") and isinstance(trained, int) and trained > 0:
        training["tokens_per_step"] = trained
    at = checkpoint_step(ckpt) or parent.last_step or 0
    old_to = int(training.get("steps_to") or parent.steps_to or at or 1)
    if steps_to is None:
        steps_to = old_to if at < old_to else max(old_to * 2, at + 1)
    if steps_to <= at:
        raise ContinueError(
            t(
                f"«Шагов до» ({steps_to}) должно быть больше шага чекпоинта ({at}).",
                f"“Steps to” ({steps_to}) must be above the checkpoint's step ({at}).",
            )
        )
    training["steps_to"] = int(steps_to)
    return cfg


def check_continue(registry: Registry, run_id: str, config: dict[str, Any]) -> ContinueCheck:
    """Whether `config` is a valid continuation of `run_id`, and what to warn about."""
    parent = registry.get(run_id)
    start = _last_start(parent) or {}
    model = parent_model(parent)
    ckpt = config.get("resume_from") or str(usable_checkpoint(parent.path) or "")
    model_changed = {k: v for k, v in (config.get("model") or {}).items() if model.get(k) != v} != {}
    anew = data_changed(start.get("config") or parent.config(), start.get("data_id"), config)
    warning = None
    if model_changed:
        warning = t(
            "Модель продолжения должна совпадать с моделью чекпоинта: веса другой формы не загрузить.",
            "A continuation keeps the checkpoint's model: weights of another shape cannot be loaded.",
        )
    elif anew:
        warning = t(
            "Данные изменились: валидация начнётся заново (новая отложенная выборка).",
            "The data changed: validation starts anew (a new held-out sample).",
        )
    return ContinueCheck(
        parent_id=parent.id,
        checkpoint=ckpt,
        start_step=checkpoint_step(Path(ckpt)) if ckpt else None,
        model=model,
        params=parent.params,
        validation_anew=anew,
        model_changed=model_changed,
        warning=warning,
    )
