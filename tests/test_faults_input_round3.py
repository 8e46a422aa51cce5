"""Faults, round 3 (issue 37): inputs that got a traceback or passed unbounded — each is
said in one line naming the file and the key, before anything exists (the lab's one door:
`ternit run start`, `ternit queue add`, `ternit run continue`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app.cli import main as cli
from app.queue.adding import add_runs
from app.queue.store import QueueStore
from app.runs import Registry
from tests.test_faults_lab import config


def _no_run_left() -> None:
    reg = Registry()
    try:
        assert reg.list_runs() == []
        assert not reg.runs_root.exists() or not any(reg.runs_root.iterdir())
        assert QueueStore(reg.state).items() == []
    finally:
        reg.close()


def _one_line(capsys, *argv: str) -> str:
    from app.base.state import repairs_to_say

    repairs_to_say()  # what an earlier test's repaired state file left to say is not this command's
    code = cli.main(list(argv))
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and "Traceback" not in err and len(lines) == 1, (code, err)
    return lines[0]


def _deep(n: int) -> str:
    return '{"name": "x", "model": ' + "[" * n + "]" * n + "}"


BAD = {
    # what the file holds -> what its one line must name
    "model-list": (lambda c: {**c, "model": [1]}, ["model"]),
    "data-list": (lambda c: {**c, "data": [1]}, ["data"]),
    "training-text": (lambda c: {**c, "training": "fast"}, ["training"]),
    "deep": (lambda c: _deep(100_000), ["run.json"]),  # 600 KB: over the size a run.json may have
    "deep-small": (lambda c: _deep(20_000), ["JSON"]),  # 120 KB: under it, nested past json's stack
    "prompts-many": (lambda c: {**c, "training": {**c["training"], "sample_prompts": ["о"] * 50_000}},
                     ["training.sample_prompts"]),
    "prompt-long": (lambda c: {**c, "training": {**c["training"], "sample_prompts": ["о" * 5000]}},
                    ["training.sample_prompts[0]"]),
    "name-newline": (lambda c: {**c, "name": "two\nlines"}, ["two\\nlines"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_run_json_is_one_line_naming_the_file_and_the_key(case, tmp_path, tiny_data, capsys):
    make, named = BAD[case]
    body = make(config(tiny_data))
    path = tmp_path / f"{case}.json"
    path.write_text(body if isinstance(body, str) else json.dumps(body, ensure_ascii=False), encoding="utf-8")
    for cmd in (["run", "start"], ["queue", "add"]):
        line = _one_line(capsys, *cmd, "--config", str(path))
        assert all(word in line for word in named), line
        if case != "name-newline":
            assert str(path) in line or "sample_prompts" in line, line
    _no_run_left()


def test_a_utf8_bom_is_read_past(tmp_path, tiny_data, capsys):
    """Windows PowerShell 5 (`Out-File -Encoding utf8`) and older Notepad write a BOM."""
    from app.runs.precheck import load_config

    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(config(tiny_data)).encode())
    raw, _ = load_config(path)
    assert raw["name"] == "tiny"
    assert cli.main(["queue", "add", "--config", str(path), "--target", "local"]) == 0, capsys.readouterr().err


def test_run_continue_names_the_folders_run_json_missing_or_holding_nan(tmp_path, tiny_data, capsys):
    """`run continue` of a run whose run.json was deleted, or edited to hold NaN: one line
    naming the file (and the key), as the pre-check does for `run start`."""
    from app.runs import RunManager

    reg = Registry()
    rec = reg.create_run(config(tiny_data))
    ckpt = rec.path / "checkpoints" / "step-00000003.pt"
    ckpt.write_bytes(b"not used: the run.json is refused first")
    saved = rec.run_json_path.read_text(encoding="utf-8")
    rec.run_json_path.unlink()
    reg.close()
    line = _one_line(capsys, "run", "continue", rec.id)
    assert str(rec.run_json_path) in line, line
    broken = json.loads(saved)
    broken["training"]["steps_to"] = math.nan
    rec.run_json_path.write_text(json.dumps(broken), encoding="utf-8")  # json writes NaN as NaN
    line = _one_line(capsys, "run", "continue", rec.id)
    assert str(rec.run_json_path) in line and "training.steps_to" in line and "nan" in line.lower(), line
    reg = Registry()
    try:  # the window's «Продолжить» asks the same
        with pytest.raises(ValueError, match="training.steps_to"):
            RunManager(reg).continue_config(rec.id)
    finally:
        reg.close()


def test_repeated_vary_values_make_one_run_each(tiny_data):
    """`--vary training.lr=1e-3,0.001,0.0010,0.003` is two runs, not four identical ones."""
    reg = Registry()
    try:
        added = add_runs(QueueStore(reg.state), config(tiny_data), target="local", check=lambda _: None,
                         vary=[("training.lr", [1e-3, 0.001, 0.0010, 0.003])])
        assert [it.config["training"]["lr"] for it in added.items] == [0.001, 0.003]
        assert added.series.vary == [("training.lr", [0.001, 0.003])]
    finally:
        reg.close()


def test_a_queue_item_in_an_unknown_state_can_be_removed(capsys):
    from tests.test_faults_queue import _raw_item

    reg = Registry()
    try:
        item_id = _raw_item(QueueStore(reg.state), json.dumps({"name": "odd"}), state="paused-by-hand")
    finally:
        reg.close()
    assert cli.main(["queue", "remove", str(item_id)]) == 0, capsys.readouterr().err
    _no_run_left()


def test_sample_prompts_bounds_are_the_trainers_rule():
    from trainer.config.run_config import (
        MAX_PROMPT_CHARS,
        MAX_SAMPLE_PROMPTS,
        ConfigError,
        from_dict,
    )

    base = {"training": {"sample_prompts": ["a"] * MAX_SAMPLE_PROMPTS}}
    from_dict(base)
    from_dict({"training": {"sample_prompts": ["a" * MAX_PROMPT_CHARS]}})
    for bad in (["a"] * (MAX_SAMPLE_PROMPTS + 1), ["a" * (MAX_PROMPT_CHARS + 1)]):
        with pytest.raises(ConfigError):
            from_dict({"training": {"sample_prompts": bad}})


@pytest.mark.skipif(not hasattr(__import__("os"), "symlink") or __import__("os").name == "nt",
                    reason="a symlink needs privileges on Windows")
def test_a_checkpoint_that_is_a_symlink_to_itself_is_named_not_skipped_silently(tmp_path):
    from app.runs.checkpoints import choose_checkpoint

    folder = tmp_path / "run" / "checkpoints"
    folder.mkdir(parents=True)
    loop = folder / "step-00000005.pt"
    loop.symlink_to(loop.name)  # a link to itself
    (folder / "step-00000004.pt").symlink_to("gone.pt")  # and one to nothing
    choice = choose_checkpoint(tmp_path / "run")
    links = [x for x in choice.passed_over if "latest" not in x]  # the pointer's absence is said first
    assert choice.path is None and len(links) == 2, choice
    assert "step-00000005.pt" in links[0] and "step-00000004.pt" in links[1]
    assert all("ссылка" in x or "link" in x for x in links), links


@pytest.mark.skipif(__import__("os").name != "posix", reason="file modes are POSIX's")
def test_under_umask_000_the_key_folders_are_0700_and_logs_not_world_writable(monkeypatch):
    """A umask of 000 (a misconfigured shell, some containers): the config folder and the
    Kaggle client's folder around the key are still 0700, the log file and its folder not
    writable by others."""
    import logging
    import os
    import stat

    from app.base import logs, paths
    from app.kaggle import sdk

    old = os.umask(0)
    try:
        config = paths.config_dir()
        client = sdk.client_dir()
        where = logs.setup()
        logging.getLogger("test").warning("a line, so the file exists")
    finally:
        os.umask(old)
    assert stat.S_IMODE(config.stat().st_mode) == 0o700
    assert stat.S_IMODE(client.stat().st_mode) == 0o700
    assert where is not None
    for path in (where, where.parent):
        assert not stat.S_IMODE(path.stat().st_mode) & 0o022, (path, oct(path.stat().st_mode))


@pytest.mark.skipif(__import__("os").name != "posix", reason="file modes are POSIX's")
def test_exported_weights_keep_the_users_normal_mode(tmp_path, tiny_data):
    """safetensors writes owner-only (0600); the export is the user's file like any other."""
    import stat

    from tests.trainer_run import run_module, run_trainer, write_run
    from trainer.model.export import umask

    run = write_run(tmp_path / "r", tiny_data, steps_to=2, eval_every=2, eval_segments=2, warmup_steps=1)
    assert run_trainer(run, "--device", "cpu").returncode == 0
    out = tmp_path / "w.safetensors"
    ckpt = sorted((run / "checkpoints").glob("step-*.pt"))[-1]
    done = run_module("trainer.model.export", str(ckpt), str(out))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask()


