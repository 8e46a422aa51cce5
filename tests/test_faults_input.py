"""Fault injection, issue 24: bad input never bricks the lab. A number out of its range, a
run the trainer would refuse at its start, a run folder edited by hand, a checkpoint that
is not what its name says. Real trainer processes (tiny model, CPU), real SQLite, the real
`ternit` entry point."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main as cli
from app.runs import Registry, RunManager
from app.runs.precheck import precheck
from tests import test_faults_lab as lab
from tests.test_faults_lab import config
from tests.trainer_run import ROOT

# The fixtures: a finished 3-step run (a copy of one made once per worker), the runs it is
# copied from, no trainer left.
finished, no_orphans = lab.finished, lab.no_orphans
template_lab, finished_template, second_run_template = lab.template_lab, lab.finished_template, lab.second_run_template

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
    ({"training": {"steps_to": 10**30}}, "training.steps_to: нужно не больше 1\u202f000\u202f000\u202f000"),
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
    assert "target.gpu: auto, cpu или номера карт" in capsys.readouterr().err  # the contract's refusal, in Russian
    _no_run_left()
    text = json.dumps(config(tiny_data)).replace('"steps_to": 6', '"steps_to": 6, "steps_to": 60')
    path.write_text(text, encoding="utf-8")
    assert _start(path) == 2
    assert "ключ 'steps_to' указан дважды" in capsys.readouterr().err
    _no_run_left()


def test_a_section_given_as_null_is_read_the_same_by_the_lab_and_the_trainer(tiny_data, tmp_path):
    from trainer.config.run_config import load

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


# ---- 4. one choice of a run's checkpoint, for every command, that says what it passed over ---
def _sample(target: str) -> tuple[int, str]:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["sample", target, "--tokens", "2", "--device", "cpu"])
    return code, err.getvalue()


def _three_commands(m: RunManager, run_id: str, tmp_path: Path, capsys) -> dict[str, tuple[int, str, str]]:
    """What `ternit sample ID`, `ternit export ID` and «Продолжить» (its config, as
    `ternit run continue` and the window make it) choose and say."""
    out: dict[str, tuple[int, str, str]] = {}
    code, err = _sample(run_id)
    out["sample"] = (code, err, "")
    target = tmp_path / "w.safetensors"
    code = cli.main(["export", run_id, str(target)])
    from app.runs.export import _metadata

    out["export"] = (code, capsys.readouterr().err, _metadata(target).get("step", "") if target.exists() else "")
    notes: list[str] = []
    cfg = m.continue_config(run_id, notes=notes)
    out["continue"] = (0, "\n".join(notes), cfg["resume_from"])
    return out


def _three_choices(m: RunManager, run_id: str) -> dict[str, tuple[int, str, str]]:
    """What the same three choose and say, asked of the functions they print it from, with
    no child process started: `ternit sample`'s target (app.text.generation.resolve, whose
    notes sample_cli prints), `ternit export`'s choice (choose_checkpoint on the run's folder,
    whose said() app/runs/export_cli prints) and «Продолжить»'s config. Each command's child
    then only loads the file chosen here: `_three_commands` runs them all for one case."""
    from app.runs.checkpoints import checkpoint_step, choose_checkpoint
    from app.text.generation import resolve

    target = resolve(run_id)
    choice = choose_checkpoint(m.registry.get(run_id).path)
    assert choice.path is not None and choice.path == target.checkpoint, (choice, target)
    notes: list[str] = []
    cfg = m.continue_config(run_id, notes=notes)
    return {"sample": (0, "\n".join(target.notes), ""),
            "export": (0, "\n".join(choice.said()), str(checkpoint_step(choice.path))),
            "continue": (0, "\n".join(notes), cfg["resume_from"])}


@pytest.mark.parametrize("pointer, said", [
    ("deleted", "step-00000003.pt"),
    ("never", "step-00000099.pt"),
    ("garbage", "latest"),
])
def test_a_latest_pointer_to_nothing_usable_is_passed_over_the_same_way_by_every_command(
        finished, tmp_path, capsys, pointer, said):
    m, run_id = finished
    folder = m.registry.get(run_id).checkpoints_dir
    if pointer == "deleted":
        (folder / "step-00000003.pt").unlink()
        (folder / "step-00000003.pt.sha256").unlink()
    elif pointer == "never":
        (folder / "latest").write_text("step-00000099.pt\n")
    else:
        (folder / "latest").write_bytes(b"\x00\xffnot a name")
    newest = "step-00000002.pt" if pointer == "deleted" else "step-00000003.pt"
    # The commands themselves (their child processes) for one case; the choice they all
    # print and load from (choose_checkpoint) for the others.
    got = _three_commands(m, run_id, tmp_path, capsys) if pointer == "deleted" else _three_choices(m, run_id)
    for command, (code, err, _) in got.items():
        assert code == 0, (command, err)
        assert "latest" in err and said in err, (command, err)  # said, not silent
    assert got["export"][2] == newest[5:13].lstrip("0") and got["continue"][2].endswith(newest)


def test_a_damaged_newest_checkpoint_is_passed_over_the_same_way_by_every_command(finished, tmp_path, capsys):
    from tests.test_faults import flip_bytes_in_largest_tensor

    m, run_id = finished
    flip_bytes_in_largest_tensor(m.registry.get(run_id).checkpoints_dir / "step-00000003.pt")
    got = _three_choices(m, run_id)  # what each command prints and loads (the commands themselves: above)
    for command, (code, err, _) in got.items():
        assert code == 0 and "step-00000003.pt" in err and "step-00000002.pt" in err, (command, err)
    assert got["export"][2] == "2" and got["continue"][2].endswith("step-00000002.pt")
    from app.window.lab import Lab

    info = Lab(m).continue_info(run_id)  # the window's «Продолжить» says it with its start
    assert info.step == 2 and "step-00000003.pt" in " ".join(info.notes)


# ---- 5. a checkpoint carries its run and step: another run's under this name is caught ------
@pytest.fixture
def two_runs(finished_template, second_run_template):
    """Run A (steps 1-3, as `finished`) and run B of the same model (checkpoints of steps
    3-5 kept), copies of the two made once for this worker."""
    m = lab.copied_in(finished_template, second_run_template)
    yield m, finished_template.name, second_run_template.name
    m.registry.close()


def _copy_over(src: Path, dst: Path) -> None:
    shutil.copyfile(src, dst)
    shutil.copyfile(src.with_name(src.name + ".sha256"), dst.with_name(dst.name + ".sha256"))


@pytest.mark.parametrize("from_step", [5, 3])  # another step of run B; the same step of run B
def test_another_runs_checkpoint_under_this_runs_name_is_refused_by_resume_and_named_by_the_rest(
        two_runs, tmp_path, capsys, from_step):
    from tests.trainer_run import events, run_trainer

    m, a, b = two_runs
    a_dir, b_dir = m.registry.get(a).path, m.registry.get(b).path
    target = a_dir / "checkpoints" / "step-00000003.pt"
    _copy_over(b_dir / "checkpoints" / f"step-{from_step:08d}.pt", target)
    said = f"holds step {from_step}" if from_step != 3 else f"written by run {b}"

    named = run_trainer(a_dir, "--resume", str(target), "--stop-at-step", "4")
    assert named.returncode == 2 and said in named.stderr and "Traceback" not in named.stderr, named.stderr
    latest = run_trainer(a_dir, "--resume", "latest", "--stop-at-step", "3")
    assert latest.returncode == 0, latest.stderr
    assert events(a_dir, "start")[-1]["resumed_from"].endswith("step-00000002.pt")
    assert said in events(a_dir, "warning")[-1]["message"]
    (a_dir / "checkpoints" / "latest").write_text("step-00000003.pt\n")  # as before the resume
    _copy_over(b_dir / "checkpoints" / f"step-{from_step:08d}.pt", target)

    from app.base.i18n import set_language

    set_language("en")
    try:
        # By the run's id each command passes over the foreign file and loads A's own step 2:
        # what they print and load is checked at the choice they make (choose_checkpoint;
        # the commands themselves load a passed-over-to checkpoint in the pointer test above).
        # Named by its path, the foreign file itself is loaded: the commands themselves (their
        # child processes) for one case, the check they print from (inspect_checkpoint) for
        # the other.
        full = from_step == 3
        got = _three_choices(m, a)
        for command, (code, err, _) in got.items():
            assert code == 0 and b in err and "step-00000003.pt" in err, (command, err)
        assert got["export"][2] == "2" and got["continue"][2].endswith("step-00000002.pt")
        if full:
            code, err = _sample(str(target))  # named by its path: used, and what it really is said
            assert code == 0 and b in err, err
            assert cli.main(["export", str(target), str(tmp_path / "named.safetensors")]) == 0
            assert b in capsys.readouterr().err
        else:
            from app.runs.checkpoints import inspect_checkpoint
            from app.text.generation import resolve

            named = resolve(str(target))  # what `ternit sample PATH` prints and loads
            assert named.checkpoint == target and b in " ".join(named.notes), named
            seen = inspect_checkpoint(target)  # what `ternit export PATH` prints and exports
            assert seen.path == target and b in " ".join(seen.said()), seen
    finally:
        set_language(None)


def test_a_checkpoint_from_before_run_ids_still_loads_and_says_so(finished, tmp_path, capsys):
    import torch

    from tests.trainer_run import run_trainer
    from trainer.state import checkpoint as C

    m, run_id = finished
    run_dir = m.registry.get(run_id).path
    old = run_dir / "checkpoints" / "step-00000003.pt"
    state = torch.load(old, map_location="cpu", weights_only=True)
    del state["run_id"]
    C.save(run_dir, 3, state, 3)
    code, err = _sample(run_id)
    assert code == 0 and "step-00000003.pt" in err and ("before checkpoints" in err or "до того" in err), err
    p = run_trainer(run_dir, "--resume", str(old), "--stop-at-step", "4")
    assert p.returncode == 0 and "written before checkpoints carried their run" in p.stderr, p.stderr


# ---- 3. the lab's state file: a full disk said as one, a damaged file set aside with what it held
try:  # POSIX only: on Windows the file still collects, and the tests that need it skip
    import resource
except ImportError:
    resource = None

NO_LIMIT = "setting a file-size limit needs POSIX's resource module (not on Windows)"


def _ternit_with_full_disk(*args: str) -> subprocess.CompletedProcess:
    """`ternit ARGS` in a process whose every file write past 1 byte fails (RLIMIT_FSIZE;
    Python ignores SIGXFSZ, so the write returns EFBIG, as a full disk's ENOSPC would). The
    state file's first page is then never written, as on a disk with no room left."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))

    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, preexec_fn=limit)


