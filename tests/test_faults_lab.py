"""Fault injection on the lab's side (issue 17): bad run.json values refused before a run
exists, one run's damaged files staying that run's problem, continuing a running run,
concurrent first starts of a fresh lab, a FIFO given as data, SIGTERM while following.
Real trainer processes (tiny model, CPU), real SQLite, real `ternit` processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.base import paths
from app.base import run_status as status
from app.cli import main as cli
from app.runs import Registry, RunManager
from app.runs import process as proc
from app.runs.cli import EXIT_STOPPED
from tests.test_faults import flip_bytes_in_largest_tensor
from tests.trainer_run import ROOT, kill_tree

try:  # POSIX only: on Windows the file still collects, and the tests that need it skip
    import resource
except ImportError:
    resource = None

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def no_orphans():
    """A test that fails midway must not leave a detached trainer on the shared machine."""
    yield
    reg = Registry()
    try:
        for rec in reg.active():
            if rec.target_kind == "local" and proc.is_alive(rec.pid, rec.pid_started_at):
                kill_tree(rec.pid)
    finally:
        reg.close()


def config(data_dir: Path, **training) -> dict:
    return {
        "name": "tiny",
        "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
        "training": {"batch_per_card": 4, "steps_to": 6, "eval_every": 10, "eval_segments": 4,
                     "warmup_steps": 2, "limit_min": 3, **training},
        "data": {"dir": str(data_dir)},
        "target": {"kind": "local", "gpu": "cpu"},
    }


def ternit(*args: str, timeout: float = 120, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, **popen)


# ---- 2. bad run.json refused before a run exists -----------------------------------------
BAD = [
    ({"model": {"width": 64, "heads": 5}}, "не делится на число голов 5"),  # the contract's refusal, in Russian
    ({"model": {"width": "64"}}, "model.width"),
    ({"training": {"lerning_rate": 0.1}}, "training.lerning_rate"),
    ({"training": {"lr": 0}}, "training.lr"),
    ({"training": {"seed": -1}}, "training.seed"),
    ({"training": {"checkpoint_every_min": -5}}, "training.checkpoint_every_min"),
    ({"model": {"width": 1_000_000, "heads": 8}}, "model.width: нужно не больше 65"),
    ({"resume_from": 123}, "resume_from"),
]


@pytest.mark.parametrize("target", ["local", "kaggle"])
@pytest.mark.parametrize("change, key", BAD)
def test_a_bad_run_json_is_refused_with_exit_2_and_no_run_left(tiny_data, tmp_path, capsys, change, key, target):
    cfg = config(tiny_data)
    for section, value in change.items():
        cfg[section] = {**cfg.get(section, {}), **value} if isinstance(value, dict) else value
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    code = cli.main(["run", "start", "--config", str(path), "--target", target, "--wait"])
    err = capsys.readouterr().err
    assert code == 2 and key in err, err
    assert "Traceback" not in err and "disappeared" not in err
    reg = Registry()
    try:
        assert reg.list_runs() == []
        assert not reg.runs_root.exists() or not any(reg.runs_root.iterdir())
    finally:
        reg.close()


def test_infinity_and_bad_bytes_in_run_json_are_one_line(tiny_data, tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config(tiny_data)).replace('"lr"', '"x"').replace('"steps_to": 6', '"lr": Infinity, "steps_to": 6'))
    assert cli.main(["run", "start", "--config", str(path)]) == 2
    assert "training.lr must be a finite number" in capsys.readouterr().err
    path.write_bytes(b'{"name": "\xff"}')
    assert cli.main(["run", "start", "--config", str(path)]) == 2
    assert "UTF-8" in capsys.readouterr().err


# ---- 4, 1, 7: one run's damage stays that run's problem ----------------------------------
def _own_lab(mp: pytest.MonkeyPatch, home: Path) -> None:
    """The lab's folders, Kaggle's config and HOME under `home`, as tests/conftest.py's
    isolated_home sets them for a test (a template made once per worker has its own)."""
    for name, value in (("TERNIT_HOME", home / "lab"), ("HOME", home), ("USERPROFILE", home),
                        ("XDG_DATA_HOME", home / ".local" / "share"), ("XDG_CONFIG_HOME", home / ".config"),
                        ("XDG_CACHE_HOME", home / ".cache"), ("KAGGLE_CONFIG_DIR", home / ".kaggle")):
        mp.setenv(name, str(value))
    for name in ("KAGGLE_API_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY", "TERNIT_LANG"):
        mp.delenv(name, raising=False)


def _finish_in(home: Path, cfg: dict) -> Path:
    """`cfg` made a run of the lab under `home` (RunManager.create: its folder, run.json and
    row), then trained to its end as the lab launches it (`python -m trainer --run DIR
    --device cpu`, its output in the folder's trainer.log), forked (tests/forked.py: the
    lab's own start of a run is checked by the tests that start one, here and in
    test_runs_local): its run folder, which each test's lab adopts from its events."""
    from tests.trainer_run import run_module

    with pytest.MonkeyPatch.context() as mp:
        _own_lab(mp, home)
        m = RunManager()
        try:
            rec = m.create(cfg)
        finally:
            m.registry.close()
        log = rec.path / "trainer.log"
        done = run_module("trainer", "--run", str(rec.path), "--device", "cpu", timeout=180, output=log)
    assert done.returncode == 0, log.read_text(encoding="utf-8", errors="replace")
    return rec.path


