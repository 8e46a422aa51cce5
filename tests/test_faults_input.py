"""Fault injection, issue 24: bad input never bricks the lab. A number out of its range, a
run the trainer would refuse at its start, a run folder edited by hand, a checkpoint that
is not what its name says. Real trainer processes (tiny model, CPU), real SQLite, the real
`ternit` entry point."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.cli import main as cli
from app.runs import Registry, RunManager
from app.runs.precheck import precheck
from tests import test_faults_lab as lab
from tests.test_faults_lab import config

finished, no_orphans = lab.finished, lab.no_orphans  # the fixtures: a finished 3-step run; no trainer left

pytestmark = pytest.mark.timeout(240)


def _no_run_left() -> None:
    reg = Registry()
    try:
        assert reg.list_runs() == []
        assert not reg.runs_root.exists() or not any(reg.runs_root.iterdir())
    finally:
        reg.close()


def _start(path: Path, *flags: str) -> int:
    return cli.main(["run", "start", "--config", str(path), *flags])


# ---- 1. every number has a range: an oversized one is refused, never stored ---------------
@pytest.mark.parametrize("target", ["local", "kaggle"])
@pytest.mark.parametrize("change, said", [
    ({"training": {"steps_to": 10**30}}, "training.steps_to must be at least 1 and at most 1,000,000,000"),
    ({"training": {"eval_every": 10**30}}, "training.eval_every"),
    ({"training": {"limit_min": 10**30}}, "training.limit_min"),
    ({"training": {"keep_checkpoints": 10**30}}, "training.keep_checkpoints"),
    ({"model": {"layers": 10**30}}, "model.layers"),
    ({"training": {"tokens_per_step": 10**30}}, "training.tokens_per_step"),
])
def test_a_number_out_of_its_range_is_refused_before_a_run_exists(tiny_data, tmp_path, capsys, change, said, target):
    cfg = config(tiny_data)
    for section, values in change.items():
        cfg[section] = {**cfg[section], **values}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    assert _start(path, "--target", target) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    _no_run_left()


def test_one_run_folder_with_a_number_out_of_range_is_that_runs_problem(finished, capsys, tiny_data, tmp_path):
    """steps_to 10**30 written by hand into a run folder the history does not know yet: the
    history lists the other runs and names this one; starting and the window keep working."""
    from app.window.lab import Lab

    m, run_id = finished
    bad = m.registry.runs_root / "by-hand"
    shutil.copytree(m.registry.get(run_id).path, bad)
    cfg = json.loads((bad / "run.json").read_text(encoding="utf-8"))
    cfg["training"]["steps_to"] = 10**30
    (bad / "run.json").write_text(json.dumps(cfg), encoding="utf-8")
    (bad / "events.jsonl").unlink()  # its own config only: no start event saying otherwise

    assert cli.main(["run", "list"]) == 0
    out, err = capsys.readouterr()
    assert run_id in out and "by-hand" in out, out
    assert "by-hand" in err and "training.steps_to" in err and "Traceback" not in err, err
    lab = Lab(RunManager())
    assert {r.id for r in lab.history()} >= {run_id, "by-hand"}
    path = tmp_path / "good.json"
    path.write_text(json.dumps(config(tiny_data, steps_to=1)), encoding="utf-8")
    assert _start(path, "--wait") == 0, capsys.readouterr().err


def test_a_number_the_history_cannot_hold_in_a_folder_never_stops_the_lab(finished, capsys):
    """The same folder adopted when the number reaches SQLite itself (an event's step of
    10**30): the row leaves it out instead of failing the whole history."""
    m, run_id = finished
    bad = m.registry.runs_root / "by-hand"
    shutil.copytree(m.registry.get(run_id).path, bad)
    with open(bad / "events.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "step", "time": 1.0, "step": 10**30, "tokens_seen": 10**40}) + "\n")
    assert cli.main(["run", "list"]) == 0
    assert "by-hand" in capsys.readouterr().out


# ---- 2. the trainer's start checks, made by the lab before anything exists ----------------
def _empty(tmp_path: Path, data: Path) -> str:
    (tmp_path / "empty").mkdir()
    return str(tmp_path / "empty")


def _a_file(tmp_path: Path, data: Path) -> str:
    (tmp_path / "a-file").write_text("not a folder")
    return str(tmp_path / "a-file")


def _no_tokenizer(tmp_path: Path, data: Path) -> str:
    shutil.copytree(data, tmp_path / "data")
    (tmp_path / "data" / "tokenizer.json").unlink()
    return str(tmp_path / "data")


@pytest.mark.parametrize("target", ["local", "kaggle"])
@pytest.mark.parametrize("make, change, said", [
    (None, {"data": {"dir": "/no/such/folder"}}, "is not a folder"),
    (_empty, None, "lacks tokenizer.json, train.bin, val.bin, meta.json"),
    (_a_file, None, "is a file, not a prepared-data folder"),
    (_no_tokenizer, None, "lacks tokenizer.json"),
    (None, {"model": {"vocab": 100}}, "the data's vocabulary (300) is bigger than model.vocab (100)"),
    (None, {"model": {"context": 100000}}, "model.context 100000 is larger than the training data"),
    (None, {"resume_from": "/no/such/step-00000003.pt"}, "checkpoint /no/such/step-00000003.pt does not exist"),
    (None, {"training": {"batch_per_card": 10**9}}, "needs at least"),
])
def test_what_the_trainer_refuses_at_its_start_is_refused_before_a_run_exists(
        tiny_data, tmp_path, capsys, make, change, said, target):
    cfg = config(tiny_data)
    if make is not None:
        cfg["data"] = {"dir": make(tmp_path, tiny_data)}
    for section, values in (change or {}).items():
        cfg[section] = {**cfg[section], **values} if isinstance(values, dict) else values
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    assert _start(path, "--target", target) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err, err
    _no_run_left()


def test_a_card_that_is_not_a_card_and_a_key_given_twice_leave_nothing(tiny_data, tmp_path, capsys):
    cfg = config(tiny_data)
    cfg["target"] = {"kind": "local", "gpu": "потом"}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    assert _start(path) == 2
    assert "target.gpu must be auto, cpu or card numbers" in capsys.readouterr().err
    _no_run_left()
    text = json.dumps(config(tiny_data)).replace('"steps_to": 6', '"steps_to": 6, "steps_to": 60')
    path.write_text(text, encoding="utf-8")
    assert _start(path) == 2
    assert "'steps_to' twice" in capsys.readouterr().err
    _no_run_left()


def test_a_section_given_as_null_is_read_the_same_by_the_lab_and_the_trainer(tiny_data, tmp_path):
    from trainer.config import load

    cfg = config(tiny_data)
    cfg["target"] = None
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    assert load(path).target.kind == "local"  # the trainer: defaults
    m = RunManager()
    try:
        rec = m.create(path)  # the lab: the same, not a refusal
        assert rec.target_kind == "local"
    finally:
        m.registry.close()
    assert precheck({**config(tiny_data), "training": None}) == []
