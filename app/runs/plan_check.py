"""The plan of a run on the machine its target names (trainer/plan/planner.py), asked before a run
folder or history row exists — by `ternit run start`, the window's «Старт», a retry, a
continuation and a Kaggle start before anything is uploaded (all through
RunManager.create's pre-check). A combination the trainer would refuse there is refused
here in the interface's language, with the trainer's own code and parameters."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from trainer.config.run_config import ConfigError, from_dict
from trainer.plan.planner import Machine, Plan, Refusal, plan

from ..base.plan_texts import RefusalError
from ..gpu.cards import card_by_index, this_pc_cards
from ..sizing.gpus import machine_for
from . import process

KAGGLE_MACHINE = "t4x2"  # Kaggle's one GPU shape (trainer.plan.planner.KNOWN_CARDS)


def target_machine(config: dict[str, Any]) -> Machine:
    """The machine run.json's target trains on: Kaggle's 2×T4, or this PC as the trainer
    will be started there (app.runs.process.plan_launch: the CPU, one card, or torchrun
    over several), the first card it trains on as NVML tells it (app.gpu.cards)."""
    target = config.get("target") or {}
    if target.get("kind") == "kaggle":
        return machine_for(KAGGLE_MACHINE)
    gpu = str(target.get("gpu") or "auto")
    launch = process.plan_launch(Path("."), gpu)
    if launch.device != "cuda":  # "cpu", or no card found (the trainer then runs on the CPU)
        return machine_for("cpu")
    first = gpu.split(",")[0].strip()
    card = card_by_index(int(first)) if first.isdigit() else next(iter(this_pc_cards()), None)
    machine = machine_for("local", card.memory_mb if card else None, card.capability if card else None)
    return dataclasses.replace(machine, processes=launch.processes)


def check_plan(config: dict[str, Any], lang: str | None = None) -> Plan:
    """The plan of `config` (a run.json dict) on its target's machine; RefusalError (a
    ValueError, in `lang`) with the trainer's refusal when it would not start it there."""
    try:
        cfg = from_dict(config)
    except ConfigError as e:
        raise RefusalError(e.refusal, lang) from None
    decided = plan(cfg, target_machine(config))
    if isinstance(decided, Refusal):
        raise RefusalError(decided, lang)
    return decided
