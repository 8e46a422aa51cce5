"""A search's study on Windows (the Windows set: under the Wine kit, and with the rest on
Linux): Optuna's journal file written by two processes at once through the lab's lock
(`JournalFileOpenLock`, an O_EXCL lock file released by a rename; Windows has no symlink lock
without a privilege), and a lock file left by a killed writer broken after its grace period.
What the kit cannot show: NTFS on a real disk and an antivirus holding the lock file open."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.search import study as studies

pytestmark = pytest.mark.windows
ROOT = Path(__file__).resolve().parent.parent
TRIALS = 12  # each writer's: enough for their appends to meet on the lock

WRITER = f"""
import sys
from pathlib import Path
from app.search import study as studies
study, _ = studies.load_study(Path(sys.argv[1]), "s", seed=int(sys.argv[2]))
for _ in range({TRIALS}):
    trial = study.ask()
    trial.report(1.0, step=10)
    study.tell(trial, float(trial.number))
print("done", flush=True)
"""


def test_two_writers_share_the_journal_through_its_lock(tmp_path):
    path = tmp_path / "searches" / "1-s.journal"
    studies.create_study(path, "s")
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(seed)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for seed in (1, 2)]
    for w in writers:
        out, err = w.communicate(timeout=240)
        assert w.returncode == 0 and "done" in out, err[-2000:]
    trials = studies.load_study(path, "s")[0].trials
    assert sorted(tr.number for tr in trials) == list(range(2 * TRIALS))
    assert all(tr.state.name == "COMPLETE" and tr.value == tr.number for tr in trials)
    assert not Path(str(path) + ".lock").exists()  # released: the next writer does not wait


def test_a_lock_left_by_a_killed_writer_is_broken_after_its_grace(tmp_path, monkeypatch):
    monkeypatch.setattr(studies, "GRACE_S", 3)  # the lab's 30 s, shortened for the test
    path = tmp_path / "s.journal"
    studies.create_study(path, "s")
    Path(str(path) + ".lock").write_bytes(b"")  # a writer killed while it held the lock
    started = time.monotonic()
    study, _ = studies.load_study(path, "s")
    study.tell(study.ask(), 1.0)
    assert time.monotonic() - started >= 3  # it waited for the grace, then broke the lock
    assert [tr.state.name for tr in studies.load_study(path, "s")[0].trials] == ["COMPLETE"]
