"""No accepted combination runs differently from its plan (trainer/plan/planner.py): on the CPU,
with one process and with two gloo processes, every distinct plan the trainer accepts at a
tiny shape (the grid of economical level × lean state × compile × sharding × precision,
and micro-steps) is trained for two steps through the trainer's own set-up and loop, all
of them in one process (group) (tests/plan_child.py; on two processes the compiled ones at
the economical level off, the one process having compiled every level). Each run's `start` event carries its
plan — the same, choice by choice and reason by reason, as the lab's plan for that
machine — and what was built from it, read from the parts themselves; the steps, samples,
warnings and the compiled step after the run say what ran.

Each compiled run compiles afresh (as one trainer process compiles its one model), with
dynamo's "eager" backend: the same capture of the training step's module by torch.compile,
without a code generator (≈ 2–4 s a compiled run on a 2-core machine; the runtime
fallback and inductor itself are tests/test_compile.py's)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests import forked
from tests.trainer_run import ROOT, events, run_module, trainer_env

pytest.importorskip("torch")


def check(out: Path, processes: int) -> set[tuple]:
    from app.sizing.gpus import machine_for
    from trainer.config.run_config import from_dict
    from trainer.plan.planner import Plan, plan

    report = json.loads((out / "report-0.json").read_text(encoding="utf-8"))
    lab_machine = dataclasses.replace(machine_for("cpu"), processes=processes)
    assert report["refused"] > 0 and len(report["runs"]) >= 20
    kinds = set()
    for run in report["runs"]:
        where = run["config"]
        assert run["code"] == 0, (where, run.get("error"))
        run_dir = Path(run["run_dir"])
        start = events(run_dir, "start")[0]
        raw = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        expected = plan(from_dict(raw), lab_machine)
        assert isinstance(expected, Plan), where
        said = {name: start["plan"][name] for name in Plan.CHOICES}
        assert said == {name: expected.as_json()[name] for name in Plan.CHOICES}, where
        values, built = expected.values(), start["built"]
        for name in ("sharding", "step", "compile", "samples", "economical"):
            assert built[name] == values[name], (where, name)
        assert built["loss_scaling"] is (values["precision"] == "fp16"), where
        lean_bf16 = values["step"] != "normal" and values["precision"] == "bf16"
        assert built["weights"] == ("bfloat16" if lean_bf16 else "float32"), where
        assert start["precision"] == values["precision"] and start["accumulation"] == values["micro_steps"]
        assert start["world_size"] == processes
        # What ran: every step, no compile that fell back, samples as planned.
        assert [s["step"] for s in events(run_dir, "step")] == [1, 2], where
        assert events(run_dir, "warning") == [], (where, events(run_dir, "warning"))
        assert run["compiled_used"] is (values["compile"] == "on"), where
        assert bool(events(run_dir, "sample")) is (values["samples"] == "on"), where
        assert run["grads_left"] == 0, where  # every step kind leaves no gradients held
        kinds.add((values["sharding"], values["step"], values["compile"], values["micro_steps"] > 1))
    return kinds


@pytest.mark.slow
def test_one_process_runs_every_accepted_plan_as_planned(tmp_path, tiny_data, monkeypatch):
    monkeypatch.setenv("TERNIT_COMPILE_BACKEND", "eager")
    p = run_module("tests.plan_child", str(tiny_data), str(tmp_path), timeout=900)
    assert p.returncode == 0, p.stderr[-4000:]
    kinds = check(tmp_path, 1)
    steps = {k[1] for k in kinds}
    assert steps >= {"normal"} and {k[2] for k in kinds} == {"on", "off"} and any(k[3] for k in kinds)
    if "held" in steps:  # bitsandbytes is installed: every lean step ran
        assert steps == {"normal", "held", "fused", "offload", "one_pass"}


@pytest.mark.slow
def test_two_processes_run_every_accepted_plan_as_planned(tmp_path, tiny_data, monkeypatch):
    monkeypatch.setenv("TERNIT_COMPILE_BACKEND", "eager")
    p = forked.run_ranks("tests.plan_child", [str(tiny_data), str(tmp_path)], trainer_env(), 2, ROOT, 900)
    assert p.returncode == 0, p.stderr[-4000:]
    kinds = check(tmp_path, 2)
    assert {k[0] for k in kinds} == {"ddp", "fsdp"} and {k[2] for k in kinds} == {"on", "off"}
    # Compiled under DDP at the economical level off (the one process compiles every level).
    report = json.loads((tmp_path / "report-0.json").read_text(encoding="utf-8"))
    assert report["compiled_levels_left"] > 0
