"""The «Текст» tab: a chain's samples from real trainer runs (newest first, one list), the
playground streaming from a real checkpoint with «Стоп» leaving no process, evaluation on a
file; and the decisions behind it (app.text.training_samples, app.text.playground) headless."""

from __future__ import annotations

import json

import psutil
import pytest

from app.base import run_status as st
from app.base.numbers import int_text
from app.kaggle.follow import RunSink
from app.runs import RunManager
from app.text import playground as play
from app.text import training_samples as view
from app.window.colors import colors
from tests.test_runs_local import config, no_orphans, one_thread, wait_until  # noqa: F401 (fixtures)

WAIT_MS = 90_000
pytestmark = [pytest.mark.usefixtures("russian"), pytest.mark.timeout(240)]


def ev(kind: str, step: int, **fields) -> dict:
    return {"event": kind, "step": step, **fields}


def sample_ev(step: int, index: int, text: str = "x") -> dict:
    return ev("sample", step, index=index, prompt=f"p{index}", text=text, tokens=3, tokens_per_s=50.0)


# ---- headless ------------------------------------------------------------------------


def test_fold_newest_first_drops_redone_steps_and_keeps_the_chain():
    parent = [ev("start", 0), sample_ev(10, 0), sample_ev(10, 1), sample_ev(20, 0, "old"), sample_ev(30, 0)]
    # the child resumed from the parent's checkpoint at step 20: the parent's 30 was redone
    child = [ev("start", 20), sample_ev(30, 1), sample_ev(30, 0, "new"), {"event": "sample", "step": "bad"}]
    got = view.fold([("a", parent), ("b", child)])
    assert [(s.step, s.index, s.run_id) for s in got] == [(30, 0, "b"), (30, 1, "b"), (20, 0, "a"), (10, 0, "a"), (10, 1, "a")]
    assert got[0].text == "new"
    # a run resumed in place after step 20 wrote its sample of 20 again: the later one counts
    again = view.fold([("a", [sample_ev(20, 0, "first"), ev("start", 10), sample_ev(20, 0, "second")])])
    assert [s.text for s in again] == ["second"]


def test_feed_reads_only_new_sample_lines_and_a_kaggle_sink_feeds_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    feed = view.SampleFeed([("k", run / "events.jsonl")])
    assert not feed.poll() and feed.samples == []
    # A Kaggle kernel's echoed lines reach events.jsonl through app.kaggle.follow's sink.
    sink = RunSink(run)
    sink.write([json.dumps(ev("step", 1, loss=5.0)), "plain log line", json.dumps(sample_ev(10, 0, "кот"))])
    sink.sync()
    assert feed.poll() and [(s.step, s.text) for s in feed.samples] == [(10, "кот")]
    assert not feed.poll()
    sink.write([json.dumps(sample_ev(20, 0))])
    sink.sync()
    assert feed.poll() and [s.step for s in feed.samples] == [20, 10]


def test_html_tells_prompt_from_text_and_escapes():
    samples = [view.Sample("b", 30, 0, "<кот>", " & мяч\nдва"), view.Sample("a", 20, 0, "p", "t")]
    html = view.samples_html(samples, {"a": "родитель", "b": "продолжение"})
    assert html.index("Шаг 30") < html.index("Шаг 20")
    prompt = view.prompt_style(colors(False))
    assert f'<span style="{prompt}">&lt;кот&gt;</span> &amp; мяч\nдва' in html
    assert "продолжение" in html and "родитель" in html  # a chain says which run each step is
    assert "родитель" not in view.samples_html(samples[1:], {"a": "родитель"})


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_tooltips_are_short_lines(lang):
    from app.base.i18n import set_language

    set_language(lang)
    try:
        for tip in (play.temperature_tip(), play.top_k_tip(), play.tokens_tip()):
            lines = tip.splitlines()
            assert len(lines) <= 12 and max(len(x) for x in lines) <= 60, tip
        assert ("Температура" if lang == "ru" else "Temperature") in play.temperature_tip()
    finally:
        set_language("ru")