# What the session fixtures below made, kept here: test_faults_input takes the same
# fixtures, which pytest would otherwise make once more for that module.
_MADE: dict[str, Path] = {}


def _once(key: str, make) -> Path:
    if key not in _MADE:
        _MADE[key] = make()
    return _MADE[key]


@pytest.fixture(scope="session")
def template_lab(tmp_path_factory) -> Path:
    """The HOME of a lab of this test worker's own, where the runs tests copy are made
    (one lab: two runs made in one minute get distinct ids)."""
    return _once("lab", lambda: tmp_path_factory.mktemp("template-lab"))


@pytest.fixture(scope="session")
def finished_template(template_lab, tiny_data) -> Path:
    """Run A's folder: a local run of 3 steps with a checkpoint at each (steps 1, 2, 3
    kept), trained once per test worker (`finished` copies it into each test's own lab)."""
    return _once("A", lambda: _finish_in(template_lab, config(tiny_data, steps_to=3, checkpoint_every_min=0)))


@pytest.fixture(scope="session")
def second_run_template(template_lab, finished_template, tiny_data) -> Path:
    """Run B's folder, in the same lab as A: the same model, its own run (5 steps, seed 7;
    the checkpoints of steps 3-5 kept), once per test worker."""
    return _once("B", lambda: _finish_in(template_lab, config(tiny_data, steps_to=5, checkpoint_every_min=0,
                                                                seed=7)))


def copied_in(*folders: Path) -> RunManager:
    """These finished run folders copied into this test's lab, and the lab opened on them:
    the lab adopts a run folder it finds (Registry.adopt_folders) as the finished run its
    events say it is, under the same id, which its checkpoints carry too."""
    runs_root = paths.runs_dir()
    for folder in folders:
        shutil.copytree(folder, runs_root / folder.name)
    m = RunManager()
    for folder in folders:
        rec = m.registry.get(folder.name)
        assert rec.status == status.FINISHED and rec.path == runs_root / folder.name, rec
    return m


@pytest.fixture
def finished(finished_template) -> tuple[RunManager, str]:
    """A local run of 3 steps with a checkpoint at each (steps 1, 2, 3 kept), this test's
    own: a copy of the one made once for this worker (`finished_template`)."""
    m = copied_in(finished_template)
    yield m, finished_template.name
    m.registry.close()


