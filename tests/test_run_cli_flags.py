"""`ternit run start` without hand-written JSON: the form's fields as flags (made from
app/form/fields.py), data found or prepared for `data.constellations` alone, exit codes of
`run stop --wait` and of an unknown constellation. The real trainer on a tiny CPU model."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from app.base import paths
from app.base.i18n import set_language
from app.cli import main as cli
from app.data.for_run import fill_data
from app.data.library import Library
from app.data.textgen import documents
from app.form import fields as F
from app.runs import Registry, RunManager
from app.runs.start_flags import add_field_flags, apply_flags, flag_fields
from tests.test_runs_local import config, no_orphans, one_thread, wait_until  # noqa: F401

pytestmark = pytest.mark.timeout(120)

TINY_FLAGS = ["--context", "32", "--width", "32", "--heads", "2", "--layers", "2", "--batch", "4"]


@pytest.fixture
def tiny_in_lab(tiny_data):
    """The tiny prepared folder where `ternit data prepare` puts prepared data."""
    dest = paths.prepared_dir() / "tiny-v300"
    shutil.copytree(tiny_data, dest)
    return dest


def test_every_form_field_with_a_run_json_place_is_a_flag():
    names = {f.name for f in flag_fields()}
    assert {"name", "constellations", "context", "width", "heads", "layers", "batch_per_card",
            "steps_to", "limit_min", "lr", "economical"} <= names
    # «Видеокарта» and «Машина» list the lab's state; --gpu/--account/--target stand for them.
    assert not names & {"gpu", "machine", "start_from", "checkpoint"}
    assert all(f.path for f in flag_fields()) and F.spec("batch_per_card").flags == ("--batch",)


def test_start_from_flags_and_constellations_alone(tiny_in_lab, tmp_path, capsys):
    # Only what the flags cannot say (eval cadence for a 6-step run) comes from a config,
    # and it names no data folder: the prepared data of «tiny» is found by itself.
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"training": {"eval_every": 3, "eval_segments": 4, "warmup_steps": 1,
                                             "batch_per_card": 99}}))
    code = cli.main(["run", "start", "--config", str(path), "--constellations", "tiny", *TINY_FLAGS,
                     "--steps", "6", "--name", "flags", "--gpu", "cpu", "--wait"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert str(tiny_in_lab) in err  # which folder was taken is said
    reg = Registry()
    rec = reg.list_runs()[0]
    cfg = rec.config()
    assert (rec.name, rec.status, rec.last_step) == ("flags", "finished", 6)
    assert cfg["data"] == {"dir": str(tiny_in_lab), "constellations": ["tiny"]}
    assert cfg["model"] == {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300}
    assert cfg["training"]["batch_per_card"] == 4  # the flag over the config's 99
    assert cfg["training"]["eval_every"] == 3
    reg.close()


def test_bad_input_exits_2_with_the_reason(capsys):
    assert cli.main(["run", "start", "--layers", "2"]) == 2  # no data named anywhere
    assert "--constellations" in capsys.readouterr().err
    assert cli.main(["run", "start", "--constellations", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert cli.main(["run", "start", "--constellations", "demo", "--width", "0"]) == 2
    assert "--width" in capsys.readouterr().err
    assert Registry().list_runs() == []  # nothing was created for a refused start


def test_constellations_not_prepared_yet_are_prepared(tmp_path):
    root = tmp_path / "books"
    root.mkdir()
    for i, doc in enumerate(documents(40, seed=3)):
        (root / f"{i:02d}.txt").write_text(doc, encoding="utf-8")
    Library().add(root, name="books", constellation="library")
    seen = []
    cfg, note = fill_data({"model": {"vocab": 300, "context": 32}, "data": {"constellations": ["library"]}},
                          progress=seen.append)
    folder = paths.prepared_dir()
    assert cfg["data"]["dir"].startswith(str(folder)) and "library" in note
    meta = json.loads((Path(cfg["data"]["dir"]) / "meta.json").read_text())
    assert meta["constellations"] == ["library"] and meta["vocab_size"] <= 300
    assert seen  # with progress
    again, note2 = fill_data({"model": {"vocab": 300}, "data": {"constellations": ["library"]}})
    assert again["data"]["dir"] == cfg["data"]["dir"] and note2 != note  # found, not prepared again


def test_stop_wait_exits_0_after_a_successful_stop(tiny_data, capsys):
    m = RunManager()
    rec = m.start(config(tiny_data, steps_to=100_000, eval_every=1000))
    wait_until(m, rec.id, lambda r: (r.last_step or 0) >= 2)
    assert cli.main(["run", "stop", rec.id, "--wait"]) == 0
    assert m.registry.get(rec.id).status == "stopped"
    m.registry.close()


def test_estimate_counts_the_constellations_data(tiny_in_lab, capsys):
    train = json.loads((tiny_in_lab / "meta.json").read_text())["train_tokens"]
    assert cli.main(["estimate", "--constellations", "tiny", "--layers", "2", "--width", "32", "--heads", "2",
                     "--context", "32", "--batch", "4", "--gpu", "cpu", "--steps-to", "10", "--no-measured",
                     "--json"]) == 0
    out, err = capsys.readouterr()
    e = json.loads(out)
    assert str(tiny_in_lab) in err
    assert e["params"] == 12 * 2 * 32**2 + 300 * 32 + 32 * 32  # the data's vocabulary, 300
    assert e["tokens_per_weight"] == pytest.approx(train / e["params"])
    assert cli.main(["estimate", "--constellations", "nope", "--json"]) == 2


@pytest.mark.parametrize("lang, typed, steps, lr", [
    ("en", ["20,000", "0.001"], 20_000, 0.001),
    ("en", ["20 000", "1e-3"], 20_000, 0.001),
    ("ru", ["20\u00a0000", "0,001"], 20_000, 0.001),
    ("ru", ["20 000", "0.001"], 20_000, 0.001),
])
def test_number_flags_read_numbers_as_the_form_does(lang, typed, steps, lr):
    # One rule for the form and the command line (app/base/numbers.py, parse_number): thousands
    # separators of the interface's language, a decimal comma in Russian.
    parser = argparse.ArgumentParser()
    add_field_flags(parser)
    set_language(lang)
    try:
        args = parser.parse_args(["--steps-to", typed[0], "--lr", typed[1]])
        cfg = apply_flags({}, args)
    finally:
        set_language(None)
    assert cfg["training"]["steps_to"] == steps and isinstance(cfg["training"]["steps_to"], int)
    assert cfg["training"]["lr"] == pytest.approx(lr)


@pytest.mark.parametrize("lang, flag, typed", [
    ("en", "--steps-to", "20,00"),  # not a thousands group
    ("en", "--lr", "0,001"),  # a comma is a thousands separator in English
    ("ru", "--steps-to", "2,5"),  # not whole
    ("en", "--layers", "two"),
])
def test_a_number_flag_that_is_no_number_exits_2_with_the_reason(lang, flag, typed, capsys):
    set_language(lang)
    try:
        with pytest.raises(SystemExit) as exc:
            cli.main(["run", "start", "--constellations", "demo", flag, typed])
    finally:
        set_language(None)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and flag in err and repr(typed) in err
    assert Registry().list_runs() == []


@pytest.mark.parametrize("name", ["step-00000004.pt", "step-00000004.dcp"])
def test_a_relative_resume_from_is_found_beside_the_config_file_and_a_sharded_folder_too(tmp_path, monkeypatch, name):
    """run.json's resume_from, relative: the working folder first, then the config file's
    folder. A sharded run's checkpoint is a folder (step-*.dcp), and it is found as a file is."""
    from app.runs.manager import load_config, normalize_config

    beside = tmp_path / "configs"
    (beside / "ckpts").mkdir(parents=True)
    ckpt = beside / "ckpts" / name
    if name.endswith(".dcp"):
        ckpt.mkdir()
        (ckpt / ".metadata").write_bytes(b"x")
    else:
        ckpt.write_bytes(b"x")
    path = beside / "run.json"
    path.write_text(json.dumps({"resume_from": f"ckpts/{name}"}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # elsewhere: cwd/ckpts/... does not exist
    raw, base = load_config(str(path))
    assert normalize_config(raw, base)["resume_from"] == str(ckpt.resolve())