def test_session_reads_split_lines_and_says_device_speed_and_failures():
    s = play.Session("sample", seed=5)
    chunk = (json.dumps({"kind": "start", "device": "cpu", "step": 1200, "dropped": 0}) + "\n"
             + json.dumps({"kind": "text", "text": "ко"}, ensure_ascii=False) + "\n").encode()
    assert s.feed(chunk[:17]) is False and s.feed(chunk[17:])
    assert s.text == "ко" and "процессор" in s.status and int_text(1200) in s.status and "зерно 5" in s.status
    s.feed(b"not json\n" + json.dumps({"kind": "done", "text": "кот", "tokens": 2, "tokens_per_s": 80.4,
                                         "stopped": "eot"}).encode() + b"\n")
    assert s.text == "кот" and "80 ток/с" in s.status and "конца документа" in s.status
    s.finish(0, "")
    assert not s.error
    crashed = play.Session("sample")
    crashed.finish(-9, "Traceback\nMemoryError\n")
    assert "код -9" in crashed.error and "MemoryError" in crashed.error
    stopped = play.Session("eval")
    stopped.cancel()
    stopped.finish(-9, "")
    assert stopped.status.startswith("Остановлено") and not stopped.error


def test_refused_numbers_and_no_checkpoint_say_what_to_do(tmp_path):
    target = play.Target(tmp_path / "x.pt", None)
    with pytest.raises(play.GenerationError, match="температура"):
        play.sample_command(target, play.Request("", temperature=11))
    argv, stdin, seed = play.sample_command(target, play.Request("кот", tokens=5, seed=3))
    assert stdin == "кот" and seed == 3 and argv[argv.index("--tokens") + 1] == "5"

    class Rec:
        id, folder = "r1", str(tmp_path)

    with pytest.raises(play.GenerationError, match="ещё нет чекпоинта"):
        play.chain_target([Rec()])
    with pytest.raises(play.GenerationError, match="нет файла"):
        play.eval_command(target, tmp_path / "missing.txt")


# ---- in the window, with the real trainer ------------------------------------------------