@pytest.mark.skipif(resource is None, reason=NO_LIMIT)
@pytest.mark.parametrize("state_exists", [False, True])
def test_a_full_state_disk_at_start_is_said_as_a_full_disk_in_one_line(tiny_data, tmp_path, state_exists):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config(tiny_data)), encoding="utf-8")
    if state_exists:  # the lab ran here before: its state file is there, the disk filled since
        assert subprocess.run([sys.executable, "-m", "app", "run", "list"], cwd=ROOT, capture_output=True,
                              timeout=120).returncode == 0
    p = _ternit_with_full_disk("run", "start", "--config", str(path))
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    said = lines[0]
    assert ("нет места" in said or "is full" in said) and "Traceback" not in p.stderr, said
    assert "переименуйте" not in said and "rename" not in said
    _no_run_left()


def _library_with_a_damaged_page(tmp_path: Path) -> tuple[Path, list[str]]:
    """A lab whose library holds a constellation of 300 datasets, with prepared data naming
    them, and one page of the datasets table overwritten: (state file, the names on it)."""
    from app.base import paths
    from app.base.state import open_state

    names = [f"set-{i:03d}-" + "x" * 200 for i in range(300)]  # long rows: a few to a page
    with open_state() as st:
        st.execute("INSERT INTO constellations (name, created_at) VALUES ('kept', 0)")
        st.executemany("INSERT INTO datasets (name, path, kind, sha256, added_at, changed_at, scanned_at) "
                       "VALUES (?, '/nowhere', 'file', 'h', 0, 0, 0)", [(n,) for n in names])
        st.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db = st.path
    prepared = paths.prepared_dir() / "p1"
    prepared.mkdir(parents=True)
    (prepared / "meta.json").write_text(json.dumps({"sources": [["kept", n, "h"] for n in names]}), encoding="utf-8")
    conn = sqlite3.connect(db)
    try:  # a leaf page of the table itself (its name index holds the names too)
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        leaves = [r[0] for r in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'datasets' AND pagetype = 'leaf' ORDER BY pageno")]
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table to find a page of the datasets table by")
    finally:
        conn.close()
    raw = bytearray(db.read_bytes())
    at = (leaves[len(leaves) // 2] - 1) * page
    on_page = [n for n in names if raw.find(n.encode(), at, at + page) >= 0]
    assert on_page
    raw[at:at + page] = b"\xa5" * page
    db.write_bytes(bytes(raw))
    return db, on_page


def test_a_damaged_state_file_is_set_aside_with_what_it_held_and_the_losses_named(tmp_path):
    db, on_page = _library_with_a_damaged_page(tmp_path)
    p = subprocess.run([sys.executable, "-m", "app", "data", "list"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "set aside" in p.stderr or "отложен" in p.stderr, p.stderr
    (aside,) = db.parent.glob("state.damaged-*.sqlite")
    assert aside.is_file()
    for name in on_page:  # exactly what was lost is named
        assert name in p.stderr
    from app.base.state import open_state

    with open_state() as st:  # the rest carried over
        have = {r[0] for r in st.query("SELECT name FROM datasets")}
        assert len(have) >= 300 - len(on_page) and not have & set(on_page)
        assert st.one("SELECT 1 FROM constellations WHERE name = 'kept'")


# ---- 6. smaller: a locked state file, Kaggle's add-account offline, torch.save on a full disk ----
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
"""


def test_a_locked_state_file_names_who_holds_it_and_says_the_lab_waits(tiny_data, tmp_path):
    from app.base import paths

    assert subprocess.run([sys.executable, "-m", "app", "run", "list"], cwd=ROOT, capture_output=True,
                          timeout=120).returncode == 0  # the state file exists
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(paths.state_db_path())], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        path = tmp_path / "run.json"
        path.write_text(json.dumps(config(tiny_data)), encoding="utf-8")
        p = subprocess.run([sys.executable, "-m", "app", "run", "start", "--config", str(path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 2 and str(holder.pid) in lines[0] and ("жду" in lines[0] or "waiting" in lines[0]), lines
    assert str(holder.pid) in lines[1] and ("ждала" in lines[1] or "waited" in lines[1]), lines
    _no_run_left()


def test_adding_a_kaggle_account_offline_has_one_outcome_saved_and_said_unverified(tmp_path, capsys, monkeypatch):
    from app.kaggle import cli as kaggle_cli
    from app.kaggle.credentials import CredentialStore
    from tests.fake_kaggle.fixtures import KEYS
    from tests.fake_kaggle.server import FakeKaggle

    server = FakeKaggle(tmp_path / "fake-kaggle").start()
    monkeypatch.setenv("TERNIT_KAGGLE_ENDPOINT", server.url)
    monkeypatch.setenv("TERNIT_KAGGLE_POLL_S", "0.05")
    server.stop()  # nothing answers there now: offline
    code = kaggle_cli.main(["add-account", "--username", "alice", "--key", KEYS["alice"]])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    assert "не проверен" in err or "not verified" in err, err
    assert CredentialStore().names() == ["alice"]


def test_nothing_of_the_run_folder_is_held_after_the_trainers_end(tmp_path, tiny_data, monkeypatch):
    """Once the `end` event is written, the teardown that follows (freeing the model, leaving
    the process group, the interpreter's exit: seconds on a loaded machine) holds neither the
    run folder's lock nor the event file: a continuation in place may start at once."""
    import gc as gc_module
    import os

    import trainer.run.train as tt
    from tests.trainer_run import events, write_run
    from trainer.__main__ import main
    from trainer.base.lock import RunLock

    run = write_run(tmp_path / "run", tiny_data, steps_to=2)
    seen: dict[str, object] = {}
    real_collect = gc_module.collect

    def teardown_begins(*args, **kwargs):
        if "lock" not in seen and events(run, "end"):  # the teardown's first collect: what is held now?
            seen["ended"] = True
            other = RunLock(run)
            try:
                other.acquire()
                seen["lock"] = "free"
                other.release()
            except Exception as e:  # noqa: BLE001 — the lock's refusal, said in the assert
                seen["lock"] = f"held: {e}"
            seen["events_open"] = any(os.path.realpath(f"/proc/self/fd/{fd}") == str(run / "events.jsonl")
                                      for fd in os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
        return real_collect(*args, **kwargs)

    monkeypatch.setattr(tt.gc, "collect", teardown_begins)
    assert main(["--run", str(run), "--device", "cpu"]) == 0
    assert seen["ended"] and seen["lock"] == "free", seen
    assert seen["events_open"] in (False, None), seen
