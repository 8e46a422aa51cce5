"""The night queue's decisions at their pure functions and OS boundaries: which process is
the runner (a Windows venv launcher's pid is not), how it is detached, the close question
and the status line, the one retry policy, the room a full disk leaves, and the autostart
entries (the XDG file for real; the Windows task's XML against Task Scheduler's schema)."""

from __future__ import annotations

import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app.queue import autostart, detach, lock, retry
from app.queue.driver import QueueDriver
from app.queue.store import QueueStore
from app.queue.world import runner_line
from app.runs.failure import Failure
from app.runs.manager import RunManager
from app.runs.registry import Registry

pytestmark = pytest.mark.usefixtures("russian")


def _config(data: Path, name: str = "r") -> dict:
    return {"name": name, "model": {"context": 16, "width": 16, "heads": 2, "layers": 1, "vocab": 300},
            "training": {"batch_per_card": 2, "steps_to": 4}, "data": {"dir": str(data)},
            "target": {"kind": "local", "gpu": "cpu"}}


# ---- which process is the runner ---------------------------------------------------------------
def test_the_runner_is_the_lock_notes_pid_compared_exactly_and_a_launchers_child_is_ours():
    note = lock.Note(pid=4321, program="ternit queue run", since=time.time())
    assert detach.runner_of(note, 4321, lambda pid: None) == "ours"
    # A venv's Scripts\pythonw.exe started the base interpreter as its child: Popen's pid is the launcher's.
    assert detach.runner_of(note, 1000, {4321: 1000}.get) == "ours"
    assert detach.runner_of(note, 1000, {4321: 1}.get) == "other"
    # The old substring test took a pid inside the note's time for a match; exact comparison does not.
    assert detach.runner_of(lock.Note(pid=77, program="p", since=1234.5), 12, lambda pid: None) == "other"
    assert detach.runner_of(None, 4321) == ""


def test_the_lock_note_names_only_a_holder_that_holds_it(tmp_path):
    held = lock.RunnerLock("ternit queue run", tmp_path / "queue.lock")
    held.acquire()
    note = lock.current_holder(held.path)
    assert note is not None and note.pid == os.getpid() and note.program == "ternit queue run"
    held.release()
    assert lock.read_note(held.path) is not None and lock.current_holder(held.path) is None  # a note left names nobody


def test_how_the_runner_is_detached_on_each_os(tmp_path):
    assert detach.popen_kwargs("posix") == {"start_new_session": True}
    flags = detach.popen_kwargs("nt")["creationflags"]
    assert flags & detach.CREATE_NEW_PROCESS_GROUP and flags & detach.CREATE_BREAKAWAY_FROM_JOB
    assert not detach.popen_kwargs("nt", breakaway=False)["creationflags"] & detach.CREATE_BREAKAWAY_FROM_JOB
    (tmp_path / "python.exe").write_bytes(b"")
    assert detach.interpreter("nt", str(tmp_path / "python.exe")) == str(tmp_path / "python.exe")
    (tmp_path / "pythonw.exe").write_bytes(b"")
    assert detach.interpreter("nt", str(tmp_path / "python.exe")) == str(tmp_path / "pythonw.exe")
    assert detach.runner_command("nt", str(tmp_path / "python.exe"))[1:] == ["-m", "app.cli", "queue", "run", "--wait"]


def test_a_job_that_forbids_breaking_away_starts_the_runner_inside_it():
    calls: list[int] = []

    def popen(argv, **kw):
        calls.append(kw["creationflags"])
        if kw["creationflags"] & detach.CREATE_BREAKAWAY_FROM_JOB:
            e = PermissionError("Access is denied")
            e.winerror = 5  # type: ignore[attr-defined]
            raise e
        return "started"

    assert detach.spawn(popen, os_name="nt") == "started"
    assert [bool(c & detach.CREATE_BREAKAWAY_FROM_JOB) for c in calls] == [True, False]
    assert "queue run --wait" in detach.runner_log().read_text(encoding="utf-8")