def gone(pid: int) -> bool:
    """The process ended (a zombie counts: it has ended, only not been reaped)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def window(qtbot, tiny_data):
    from ui.window.main_window import MainWindow

    w = MainWindow(runs=RunManager(), poll_ms=100, extra_prepared=[str(tiny_data)])
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    w.ensure_ready()
    w.tabs.setCurrentWidget(w.text_tab)
    w.text_tab.timer.setInterval(100)
    yield w
    w.text_tab.stop()
    w.close()


def test_tab_shows_a_chains_samples_live_writes_stops_and_evaluates(qtbot, window, tiny_data, tmp_path):
    m, tab = window.runs, window.text_tab
    assert window.tabs.tabText(window.tabs.indexOf(tab)) == "Текст"
    assert "Выберите прогон" in tab.samples_note.text()
    parent = m.start(config(tiny_data, steps_to=20, eval_every=10, sample_tokens=8))
    window.refresh_history()
    window.follow(parent.id)  # selects it in the history: the tab follows the selection
    qtbot.waitUntil(lambda: any(s.step == 20 for s in tab.feed.samples), timeout=WAIT_MS)
    wait_until(m, parent.id, lambda r: r.status == st.FINISHED)

    child = m.start_continue(parent.id, steps_to=30)
    window.refresh_history()
    window.follow(child.id)
    assert tab.feed.run_id == child.id and [r for r, _ in tab.feed.chain] == [parent.id, child.id]
    qtbot.waitUntil(lambda: any(s.step == 30 for s in tab.feed.samples), timeout=WAIT_MS)
    wait_until(m, child.id, lambda r: r.status == st.FINISHED)
    samples = tab.feed.samples
    assert [s.step for s in samples] == [30] * 3 + [20] * 3 + [10] * 3  # newest first, one list
    assert {s.run_id for s in samples if s.step == 30} == {child.id}
    assert {s.run_id for s in samples if s.step < 30} == {parent.id}
    shown = tab.samples_view.toPlainText()
    assert shown.index("Шаг 30") < shown.index("Шаг 20") < shown.index("Шаг 10")
    assert samples[0].prompt in shown and "сверху новые" in tab.samples_note.text()

    # «Написать»: the continuation streams from the chain's latest checkpoint (the child's).
    tab.prompt.setPlainText("the cat")
    tab.tokens.setValue(12)
    qtbot.mouseClick(tab.write_button, qtbot_left())
    assert tab.busy and not tab.write_button.isEnabled() and tab.stop_button.isEnabled()
    qtbot.waitUntil(lambda: not tab.busy, timeout=WAIT_MS)
    session = tab.child.session
    assert not session.error, session.status
    assert "процессор" in tab.status.text() and "шага 30" in tab.status.text() and "готово" in tab.status.text()
    # (30 steps of training write bytes that need not make UTF-8: test_generate checks the text)
    assert tab.output.toPlainText() == "the cat" + session.text
    # A new seed each click: the first token drawn may end the document, and then nothing is
    # added (seen once in a full suite run), which the status says.
    assert session.text or "дописан до конца документа" in tab.status.text(), tab.status.text()

    # «Стоп» at once (the child still loading the model), then mid-stream: no process left.
    tab.tokens.setValue(2000)
    qtbot.mouseClick(tab.write_button, qtbot_left())
    pid = tab.child.pid()
    assert pid > 0 and tab.busy
    qtbot.mouseClick(tab.stop_button, qtbot_left())
    assert not tab.busy and gone(pid) and tab.status.text().startswith("Остановлено")
    assert tab.write_button.isEnabled() and not tab.stop_button.isEnabled()
    qtbot.mouseClick(tab.write_button, qtbot_left())
    pid = tab.child.pid()
    qtbot.waitUntil(lambda: bool(tab.child.session.text) or not tab.busy, timeout=WAIT_MS)
    tab.stop()
    assert not tab.busy and gone(pid)
    # The window rebuilt in another language mid-generation (issue 27: the prompt and the
    # text were cleared): the generation goes on in the new tab, the prompt and the settings
    # kept, the tab still in front.
    tab.prompt.setPlainText("the dog")
    tab.tokens.setValue(40)
    tab.temperature.setValue(1.2)
    qtbot.mouseClick(tab.write_button, qtbot_left())
    pid = tab.child.pid()
    window.set_language("en")
    tab = window.text_tab
    assert window.tabs.tabText(window.tabs.indexOf(tab)) == "Text" and window.tabs.currentWidget() is tab
    assert tab.busy and tab.child.pid() == pid and not gone(pid)
    assert (tab.prompt.toPlainText(), tab.tokens.value(), tab.temperature.value()) == ("the dog", 40, 1.2)
    qtbot.waitUntil(lambda: not tab.busy, timeout=WAIT_MS)
    written = tab.child.session.text
    assert not tab.child.session.error and tab.output.toPlainText() == "the dog" + written
    window.set_language("ru")
    tab = window.text_tab
    assert tab.output.toPlainText() == "the dog" + written and tab.prompt.toPlainText() == "the dog"
    assert tab.feed.run_id == child.id  # still the selected run

    # Evaluation on the user's text file: bits per byte with its interval.
    text = tmp_path / "mine.txt"
    text.write_text("the cat sees the ball. the dog runs to the park.\n" * 40, encoding="utf-8")
    tab.evaluate(text)
    qtbot.waitUntil(lambda: not tab.busy, timeout=WAIT_MS)
    result = tab.eval_result.text()
    assert "бит на байт" in result and "95 %" in result and "перплексия" in result, tab.status.text()


def qtbot_left():
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton


def test_feed_reads_a_long_file_in_chunks_and_a_replaced_one_anew(tmp_path, monkeypatch):
    monkeypatch.setattr(view, "CHUNK", 256)
    path = tmp_path / "events.jsonl"
    steps = [json.dumps(ev("step", i, loss=1.0)) for i in range(1, 60)]
    path.write_text("\n".join(steps + [json.dumps(sample_ev(50, 0, "a")), json.dumps(sample_ev(59, 0, "b"))]) + "\n")
    feed = view.SampleFeed([("r", path)])
    assert feed.poll() and [s.step for s in feed.samples] == [59, 50]
    path.write_text(json.dumps(sample_ev(5, 0)) + "\n")  # a new, shorter file in its place
    assert feed.poll() and [s.step for s in feed.samples] == [5]
