"""A local run's life as a user meets it, with the real trainer on the CPU: a continuation
killed before it saved a checkpoint of its own, and what the lab then says and offers."""

from __future__ import annotations

import json
import re

import pytest

from app.base import paths
from app.base import run_status as status
from app.runs import Registry, RunManager
from app.runs import process as proc
from app.runs.checkpoints import latest_checkpoint
from app.runs.files import new_run_id
from tests.test_runs_local import config, no_orphans, one_thread, wait_until  # noqa: F401 (fixtures)
from tests.trainer_run import kill_tree

pytestmark = pytest.mark.timeout(150)
CYRILLIC = re.compile("[А-Яа-яЁё]")


def _parent_stopped_at_step_8(tiny_data) -> RunManager:
    """The chain's first leg, stopped at step 8 as by its time limit, with that step's
    checkpoint: the trainer run on the lab's run.json in a run folder of the lab, forked
    (tests/forked.py: this is the test's setting, not the lab's start, which test_runs_local
    and test_run_cli_flags check), then the lab opened, which adopts the folder as the
    run its events say it is (Registry.adopt_folders)."""
    from tests.trainer_run import run_trainer

    folder = paths.runs_dir() / new_run_id("tiny", paths.runs_dir())
    (folder / "run.json").write_text(json.dumps(config(tiny_data, steps_to=100_000, eval_every=1000)),
                                     encoding="utf-8")
    done = run_trainer(folder, "--device", "cpu", "--stop-at-step", "8")
    assert done.returncode == 0 and "stopped by the time limit at step 8" in done.stdout + done.stderr, done.stderr
    return RunManager()


def test_a_continuation_killed_before_its_first_checkpoint_goes_on_from_the_chains_last(tiny_data, russian):
    m = _parent_stopped_at_step_8(tiny_data)
    (parent,) = m.registry.list_runs()
    assert parent.status == status.TIME_LIMIT and parent.last_step == 8, parent
    ckpt = latest_checkpoint(parent.path)
    assert ckpt is not None and ckpt.name == "step-00000008.pt"

    child = m.start_continue(parent.id, steps_to=100_000)
    wait_until(m, child.id, lambda r: (r.last_step or 0) >= 12)
    kill_tree(child.pid)  # as if the PC lost power mid-run
    proc.wait_exit(child.pid, 30)
    dead = wait_until(m, child.id, lambda r: r.status == status.FAILED)
    assert latest_checkpoint(dead.path) is None  # its own first checkpoint was 30 min away

    # What the window's banner shows: Russian, the parent's checkpoint offered, and not the
    # trainer's last echoed event posing as the last words of the log.
    f = m.failure(child.id)
    assert f.kind == "vanished" and f.checkpoint == str(ckpt)
    assert "Продолжите с последнего чекпоинта" in f.advice and "Чекпоинта нет" not in f.advice
    assert '{"event"' not in f.message
    assert not f.message or CYRILLIC.search(f.message), f.message
    row = next(r for r in m.history() if r.id == child.id)
    assert row.can_continue and not row.can_export  # the weights to export are the parent's
    assert row.message.startswith("Процесс обучения пропал") and '{"event"' not in row.message

    # «Продолжить» on the killed run: from the parent's checkpoint, as the chain's next leg.
    cfg = m.continue_config(child.id, steps_to=14)
    assert cfg["resume_from"] == str(ckpt.resolve())
    leg3 = m.start_continue(child.id, cfg)
    done = wait_until(m, leg3.id, lambda r: not r.active, timeout=90)
    assert (done.status, done.last_step, done.leg) == (status.FINISHED, 14, 3)
    assert m.series(leg3.id).run_ids == [parent.id, child.id, leg3.id]
    m.registry.close()

    # The lab restarted: the row's message is still in the interface language.
    again = RunManager(Registry())
    row = next(r for r in again.history(lang="en") if r.id == child.id)
    assert row.message.startswith("The trainer process disappeared")
    assert not CYRILLIC.search(row.message)


def test_a_torn_last_event_line_does_not_swallow_the_next_run_of_the_trainer(tiny_data, tmp_path):
    """Killed mid-write, a run's events.jsonl ends in half a line; the trainer started again
    in the same folder (`--resume latest`, or any start) must not glue its events onto it."""
    from app.runs import EventTail
    from tests.trainer_run import run_trainer, write_run

    run_dir = write_run(tmp_path / "torn", tiny_data, steps_to=3)
    (run_dir / "events.jsonl").write_text('{"event":"step","time":1.0,"step":7,"lo', encoding="utf-8")
    done = run_trainer(run_dir, "--dry-run")
    assert done.returncode == 0, done.stderr
    tail = EventTail(run_dir / "events.jsonl")
    events = tail.read()
    assert [e["event"] for e in events] == ["start"] and tail.bad_lines == 1