# ---- the close question and the status line -----------------------------------------------------
def test_the_close_question_says_what_goes_on_without_the_window(tiny_data):
    reg = Registry()
    store = QueueStore(reg.state)
    driver = QueueDriver(RunManager(reg), start_runner=False)
    assert driver.close_question([]) is None  # nothing trains, nothing waits: nothing to ask
    assert "пуста" in runner_line(store, None)
    for name in ("a", "b"):
        store.add(_config(tiny_data, name), "local")
    training = reg.create_run(_config(tiny_data, "X"))
    q = driver.close_question([training])
    assert q.text == "Обучение «X» идёт; в очереди ещё 2 — они начнутся без окна." and q.waiting == 2
    q = driver.close_question([])
    assert q is not None and "В очереди 2 прогона" in q.text and "без окна" in q.text
    assert "ternit queue run" in runner_line(store, None)
    store.set_paused(True)
    assert driver.close_question([]) is None  # paused: nothing starts without the window either
    assert "приостановлена" in runner_line(store, None)
    store.set_paused(False)
    for it in store.items():
        store.set_held(it.id, True)
    assert "отложены" in runner_line(store, None)
    note = lock.Note(pid=999, program="ternit queue run", since=time.time())
    assert runner_line(store, note).startswith("очередь ведёт процесс 999 (ternit queue run), с ")


# ---- the one retry policy -------------------------------------------------------------------------
def test_the_retry_policy_machine_loss_and_a_full_disk_keep_the_retry_its_own_failure_spends_it(tiny_data):
    reg = Registry()
    rec = reg.create_run(_config(tiny_data))
    booted = time.time() - 3600
    gone = reg.update(rec.id, status="failed", end_reason="vanished", pid=1, pid_started_at=booted + 60)
    vanished = Failure(kind="vanished", message="", advice="")
    assert retry.verdict(gone, vanished, watched=False, booted=booted) == retry.FREE  # found so at a start
    assert retry.verdict(gone, vanished, watched=True, booted=booted) == retry.SPEND  # died under a runner
    assert retry.verdict(gone, vanished, watched=True, booted=booted, free=1024) == retry.ROOM  # no room to say why
    before_boot = reg.update(rec.id, pid_started_at=booted - 60)
    assert retry.verdict(before_boot, vanished, watched=True, booted=booted) == retry.FREE  # the PC rebooted
    full = Failure(kind="other", advice="", message="could not write events.jsonl (OSError: [Errno 28] "
                   "No space left on device)")
    assert retry.verdict(reg.update(rec.id, end_reason="error"), full, watched=True) == retry.ROOM
    own = Failure(kind="oom", message="CUDA out of memory", advice="")
    assert retry.verdict(reg.get(rec.id), own, watched=False) == retry.SPEND
    kaggle = reg.update(reg.create_run({**_config(tiny_data, "k"), "target": {"kind": "kaggle"}}).id,
                        status="failed", end_reason="vanished")
    assert retry.verdict(kaggle, vanished, watched=False) == retry.SPEND  # a kernel's end is its own


def test_a_run_that_failed_for_room_needs_its_checkpoint_twice_and_says_how_much(tiny_data, tmp_path):
    reg = Registry()
    rec = reg.create_run(_config(tiny_data))
    assert retry.room_needed(rec) == retry.MARGIN_BYTES  # no checkpoint, no start event: the margin
    (rec.path / "events.jsonl").write_text('{"event": "start", "time": 1, "step": 0, "params": 1000}\n')
    assert retry.room_needed(rec) == 2 * 12 * 1000 + retry.MARGIN_BYTES
    free = retry.free_bytes(tmp_path)
    ok, line = retry.has_room(tmp_path, free * 4)
    assert not ok and line.startswith("диск заполнен: свободно ") and "нужно " in line
    assert retry.has_room(tmp_path, 1) == (True, "")
    assert retry.has_room(tmp_path, None) == (True, "")


