"""A Windows user's first runs, end to end through `ternit` (issue 22's proof): Russian text
files with Cyrillic names added and prepared; a run named «проба ₽ é ×» with samples trained
to its end; its trainer.log and the history in Cyrillic; a second run stopped by STOP with a
checkpoint and continued bit for bit to the first one's state; `ternit sample`; the window's
--snapshot with that history.

Every command is a real process whose output is a pipe, as `ternit … > file` has it: on
Windows (the Wine kit in .ci/run: cp1251 and cp1252) in the session's ANSI code page, on
Linux in the strict code page PYTHONIOENCODING gives (tests/windows_env.py). The trainers
are the lab's own children, started as the lab starts them.

What Wine cannot show (the kit's README): a card (torch is the CPU build, as a plain Windows
install is), and console events (tests/test_windows_stop.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.base import paths
from app.data.textgen import documents
from app.runs import Registry
from tests.windows_env import CODE_PAGES, ROOT, code_page_env, ternit

pytestmark = [pytest.mark.windows, pytest.mark.timeout(1800)]

NAME = "проба ₽ é ×"
PROMPT = "кот ₽ é × 🙂"  # short: the tiny model keeps a prompt's last (context − tokens) tokens
STEPS = 12
# On Linux one strict code page is enough here (test_windows_streams.py has both); on Windows
# the session's own.
E2E_CODE_PAGES = CODE_PAGES[:1]


def run_json(path: Path) -> Path:
    path.write_text(json.dumps({
        "name": NAME,
        "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
        "training": {"batch_per_card": 4, "steps_to": STEPS, "eval_every": 6, "eval_segments": 2,
                     "warmup_steps": 2, "limit_min": 30, "sample_every": 6, "sample_tokens": 4,
                     "sample_prompts": [PROMPT]},
        "data": {"constellations": ["русские"]},
        "target": {"kind": "local", "gpu": "cpu"},
    }, ensure_ascii=False), encoding="utf-8")
    return path


def newest_run() -> str:
    """The newest run's id, read from the history in this process (fewer processes under Wine)."""
    reg = Registry()
    try:
        return reg.list_runs()[0].id
    finally:
        reg.close()


def events(run_dir: Path, kind: str) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, filter(None, lines)) if e["event"] == kind]


def wait_for(predicate, what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.parametrize("code_page", E2E_CODE_PAGES)
def test_russian_files_a_cyrillic_run_stop_continue_sample_and_the_window(code_page, tmp_path):
    src = tmp_path / "тексты ₽"
    src.mkdir()
    (src / "сказка первая.txt").write_text("\n\n".join(documents(160, seed=1, lang="ru")), encoding="utf-8")
    (src / "песня — вторая.txt").write_bytes("\n\n".join(documents(120, seed=2, lang="ru")).encode("cp1251"))
    added = ternit("data", "add", str(src), "--name", "сказки", "--constellation", "русские", code_page=code_page)
    assert added.returncode == 0, added.stderr
    prepared = ternit("data", "prepare", "--constellations", "русские", "--vocab", "300", "--context", "32",
                      code_page=code_page)
    assert prepared.returncode == 0, prepared.stderr

    # A run trained to its end, samples on; its log and the history in Cyrillic.
    config = run_json(tmp_path / "проба.json")
    first = ternit("run", "start", "--config", str(config), "--wait", code_page=code_page)
    assert first.returncode == 0, first.stdout + first.stderr
    listed = ternit("run", "list", "--json", code_page=code_page)  # the history, through a pipe
    assert listed.returncode == 0, listed.stderr
    a = json.loads(listed.stdout)[0]
    a_dir = paths.runs_dir() / a["id"]
    log = (a_dir / "trainer.log").read_bytes().decode("utf-8")  # one encoding, UTF-8
    assert NAME in log and PROMPT in log and f"end: reached step {STEPS}" in log
    assert [s["prompt"] for s in events(a_dir, "sample")] == [PROMPT, PROMPT]
    assert a["name"] == NAME and Path(a["folder"]) == a_dir
    listed = ternit("run", "list", code_page=code_page)  # its table: the id is the name made folder-safe
    assert listed.returncode == 0 and a["id"] in listed.stdout and "-проба-é" in a["id"], listed.stderr
    want = events(a_dir, "end")[-1]["state_sha256"]

    # The same run again, stopped by STOP with a checkpoint (held by PAUSE first, so that it
    # is surely stopped before its end), then continued to the first run's state, bit for bit.
    second = ternit("run", "start", "--config", str(config), code_page=code_page)
    assert second.returncode == 0, second.stderr
    b = {"id": newest_run()}
    b_dir = paths.runs_dir() / b["id"]
    assert b["id"] != a["id"]
    (b_dir / "PAUSE").touch()
    wait_for(lambda: "paused:" in (b_dir / "trainer.log").read_text(encoding="utf-8", errors="replace"),
             "the second run to pause")
    stopped = ternit("run", "stop", b["id"], "--wait", code_page=code_page)
    assert stopped.returncode == 0, stopped.stderr
    end = events(b_dir, "end")[-1]
    assert end["reason"] == "stopped" and 1 <= end["step"] < STEPS
    assert (b_dir / "checkpoints" / f"step-{end['step']:08d}.pt").is_file()
    (b_dir / "PAUSE").unlink()
    resumed = ternit("run", "continue", b["id"], "--wait", code_page=code_page)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    c_dir = paths.runs_dir() / newest_run()
    assert events(c_dir, "end")[-1]["state_sha256"] == want

    # Text from the first run's checkpoint, and the window with this history.
    sample = ternit("sample", a["id"], "--prompt", PROMPT, "--tokens", "8", "--seed", "1", code_page=code_page)
    assert sample.returncode == 0 and sample.stdout.strip(), sample.stderr
    picture = tmp_path / "окно.png"
    shot = subprocess.run([sys.executable, "-m", "ui.main", "--snapshot", str(picture), "--lang", "ru"],
                          env=code_page_env(code_page), cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=600)
    assert shot.returncode == 0, shot.stderr.decode("utf-8", "replace")
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_nothing_is_written_under_the_users_real_lab_folders():
    """The whole session ran with TERNIT_HOME (conftest): the real folders stay untouched.
    .ci/run checks the same of the Wine prefix's %LOCALAPPDATA% after the Windows set."""
    import platformdirs

    assert os.environ.get("TERNIT_HOME")
    real = Path(platformdirs.user_data_dir(paths.APP_NAME, appauthor=False))
    assert not paths.data_dir().resolve().is_relative_to(real.resolve())