def _tree(root) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and modification time: what a look changes."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_labs_folder_moved_or_copied_finds_its_runs_and_never_touches_the_old(tmp_path, tiny_data, monkeypatch):
    """A lab with a trained run (its data in the lab's prepared/) moved to another
    TERNIT_HOME lists the run as it is, not «папка удалена»; a copy of it lists, reads and
    continues its own folders (the run's, its checkpoint, its data) — the old lab's files
    stay byte for byte and time for time as they were."""
    import os
    import shutil

    from app.base import paths
    from app.runs import RunManager
    from tests.trainer_run import run_trainer

    first = Path(os.environ["TERNIT_HOME"])
    shutil.copytree(tiny_data, paths.prepared_dir() / "tiny")
    reg = Registry()
    m = RunManager(reg)
    rec = m.create({**config(paths.prepared_dir() / "tiny"), "name": "moving"})
    assert run_trainer(rec.path, "--device", "cpu").returncode == 0
    reg.ingest(rec.id)
    reg.close()

    copy = tmp_path / "copy"
    shutil.copytree(first, copy)  # the old lab stays where it was, whole
    before = _tree(first)
    monkeypatch.setenv("TERNIT_HOME", str(copy))
    reg = Registry()
    m = RunManager(reg)
    assert [r.path for r in reg.list_runs()] == [copy / "data" / "runs" / rec.id]
    cfg = m.continue_config(rec.id)
    assert Path(cfg["resume_from"]).is_relative_to(copy) and Path(cfg["data"]["dir"]).is_relative_to(copy), cfg
    nxt = m.create(cfg, parent_id=rec.id)
    assert run_trainer(nxt.path, "--device", "cpu").returncode == 0
    reg.ingest(nxt.id)
    assert reg.get(nxt.id).status == "finished"
    reg.close()
    assert _tree(first) == before  # nothing of the old lab was written

    moved = tmp_path / "moved"
    shutil.move(str(first), str(moved))
    monkeypatch.setenv("TERNIT_HOME", str(moved))
    reg = Registry()
    got = reg.get(rec.id)
    assert got.path == moved / "data" / "runs" / rec.id and got.path.is_dir() and not got.path.parent.samefile(
        copy / "data" / "runs")
    assert Path(got.config()["data"]["dir"]) == moved / "data" / "prepared" / "tiny"
    assert [r.id for r in reg.list_runs()] == [rec.id]  # the copy's continuation is the copy's alone
    reg.close()