# ---- autostart --------------------------------------------------------------------------------------
def test_autostart_on_linux_writes_the_xdg_file_finds_a_stale_one_and_off_removes_it(tmp_path, monkeypatch):
    assert not autostart.status("linux").installed
    status = autostart.on(where="linux")
    path = autostart.xdg_path()
    assert status.installed and status.kind == "xdg" and status.path == path and not status.stale
    assert path == Path(os.environ["XDG_CONFIG_HOME"]) / "autostart" / "ternit-lab-queue.desktop"
    assert path.stat().st_mode & 0o022 == 0  # not writable by others: it runs a program at logon
    keys = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    entry = autostart.current()
    assert autostart.desktop_argv(keys["Exec"]) == entry.argv() and keys["Path"] == entry.code
    assert entry.home == os.environ["TERNIT_HOME"] and entry.lang == "ru"
    # The lab moved: the entry points at a folder that is gone.
    monkeypatch.setenv("TERNIT_HOME", str(tmp_path / "moved"))
    assert "больше нет" not in autostart.status("linux").stale and "другую" in autostart.status("linux").stale
    import shutil

    shutil.rmtree(entry.data)
    assert "больше нет" in autostart.status("linux").stale
    assert not autostart.off("linux").installed and not path.exists()  # off works on a stale entry too


def test_desktop_exec_quoting_keeps_spaces_dollars_and_percents():
    args = ["/opt/my python/bin/python3", "-m", "app.queue.logon", "--data", '/home/u/$lab "x" 100%']
    line = " ".join(autostart.desktop_quote(a) for a in args)
    assert autostart.desktop_argv(line) == args


# The Task Scheduler schema's rules for what the lab's task uses (learn.microsoft.com,
# "Task Scheduler Schema"): the children each element may have (all-groups: any order;
# sequences: that order), and the simple types of the values.
_ALL = {
    "Task": {"RegistrationInfo", "Triggers", "Settings", "Data", "Principals", "Actions"},
    "RegistrationInfo": {"URI", "SecurityDescriptor", "Source", "Date", "Author", "Version", "Description",
                         "Documentation"},
    "Principal": {"UserId", "LogonType", "GroupId", "DisplayName", "RunLevel", "ProcessTokenSidType",
                  "RequiredPrivileges"},
    "Settings": {"AllowStartOnDemand", "RestartOnFailure", "MultipleInstancesPolicy", "DisallowStartIfOnBatteries",
                 "StopIfGoingOnBatteries", "AllowHardTerminate", "StartWhenAvailable", "NetworkProfileName",
                 "RunOnlyIfNetworkAvailable", "WakeToRun", "Enabled", "Hidden", "DeleteExpiredTaskAfter",
                 "IdleSettings", "NetworkSettings", "ExecutionTimeLimit", "Priority", "RunOnlyIfIdle",
                 "UseUnifiedSchedulingEngine", "DisallowStartOnRemoteAppSession"},
    "Exec": {"Command", "Arguments", "WorkingDirectory"},
}
_SEQUENCE = {"LogonTrigger": ["Enabled", "StartBoundary", "EndBoundary", "Repetition", "ExecutionTimeLimit",
                              "UserId", "Delay"], "Principals": ["Principal"]}
_BOOLEAN = {"Enabled", "DisallowStartIfOnBatteries", "StopIfGoingOnBatteries", "AllowHardTerminate",
            "StartWhenAvailable", "Hidden", "AllowStartOnDemand", "WakeToRun"}
_ENUM = {"LogonType": {"S4U", "Password", "InteractiveToken", "InteractiveTokenOrPassword"},
         "RunLevel": {"LeastPrivilege", "HighestAvailable"},
         "MultipleInstancesPolicy": {"Parallel", "Queue", "IgnoreNew", "StopExisting"}}
_DURATION = re.compile(r"^-?P(?=\d|T\d)(\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$")