def test_damaged_pointer_flipped_bytes_and_a_damaged_run_json(finished, tmp_path, capsys):
    m, run_id = finished
    folder = m.registry.get(run_id).checkpoints_dir
    (folder / "latest").write_bytes(b"\xff\xfe")
    assert cli.main(["run", "list"]) == 0 and run_id in capsys.readouterr().out
    (folder / "latest").write_text("../run.json\n")
    assert m.continue_config(run_id)["resume_from"].endswith("step-00000003.pt")  # not ../run.json

    flip_bytes_in_largest_tensor(folder / "step-00000003.pt")
    notes: list[str] = []
    assert m.continue_config(run_id, notes=notes)["resume_from"].endswith("step-00000002.pt")
    assert "step-00000003.pt" in notes[0]
    assert m.continue_config(run_id, from_step=1)["resume_from"].endswith("step-00000001.pt")
    assert cli.main(["run", "continue", run_id, "--from-step", "3"]) == 2
    assert "step-00000003.pt" in capsys.readouterr().err
    out = tmp_path / "w.safetensors"
    assert cli.main(["export", run_id, str(out)]) == 0
    captured = capsys.readouterr()
    assert "step-00000003.pt" in captured.err and out.is_file()  # the damaged one passed over, said
    assert cli.main(["export", str(folder / "step-00000003.pt"), str(tmp_path / "x.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "step-00000003.pt" in err and "--resume" not in err  # named, refused, advice not a trainer flag
    assert "ternit export " in err and "step-00000002.pt" in err

    run_json = m.registry.get(run_id).run_json_path
    run_json.write_bytes(b"{not json")
    assert cli.main(["run", "continue", run_id]) == 2
    assert str(run_json) in capsys.readouterr().err
    state_file = m.registry.state.path
    m.registry.close()
    for f in state_file.parent.glob(state_file.name + "*"):
        f.unlink()  # the state is rebuilt from the run folders
    again = Registry()
    try:
        RunManager(again)
        assert [r.id for r in again.list_runs()] == [run_id]
    finally:
        again.close()
    m.registry = Registry()


def test_events_file_replaced_by_a_folder_does_not_break_the_history(finished, capsys):
    m, run_id = finished
    events = m.registry.get(run_id).events_path
    events.unlink()
    events.mkdir()
    assert m.registry.reindex(run_id).id == run_id
    assert cli.main(["run", "list"]) == 0 and run_id in capsys.readouterr().out


# ---- 5, 7. SIGTERM while following; the lab refuses to continue a running run -------------
def test_sigterm_to_start_wait_says_training_goes_on_and_a_running_run_is_not_continued(tiny_data, tmp_path, capsys):
    """One run going for both (one trainer start, not two): `ternit run start --wait` ended by
    SIGTERM says the training goes on, and it does; that run, still going, is then refused a
    continuation (no child made) and stops when asked. Off POSIX (no SIGTERM to send) the lab
    starts the run itself and the rest is the same."""
    cfg = config(tiny_data, steps_to=100000, checkpoint_every_min=0)  # a checkpoint to continue from
    if os.name == "posix":
        path = tmp_path / "run.json"
        path.write_text(json.dumps(cfg), encoding="utf-8")
        follower = subprocess.Popen([sys.executable, "-m", "app", "run", "start", "--config", str(path), "--wait"],
                                    cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert follower.stdout.readline()  # "<id>\t<status>\t<folder>": the run exists
            # The run's first line, printed while following: its SIGTERM handler is in place (a
            # fixed sleep here once raced the handler on a loaded machine).
            assert follower.stdout.readline().startswith(("старт", "start"))
            follower.send_signal(signal.SIGTERM)
            # Read on through the text wrapper, not communicate(): communicate reads the raw pipe
            # behind the wrapper's read-ahead, so it can start in the middle of a Cyrillic letter
            # (CI once failed so) and lose the lines already buffered.
            follower.stdout.read()
            err = follower.stderr.read()
            follower.wait(timeout=60)
        finally:
            follower.kill()
        assert follower.returncode == 143 and "Traceback" not in err
        assert "обучение продолжается" in err or "training goes on" in err
        reg = Registry()
        try:
            (rec,) = reg.list_runs()
            assert proc.is_alive(rec.pid, rec.pid_started_at)  # the training itself went on
        finally:
            reg.close()
        m = RunManager()
    else:
        m = RunManager()
        rec = m.start(cfg)
    try:
        deadline = time.monotonic() + 120
        while not list(m.registry.get(rec.id).checkpoints_dir.glob("step-*.pt")):
            assert time.monotonic() < deadline
            m.poll()
            time.sleep(0.2)
        assert cli.main(["run", "continue", rec.id]) == 2
        err = capsys.readouterr().err
        assert rec.id in err and ("ещё идёт" in err or "still going" in err), err
        assert [r.id for r in m.registry.list_runs()] == [rec.id]  # no child made
        m.stop(rec.id)
        assert m.wait(rec.id, timeout=120).status == status.STOPPED
    finally:
        m.registry.close()


# ---- 7. a FIFO as data -------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_is_refused_not_read_forever(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    p = ternit("data", "add", str(fifo), "--name", "pipe", timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "pipe.txt" in p.stderr


# ---- 6. concurrent first starts of a fresh lab -------------------------------------------
def test_concurrent_first_commands_on_a_fresh_lab_all_succeed(tmp_path):
    files = []
    for i in range(3):
        f = tmp_path / f"text{i}.txt"
        f.write_text(f"набор {i}: кот видит мяч.\n" * 50, encoding="utf-8")
        files.append(f)
    commands = [["data", "add", str(f), "--name", f"set{i}"] for i, f in enumerate(files)]
    commands += [["run", "list"], ["run", "list"], ["data", "list"]]
    children = [subprocess.Popen([sys.executable, "-m", "app", *c], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for c in commands]
    results = [(c, *child.communicate(timeout=120), child.returncode) for c, child in zip(commands, children, strict=True)]
    for command, _, err, code in results:
        assert code == 0, (command, err)
    p = ternit("data", "list")
    assert all(f"set{i}" in p.stdout for i in range(3)), p.stdout


# ---- 3. the lab's state file on a full disk while following ------------------------------
@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs Linux's prlimit (no `resource` module off POSIX)")
def test_a_full_state_disk_while_following_is_one_line_and_following_resumes(tiny_data, tmp_path):
    """`ternit run wait` whose every write to a file starts failing (RLIMIT_FSIZE of 1 byte;
    SQLite then says "disk I/O error" or "database or disk is full"), while the trainer, started before, trains on: one line
    says so and the following goes on; once the limit is lifted (space returns) the row
    catches up and the follower ends with the run."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config(tiny_data, steps_to=100000)), encoding="utf-8")
    started = ternit("run", "start", "--config", str(path))
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.split("\t")[0].strip()
    run_dir = Path(started.stdout.strip().split("\t")[-1])

    follower = subprocess.Popen([sys.executable, "-m", "app", "run", "wait", run_id], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Pipes, not files (the file-size limit below would cut a file); stdout drained aside so
    # its step lines never fill the pipe while stderr is read here.
    out: list[str] = []
    drain = threading.Thread(target=lambda: out.extend(follower.stdout), daemon=True)
    drain.start()
    try:
        said = [follower.stderr.readline()]  # «следим за …»: the state is open, following began
        assert run_id in said[0], said
        # The disk fills up under the follower: every write past byte 1 of any file fails
        # (Python ignores SIGXFSZ, so the write returns EFBIG, as a full disk's ENOSPC would).
        resource.prlimit(follower.pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
        deadline = time.monotonic() + 120
        while not any("не записывается" in line or "cannot be written" in line for line in said):
            assert time.monotonic() < deadline and follower.poll() is None, said
            said.append(follower.stderr.readline())
        resource.prlimit(follower.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        (run_dir / "STOP").touch()
        err = follower.stderr.read()
        follower.wait(timeout=120)
        drain.join(timeout=10)
    finally:
        follower.kill()
    err = "".join(said) + err
    assert "Traceback" not in err, err
    assert sum("не записывается" in line or "cannot be written" in line for line in err.splitlines()) == 1, err
    assert follower.returncode == EXIT_STOPPED, err + "".join(out)  # the run's own outcome: stopped by STOP
    shown = ternit("run", "show", run_id, "--json")
    assert json.loads(shown.stdout)["status"] == status.STOPPED, shown.stdout  # the row caught up
