"""UTF-8 between the lab's processes (issue 22, item 2), on the ANSI code pages of Windows.

A redirected stream on Windows is the ANSI code page with strict errors: `ternit` in Russian
died as soon as its output was a pipe, the trainer died at its start event on a Cyrillic run
name (cp1252) or mid-training on a sample with ₽ (cp1251), and said «free disk space». On
Linux the same code page comes from PYTHONIOENCODING (tests/windows_env.py); under Wine it is
the session's real one (.ci/run runs this file on cp1251 and cp1252).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from tests import trainer_run as tr
from tests.windows_env import CODE_PAGES, ROOT, code_page_env, ternit

pytestmark = pytest.mark.windows

NAME = "проба ₽ é ×"
# A sample prompt with what cp1251 lacks (₽ é ×, an emoji, U+FFFD) and cp1252 lacks (Cyrillic).
PROMPT = "кот ₽ é × ≈ 🙂 \ufffd"  # short: a tiny model keeps a prompt's last (context − tokens) tokens


@pytest.mark.parametrize("code_page", CODE_PAGES)
def test_ternit_in_russian_writes_utf8_into_a_pipe(code_page, tmp_path):
    src = tmp_path / "сказки ₽"
    src.mkdir()
    (src / "сказка первая.txt").write_text("Жили-были кот и лиса. " * 40, encoding="utf-8")
    done = ternit("--help", code_page=code_page, TERNIT_LANG="ru")
    assert done.returncode == 0 and "команды:" in done.stdout, done.stderr
    done = ternit("data", "add", str(src), "--name", "сказки ₽", "--constellation", "русские",
                  code_page=code_page, TERNIT_LANG="ru")
    assert done.returncode == 0, done.stderr
    listed = ternit("data", "list", code_page=code_page, TERNIT_LANG="ru")
    assert listed.returncode == 0 and "сказки ₽" in listed.stdout, listed.stderr


@pytest.mark.parametrize("code_page", CODE_PAGES)
def test_a_trainer_started_by_hand_and_redirected_writes_its_log_in_utf8(code_page, tiny_data, tmp_path):
    """`python -m trainer --run DIR > trainer.log` from a shell on that code page: a Cyrillic
    name at the start event, samples with ₽, é, × and an emoji on every evaluation."""
    run = tr.write_run(tmp_path / "run", tiny_data, steps_to=4, eval_every=2, eval_segments=2,
                       sample_every=2, sample_tokens=4, sample_prompts=[PROMPT])
    cfg = json.loads((run / "run.json").read_text(encoding="utf-8"))
    (run / "run.json").write_text(json.dumps({**cfg, "name": NAME}, ensure_ascii=False), encoding="utf-8")
    with open(tmp_path / "trainer.log", "wb") as log:
        done = subprocess.run([sys.executable, "-m", "trainer", "--run", str(run), "--device", "cpu"],
                              env=code_page_env(code_page), cwd=ROOT, stdin=subprocess.DEVNULL,
                              stdout=log, stderr=subprocess.STDOUT, timeout=600)
    text = (tmp_path / "trainer.log").read_bytes().decode("utf-8")  # one encoding, UTF-8
    assert done.returncode == 0, text[-2000:]
    assert NAME in text and PROMPT in text and "free disk space" not in text
    samples = tr.events(run, "sample")
    assert samples and all(s["prompt"] == PROMPT for s in samples)


def test_an_event_echo_into_a_stream_that_lacks_a_character_escapes_it():
    """A terminal in a legacy code page (left alone by utf8_stdio, as a console is): the
    character is escaped, never an OutputError with «free disk space» advice."""
    from trainer.run import events

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="cp1252", errors="strict", write_through=True)
    old, sys.stdout = sys.stdout, stream
    try:
        events.EventLog(None, echo=True).emit("start", 0, name=NAME)
    finally:
        sys.stdout = old
    assert not events._failed
    line = raw.getvalue().decode("cp1252")
    assert '"name":"\\u043f\\u0440\\u043e\\u0431\\u0430 \\u20bd é ×"' in line


def test_utf8_stdio_reconfigures_a_redirected_ansi_stream_and_leaves_utf8_alone(monkeypatch):
    from trainer.base.streams import utf8_stdio

    pipe = io.TextIOWrapper(io.BytesIO(), encoding="cp1251")
    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", pipe)
    monkeypatch.setattr(sys, "stderr", utf8)
    utf8_stdio()
    assert (sys.stdout.encoding, sys.stderr.encoding) == ("utf-8", "utf-8")
    monkeypatch.setattr(sys, "stdout", None)  # pythonw: no stream at all
    utf8_stdio()


def test_every_child_the_lab_starts_gets_utf8_streams(monkeypatch):
    """The trainer, its checks, samplers, exports (child_env) and the window's data commands
    (cli_env): PYTHONIOENCODING/PYTHONUTF8 set, whatever the lab's own environment says."""
    from app.base.children import child_env
    from app.data import manage

    monkeypatch.setenv("PYTHONIOENCODING", "cp1251")
    for env in (child_env(), child_env({"CUDA_VISIBLE_DEVICES": ""}), manage.cli_env()):
        assert (env["PYTHONIOENCODING"], env["PYTHONUTF8"]) == ("utf-8", "1")
    assert os.environ["PYTHONIOENCODING"] == "cp1251"  # the lab's own is left as it was