def _check_against_the_schema(el: ET.Element, ns: str) -> None:
    name = el.tag.removeprefix("{" + ns + "}")
    kids = [k.tag.removeprefix("{" + ns + "}") for k in el]
    assert all(k.tag.startswith("{" + ns + "}") for k in el), el.tag  # qualified, in the task's namespace
    if name in _ALL:
        assert set(kids) <= _ALL[name] and len(kids) == len(set(kids)), (name, kids)
    elif name in _SEQUENCE:
        order = _SEQUENCE[name]
        assert set(kids) <= set(order) and kids == sorted(kids, key=order.index), (name, kids)
    text = (el.text or "").strip()
    if name in _BOOLEAN:
        assert text in ("true", "false", "1", "0"), (name, text)
    if name in _ENUM:
        assert text in _ENUM[name], (name, text)
    if name == "ExecutionTimeLimit":
        assert _DURATION.match(text), text
    if name == "Priority":
        assert 0 <= int(text) <= 10
    if name in ("Command", "WorkingDirectory"):
        assert 1 <= len(text) <= 260
    for k in el:
        _check_against_the_schema(k, ns)


def test_the_windows_task_is_valid_for_task_scheduler_and_carries_the_lab():
    entry = autostart.Entry("C:\\Users\\Ан На\\lab\\.venv\\Scripts\\pythonw.exe", "C:\\Users\\Ан На\\lab",
                            "C:\\Users\\Ан На\\lab home", "C:\\Users\\Ан На\\lab home\\data", "ru")
    text = autostart.task_xml(entry, "PC\\Анна")
    assert text.startswith('<?xml version="1.0" encoding="UTF-16"?>')
    root = ET.fromstring(text.replace('encoding="UTF-16"', ""))
    ns = autostart.TASK_NS
    assert root.tag == f"{{{ns}}}Task" and root.get("version") == "1.3"  # the schema fixes 1.3
    assert root.find(f"{{{ns}}}Actions") is not None
    _check_against_the_schema(root, ns)
    q = {"t": ns}
    assert root.findtext("t:Triggers/t:LogonTrigger/t:UserId", None, q) == "PC\\Анна"  # this user's logon only
    assert root.find("t:Actions", q).get("Context") == root.find("t:Principals/t:Principal", q).get("id")
    assert root.findtext("t:Settings/t:DisallowStartIfOnBatteries", None, q) == "false"
    assert root.findtext("t:Settings/t:StopIfGoingOnBatteries", None, q) == "false"
    assert root.findtext("t:Settings/t:ExecutionTimeLimit", None, q) == "PT0S"  # no 72-hour limit
    assert root.findtext("t:Principals/t:Principal/t:RunLevel", None, q) == "LeastPrivilege"
    argv, data = autostart._task_entry(text)
    assert argv == entry.argv() and data == entry.data
    # The Startup folder's fallback carries the same command.
    assert autostart._startup_entry(autostart.startup_text(entry)) == (entry.argv(), entry.data)


def test_a_run_stopped_by_a_full_disk_waits_for_room_at_its_place_and_keeps_its_retry(tiny_data):
    """The trainer's own words for a full disk in its `error` event (trainer/state/checkpoint.py):
    the runner puts the item back without spending its retry, and does not start it while the
    disk lacks what it needs — its line says how much is free and how much it needs."""
    import json

    from app.queue.runner import QueueRunner, needs_runner
    from app.queue.store import RUNNING, WAITING

    reg = Registry()
    store = QueueStore(reg.state)
    it = store.add(_config(tiny_data, "full"), "local")
    rec = reg.create_run(_config(tiny_data, "full"))
    assert store.claim(it.id, "local", rec.id)
    store.started(it.id)
    lines = [{"event": "start", "time": 1.0, "step": 0, "params": 10**13},  # a state no disk here holds twice
             {"event": "error", "time": 2.0, "step": 3, "kind": "other", "advice": "free disk space",
              "message": f"could not write checkpoint {rec.path}/checkpoints/step-00000003.pt: the disk holding it "
                         "is full (No space left on device): free disk space"}]
    rec.events_path.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    reg.ingest(rec.id)
    reg.update(rec.id, status="failed", end_reason="error")
    runner = QueueRunner(RunManager(reg), "test")
    runner.start()
    try:
        for _ in range(2):  # checked at each round: never started while there is no room
            runner.tick()
            item = store.item(it.id)
            assert (item.state, item.attempt, item.run_id) == (WAITING, 1, None), item
            assert item.room_bytes and item.room_bytes > retry.free_bytes(reg.runs_root)
            assert item.message.startswith("диск заполнен: свободно ") and "нужно" in item.message
        assert needs_runner(store)  # the runner stays to look again
        row = runner.planner.timeline().row(it.id)
        assert row.note == item.message and row.machine is None
    finally:
        runner.close()
    assert store.item(it.id).state != RUNNING


