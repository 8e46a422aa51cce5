"""The window's child command reader (ui/base/cli_task.py) on a real child process: a burst of
progress lines read at once still shows each phase in turn, and a Cyrillic letter cut between
two writes reaches the note whole."""

from __future__ import annotations

import sys
import textwrap

from ui.base.cli_task import CliTask, TaskBar

WAIT_MS = 60_000

# Writes every progress line in one write, then a message whose «ы» is split across two
# flushed writes (its two UTF-8 bytes apart), then exits.
CHILD = textwrap.dedent("""
    import json, sys, time
    lines = [json.dumps({"progress": phase, "done": done, "total": 10, "unit": "", "message": ""})
             for phase, done in (("scan", 10), ("tokenizer", 5), ("tokenize", 3), ("tokenize", 10))]
    out = sys.stderr.buffer
    out.write(("\\n".join(lines) + "\\n").encode())
    out.flush()
    word = "готовы\\n".encode("utf-8")
    out.write(word[:-2]); out.flush(); time.sleep(0.3)
    out.write(word[-2:]); out.flush()
""")


def test_a_burst_of_progress_lines_shows_each_phase_and_split_letters_arrive_whole(qtbot, russian):
    bar = TaskBar()
    qtbot.addWidget(bar)
    task = CliTask(["-c", CHILD])
    seen: list[str] = []
    bar.follow(task, "…", "")
    task.progressed.connect(lambda: seen.append(bar.progress.text()))
    with qtbot.waitSignal(task.ended, timeout=WAIT_MS) as ended:
        task.start()
    assert ended.args == [0], task.output.messages
    names = [x.split(":")[0] for x in seen]
    assert names == ["Чтение файлов", "Обучение токенизатора", "Токенизация", "Токенизация"], seen
    assert task.output.messages == ["готовы"], task.output.messages
    assert sys.executable == task.proc.program()
