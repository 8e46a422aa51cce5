"""How long a queued run is expected to take on this PC and on Kaggle, and whether it fits:
the sizing's estimate (app/sizing) for the run.json, plus each machine's start-up.

The planner (app/queue/plan.py) only sees the resulting `Fit`s; nothing here decides.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from trainer.config.run_config import ConfigError, from_dict
from trainer.state.checkpoint_index import checkpoint_step

from .. import sizing
from ..base.i18n import current_language, t
from ..base.numbers import mb_text
from .plan import Fit, Job

log = logging.getLogger(__name__)

# Before the first step: the trainer's own start (imports, data, model) on this PC, and on
# Kaggle the uploads, the kernel's queue and its session's set-up as well. Rough figures;
# the list says «≈».
LOCAL_START_S = 20.0
KAGGLE_START_S = 240.0
KAGGLE_GPU = "t4x2"


def _shape_kwargs(config: dict[str, Any]) -> dict[str, Any] | None:
    """sizing.estimate's arguments for a run.json (its defaults filled in); None if the
    trainer would refuse it (the queue's pre-check said why when it was added)."""
    try:
        cfg = from_dict(config)
    except ConfigError:
        return None
    m, tr = cfg.model, cfg.training
    start = 0
    if cfg.resume_from:
        start = checkpoint_step(Path(cfg.resume_from)) or 0
    return dict(
        layers=m.layers, width=m.width, heads=m.heads, context=m.context, vocab=m.vocab,
        batch=tr.batch_per_card, steps_to=tr.steps_to, start_step=min(start, tr.steps_to - 1),
        economical=tr.economical, lean_state=tr.lean_state, precision=tr.precision,
        eval_every=tr.eval_every, eval_segments=tr.eval_segments, tokens_per_step=tr.tokens_per_step,
    )


def limit_s(config: dict[str, Any]) -> float:
    return float((config.get("training") or {}).get("limit_min", 630)) * 60.0


def _named_gpu(config: dict[str, Any]) -> str:
    """run.json's `target.gpu` (auto, cpu or card indices)."""
    return str((config.get("target") or {}).get("gpu", "auto")).lower()


def local_gpu(config: dict[str, Any]) -> str:
    """The sizing's name for the card a local run of this config trains on."""
    if _named_gpu(config) == "cpu" or sizing.local_card() is None:
        return "cpu"
    return "local"


def fit(config: dict[str, Any], gpu: str, start_s: float, measured: list[dict[str, Any]]) -> Fit | None:
    """The run on one machine kind: expected wall time (to «Шагов до», cut by «Лимит, мин»)
    and the sizing's memory verdict."""
    kwargs = _shape_kwargs(config)
    if kwargs is None:
        return None
    try:
        est = sizing.estimate(**kwargs, gpu=gpu, measured=measured or None, lang=current_language())
    except (ValueError, KeyError) as e:  # a shape the sizing refuses: it goes nowhere
        return Fit(0.0, False, str(e))
    seconds = min(est.seconds_to_steps, limit_s(config)) + start_s
    why = ""
    if est.fits is False:
        need = mb_text(est.memory.total)
        has = mb_text(est.card_memory_mb) if est.card_memory_mb else "?"
        where = t("на этом ПК", "on this PC") if gpu in ("local", "cpu") else t("на 2×T4 Kaggle", "on Kaggle's 2×T4")
        why = t(f"не помещается {where}: нужно ≈ {need} на карту, есть {has}",
                f"does not fit {where}: needs ≈ {need} a card, has {has}")
    return Fit(seconds, est.fits, why)


def job(item_id: int, config: dict[str, Any], target: str, account: str,
        measured: list[dict[str, Any]], want: Any = None, refused: dict[str, str] | None = None) -> Job:
    """What the planner needs of one queued run; `refused`: the machine kinds where the
    lab's pre-check refused it when it was queued (it does not go there)."""
    refused = refused or {}
    local = kaggle = None
    if target in ("local", "any"):
        gpu = local_gpu(config)
        if "local" in refused:
            local = Fit(0.0, False, refused["local"])
        elif target == "any" and gpu == "cpu" and _named_gpu(config) != "cpu":
            # A run left to the queue meets a PC without a card: hours on the CPU for what a
            # Kaggle account trains in minutes. Only a run.json naming the CPU, or a run
            # queued for this PC, trains there.
            local = Fit(0.0, False, t(
                "у этого ПК нет видеокарты NVIDIA: «куда освободится раньше» значит Kaggle; "
                "на процессоре этого ПК — «на машину из формы» с процессором или --target local",
                "this PC has no NVIDIA card: «wherever frees first» means Kaggle; for this PC's "
                "CPU queue it to the form's machine with the CPU, or --target local"))
        else:
            local = fit(config, gpu, LOCAL_START_S, measured)
    if target in ("kaggle", "any"):
        kaggle = Fit(0.0, False, refused["kaggle"]) if "kaggle" in refused else \
            fit(config, KAGGLE_GPU, KAGGLE_START_S, measured)
    kw: dict[str, Any] = {} if want is None else {"want": want}
    return Job(item_id, target, account or "auto", local, kaggle, limit_s(config), **kw)