def test_the_monitor_says_who_keeps_the_pc_awake(tiny_data):
    import json

    from app.base import settings
    from app.runs.awake import awake_line

    reg = Registry()
    assert "ничего не обучается" in awake_line(reg)
    rec = reg.create_run(_config(tiny_data, "X"))
    reg.update(rec.id, status="running", pid=os.getpid())
    rec.events_path.write_text(json.dumps({"event": "awake", "time": 1, "step": 0, "held": True,
                                           "how": "systemd-inhibit", "why": ""}) + "\n", encoding="utf-8")
    assert awake_line(reg).startswith("ПК не уснёт: запрет сна держит «X» (systemd-inhibit)")
    rec.events_path.write_text(json.dumps({"event": "awake", "time": 1, "step": 0, "held": False, "how": "",
                                           "why": "Failed to connect to bus"}) + "\n", encoding="utf-8")
    assert "не получен («X»): Failed to connect to bus" in awake_line(reg)
    assert "очередь (SetThreadExecutionState)" in awake_line(reg, {"held": True, "how": "SetThreadExecutionState"})
    settings.save_keep_awake(False)
    assert "выключен в настройках" in awake_line(reg)


def test_the_macos_launch_agent_carries_the_lab():
    import plistlib

    entry = autostart.Entry("/Users/a/lab/.venv/bin/python", "/Users/a/lab", None, "/Users/a/Library/ternit-lab", "en")
    plist = plistlib.loads(autostart.plist_text(entry).encode())
    assert plist["ProgramArguments"] == entry.argv() and plist["RunAtLoad"] is True
    assert plist["Label"] == autostart.MAC_LABEL and plist["WorkingDirectory"] == entry.code


def test_with_no_runner_the_list_shows_each_items_true_state(tiny_data):
    """A runner gone (a reboot): an item whose run ended says so, one whose trainer is gone
    says it goes on when the queue runs — from the runs themselves, before any runner settles."""
    import subprocess
    import sys

    from app.queue.world import Planner

    reg = Registry()
    store = QueueStore(reg.state)
    ended, lost = store.add(_config(tiny_data, "ended"), "local"), store.add(_config(tiny_data, "lost"), "local")
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    for it, changes in ((ended, {"status": "finished", "ended_at": 123.0}),
                        (lost, {"status": "running", "pid": dead.pid, "pid_started_at": time.time() - 5})):
        rec = reg.create_run(_config(tiny_data, it.name))
        assert store.claim(it.id, "local", rec.id)
        store.started(it.id)
        reg.update(rec.id, **changes)
    tl = Planner(store, reg).timeline()
    assert tl.row(ended.id).label == "завершён" and tl.row(ended.id).end == 123.0
    assert tl.row(lost.id).label == "прерван — продолжится при запуске очереди"


def test_the_runners_log_is_rotated_as_the_labs_log_is():
    from app.base import logs

    path = detach.runner_log()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * logs.MAX_BYTES)
    detach.spawn(lambda argv, **kw: "started", os_name="posix")
    assert path.with_name(path.name + ".1").stat().st_size == logs.MAX_BYTES
    assert path.stat().st_size < 1000 and "queue run --wait" in path.read_text(encoding="utf-8")
