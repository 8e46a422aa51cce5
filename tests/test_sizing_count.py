"""The estimate (trainer.plan.memory_model, what `ternit estimate`, the form and the queue show)
against the count of the trainer's own step (trainer.step.memory_count): within 5 % for
every combination the plan offers on `rtx5070ti` and on `t4x2` (DDP; FSDP is counted
apart, tests/test_fsdp_memory.py), at small shapes. The figures at more shapes and at the
full model, and where the estimate is further off (the tiniest shapes): docs/PERF.md,
«The count of the step against the estimate»."""

from __future__ import annotations

import dataclasses

import pytest

from app.sizing.combos import offered
from app.sizing.formulas import Shape
from trainer.config.run_config import ModelConfig, RunConfig, TrainingConfig
from trainer.plan.memory_model import COUNTED, MiB, counted_behind, estimate_memory
from trainer.plan.planner import known_machine
from trainer.step import memory_count as mc

CASES = [("rtx5070ti", (4, 512, 8, 512, 4000, 2)), ("t4x2", (8, 384, 6, 256, 2000, 4))]


def errors(machine: str, shape: tuple[int, ...]) -> list[tuple[str, str, float, float, float]]:
    """(level, lean state, counted MiB, estimated MiB, estimate / count − 1) of every
    combination the plan offers on `machine` at `shape`."""
    layers, width, heads, context, vocab, batch = shape
    m = known_machine(machine)
    cfg = RunConfig()
    cfg.model = ModelConfig(context=context, width=width, heads=heads, layers=layers, vocab=vocab)
    cfg.training = TrainingConfig(batch_per_card=batch, sharding="ddp" if m.processes > 1 else "auto")
    rows = []
    for combo, p in offered(cfg, m):
        run = dataclasses.replace(cfg, training=dataclasses.replace(
            cfg.training, economical=combo.level, lean_state=combo.lean_state))
        counted = mc.count(run, p, categories=False)["peak_mb"]
        est = estimate_memory(Shape(*shape), p.precision.value, cards=m.processes, economical=combo.level,
                              step=p.step.value, sharding=p.sharding.value, device="gpu").peak / MiB
        assert counted_behind(machine, p.sharding.value)  # the form says «подсчитано» for it
        rows.append((combo.level, combo.lean_state, counted, round(est, 1), est / counted - 1))
    return rows


@pytest.mark.parametrize(("machine", "shape"), CASES)
def test_the_estimate_is_within_5_percent_of_the_count(machine, shape):
    m = known_machine(machine)
    rows = errors(machine, shape)
    assert len(rows) == (15 if m.processes == 1 else 6)  # every level × lean state the plan takes
    assert [r for r in rows if abs(r[4]) > 0.05] == []


def test_the_table_of_counted_machines_is_what_this_test_proves():
    """The form's «подсчитано» rests on COUNTED: each machine there is a case here."""
    assert set(COUNTED) == {machine for machine, _ in CASES}


def test_the_tiniest_shapes_stay_within_their_known_misses():
    """Where the estimate is known to be further off (docs/PERF.md, «The estimate against the
    count»: a term a block's weights in size at 2 layers, under; the economical lean steps at
    a large V·d against the blocks, over), held to those misses so that a change making them
    worse is seen; the form's «подсчитано» is not said on their account (COUNTED rests on CASES)."""
    under = errors("rtx5070ti", (2, 128, 4, 128, 512, 8))
    assert max(abs(r[4]) for r in under) < 0.10
    assert all(r[4] < 0 for r in under if abs(r[4]) > 0.05)  # under: the missing term
    over = errors("rtx5070ti", (4, 256, 4, 256, 4000, 4))
    assert max(abs(r[4]) for r in over) < 0.16
    assert all(r[4] > 0 and r[1] != "off" for r in over if abs(r[4]) > 0.05)  # over: the lean steps