def test_migration_007_makes_a_labs_absolute_run_folders_relative(monkeypatch):
    from app.base import paths
    from app.base.state import open_state

    reg = Registry()
    rec = reg.create_run(config(Path("/nowhere")))
    stored = reg.state.one("SELECT folder FROM runs WHERE id = ?", (rec.id,))["folder"]
    assert stored == f"runs/{rec.id}"  # new rows: relative already
    reg.state.execute("UPDATE runs SET folder = ? WHERE id = ?", (f"/old/place/data/runs/{rec.id}", rec.id))
    reg.state.execute("DELETE FROM schema_migrations WHERE version = 7")
    reg.close()
    with open_state() as st:  # 007 again, as an older lab's file meets it
        assert st.one("SELECT folder FROM runs WHERE id = ?", (rec.id,))["folder"] == f"runs/{rec.id}"
    reg = Registry()
    assert reg.get(rec.id).path == paths.runs_dir() / rec.id
    reg.close()


def test_a_lab_folder_too_deep_for_windows_paths_is_refused_before_the_run_exists(tmp_path, tiny_data, capsys,
                                                                                  monkeypatch):
    """The lab's folder at ~190 characters on a Windows PC without long paths: the run's
    checkpoint would be written and then not open (WinError 234). `run start` refuses before
    anything exists, with the real reason and the fix; a short folder starts. (Windows' own
    limit is read from LongPathsEnabled there; here it is given.)"""
    import os

    from app.runs import precheck

    deep = tmp_path / ("d" * 60) / ("e" * 60) / "lab"
    monkeypatch.setenv("TERNIT_HOME", str(deep))
    monkeypatch.setattr(precheck, "path_limit", lambda: precheck.WINDOWS_MAX_PATH)
    assert len(str(deep)) > 150 and precheck.path_too_long(deep / "data" / "runs", "tiny") is not None
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config(tiny_data)), encoding="utf-8")
    line = _one_line(capsys, "run", "start", "--config", str(path))
    assert "260" in line or "259" in line, line
    assert "TERNIT_HOME" in line and "LongPathsEnabled" in line, line
    _no_run_left()
    assert precheck.path_too_long(Path("C:/tl/data/runs"), "tiny") is None
    assert os.name != "nt" or precheck.path_limit() in (None, 260)


def test_data_prepare_names_a_path_too_long_as_such():
    """Windows' WinError 206/234 (and ENAMETOOLONG) is the path's length, not free space or
    access: `ternit data prepare`'s line says so and the fix."""
    import errno

    from app.data.prepare import _write_failed

    for exc in (OSError(errno.ENAMETOOLONG, "File name too long", "C:/" + "x" * 250),):
        said = _write_failed(exc, Path("C:/lab/data/prepared/x")).args[0]
        assert "LongPathsEnabled" in said and ("места" not in said and "free space" not in said), said
    said = _write_failed(OSError(errno.ENOSPC, "No space left on device"), Path("/lab/x")).args[0]
    assert "LongPathsEnabled" not in said
