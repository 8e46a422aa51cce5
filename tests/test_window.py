"""The window end to end, offscreen, with the real trainer process: start a tiny run from the
form, see its loss reach the plot, stop it, continue it in one click; plus the window's
promises (no torch in the window process, --snapshot, the language setting)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.base import run_status as st
from app.form.tooltips import wrap_tip
from app.runs import RunManager
from tests.trainer_run import end_left_trainers
from tests.ui_actions import choose

ROOT = Path(__file__).resolve().parent.parent
WAIT_MS = 90_000  # generous: the CI machine is small and shared


pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian


@pytest.fixture
def window(qtbot, tiny_data):
    from ui.window.main_window import MainWindow

    w = MainWindow(runs=RunManager(), poll_ms=100, extra_prepared=[str(tiny_data)])
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    w.ensure_ready()  # the plot is built just after the first show
    yield w
    end_left_trainers(w.runs)  # never leave a trainer behind
    w.close()


def type_into(qtbot, view, name: str, text: str) -> None:
    """Type as a user does: select what is there, type over it."""
    edit = view.inputs[name]
    edit.selectAll()
    qtbot.keyClicks(edit, text)


def tick_only(view, constellation: str) -> None:
    for name, box in view._constellation_boxes.items():
        if box.isChecked() != (name == constellation):
            box.click()


def fill_tiny(qtbot, view) -> None:
    type_into(qtbot, view, "name", "tiny")
    tick_only(view, "tiny")
    for name, text in (("context", "32"), ("width", "32"), ("heads", "2"), ("layers", "2"),
                       ("batch_per_card", "4"), ("steps_to", "100000"), ("limit_min", "3")):
        type_into(qtbot, view, name, text)
    choose(view, "gpu", "cpu")


def test_window_process_never_imports_torch(tmp_path):
    # The whole window, built and shown with its plot and GPU monitor, in a fresh process.
    code = ("import sys; from ui.window.main_window import MainWindow, app_instance; app = app_instance(); "
            "w = MainWindow(); w.show(); w.ensure_ready(); app.processEvents(); w.close(); "
            "print('torch' in sys.modules, 'ui.runs.loss_plot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "QT_QPA_PLATFORM": "offscreen", "TERNIT_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_snapshot_cli_writes_a_png_in_english_and_sets_a_damaged_state_file_aside(tmp_path):
    # One start of `ui.main --snapshot` proves both (each a fresh process of its own before):
    # the PNG at the asked size, and a damaged state file set aside while the window opens.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "state.sqlite").write_bytes(b"not a database " * 20)
    png = tmp_path / "shot.png"
    out = subprocess.run([sys.executable, "-m", "ui.main", "--snapshot", str(png), "--lang", "en", "--size", "1200x800"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TERNIT_HOME": str(tmp_path)})
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 800)
    assert list((tmp_path / "data").glob("state.damaged-*.sqlite"))


def test_form_in_the_window_validates_as_the_user_types(qtbot, window):
    view = window.form_view
    tick_only(view, "")
    assert not view.start_button.isEnabled()
    assert "созвездие" in view.why.text() and "созвездие" in view.messages["constellations"].text()
    tick_only(view, "tiny")
    assert view.start_button.isEnabled(), view.why.text()
    type_into(qtbot, view, "width", "500")
    assert not view.start_button.isEnabled()
    assert "не делится на число голов 8: подойдут 1, 2, 4, 5, 10" in view.messages["heads"].text()
    # The button's tooltip says the same, wrapped by the one tooltip rule (app.form.tooltips).
    assert "ширина 500" in view.why.text() and view.start_button.toolTip() == wrap_tip(view.why.text())
    type_into(qtbot, view, "width", "512")
    assert view.start_button.isEnabled() and not view.messages["heads"].isVisible()
    # Every field's widget carries its tooltip with the current default.
    for name, w in view.inputs.items():
        assert len(w.toolTip()) > 60, name
    assert "1024" in view.inputs["context"].toolTip().replace("\u00a0", "")
    assert "Сколько весов" in view.size_text()


def test_language_setting_switches_the_window_and_is_remembered(qtbot, window):
    from app.base import paths

    type_into(qtbot, window.form_view, "layers", "12")
    window.plot.apply_view_settings({"x": "tokens", "log": True, "recent": True, "raw": False})
    window.language_actions["en"].trigger()
    assert window.form_view.start_button.text() == "Start"
    # The plot's bar keeps the user's choices through the rebuild.
    assert window.plot.view_settings() == {"x": "tokens", "log": True, "recent": True, "raw": False}
    assert window.plot.x_axis.currentText() == "by tokens"
    assert window.form_view.labels["width"].text() == "Width d"
    assert window.form_view.form.values["layers"] == 12  # the form kept its values
    settings = json.loads((paths.config_dir() / "settings.json").read_text(encoding="utf-8"))
    assert settings["language"] == "en"
    # Help → About, rebuilt in the new language, names the log file (app.base.logs).
    from app.base import logs

    menus = [a.text() for a in window.menuBar().actions()]
    assert menus[-1] == "Help" and window.about_action.text() == "About"
    window.about_action.trigger()
    box = next(b for b in window.findChildren(QMessageBox) if b.windowTitle() == "About" and b.isVisible())
    assert str(logs.log_path()) in box.text()
    box.close()


def test_a_change_in_the_lab_reaches_every_view_without_a_handler_calling_it(qtbot, window, tiny_data):
    """The views subscribe to what Lab announces (app/window/events.py): a run followed,
    stopped or added outside the window's handlers (here: straight through `window.lab`, as
    a poll or the heat guard would) reaches the plot, the history and the banner."""
    from tests.fake_kaggle.fixtures import tiny_config

    registry = window.runs.registry
    cfg = tiny_config(tiny_data)
    cfg.update(name="seen", target={"kind": "local", "gpu": "cpu"})
    seen = registry.create_run(cfg)
    assert window.history.row_of(seen.id) < 0  # created behind the window's back
    window.lab.refresh()
    assert window.history.row_of(seen.id) >= 0

    window.lab.follow(seen.id)
    assert window.plot.title.text() == "Потери: seen"
    assert window.history.followed == seen.id and window.history.selected().id == seen.id
    assert window.banner.title.text() == "seen" and "создан" in window.banner.detail.text()

    window.lab.stop(seen.id)  # stopped before it started
    assert "остановлен" in window.banner.detail.text()
    assert next(r for r in window.history.rows if r.id == seen.id).status == st.STOPPED


def test_tiny_run_from_the_window_plot_stop_and_continue_in_one_click(qtbot, window, tiny_data, tmp_path):
    from ui.window.main_window import LIVE

    view = window.form_view
    fill_tiny(qtbot, view)
    assert view.start_button.isEnabled(), view.why.text()
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    run_id = window.followed
    assert run_id, window.statusBar().currentMessage()
    rec = window.runs.registry.get(run_id)
    assert rec.config()["model"] == {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300}

    # The loss reaches the plot: raw and smoothed train curves.
    trace = window.plot.traces[LIVE]
    qtbot.waitUntil(lambda: trace.points >= 3, timeout=WAIT_MS)
    assert len(trace.raw_curve.getData()[1]) >= 3 and len(trace.smooth_curve.getData()[1]) >= 3

    # Closing the window does not stop training; a new window re-attaches to the run.
    from app.runs import process as proc
    from ui.window.main_window import MainWindow

    window.close()  # it says the run goes on without it, and asks
    assert window.isVisible() and window.close_question.isVisible()
    assert "«tiny»" in window.close_question.text()
    qtbot.mouseClick(window.close_question.buttons_by_answer["keep"], Qt.MouseButton.LeftButton)
    assert not window.isVisible()
    assert proc.is_alive(rec.pid or window.runs.registry.get(run_id).pid)
    window = MainWindow(runs=RunManager(), poll_ms=100, extra_prepared=[str(tiny_data)])
    qtbot.addWidget(window)
    window.show()
    window.ensure_ready()
    assert window.followed == run_id
    view = window.form_view
    trace = window.plot.traces[LIVE]
    seen = trace.points
    qtbot.waitUntil(lambda: trace.points > max(seen, 3), timeout=WAIT_MS)

    # Stop: "saving…" until the trainer has saved and exited.
    qtbot.mouseClick(window.banner.stop_button, Qt.MouseButton.LeftButton)
    assert window.banner.stop_button.text() == "Сохранение…"
    qtbot.waitUntil(lambda: window.runs.registry.get(run_id).status == st.STOPPED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not window.banner.stop_button.isVisible(), timeout=WAIT_MS)
    parent = window.runs.registry.get(run_id)
    assert any(title.endswith("остановлен") for title, _ in window.notifications)

    # «Изменить и продолжить…» in the history: the form is filled from the checkpoint, model
    # locked, for a change of «Шагов до» (one click on «Продолжить»: test_window_rough_edges).
    window.refresh_history()
    window.history.select(run_id)
    assert window.history.buttons["continue_edit"].isEnabled()
    qtbot.mouseClick(window.history.buttons["continue_edit"], Qt.MouseButton.LeftButton)
    assert view.form.continuing is not None and view.form.continuing.run_id == run_id
    for name in ("context", "width", "heads", "layers"):
        assert view.inputs[name].isReadOnly() and "чекпоинта" in view.inputs[name].toolTip()
    assert view.model_locked_note.isVisible()
    assert view.start_button.isEnabled(), view.why.text()
    assert view.start_button.text() == "Продолжить"
    start_step = view.form.continuing.step
    assert start_step == parent.last_step
    type_into(qtbot, view, "steps_to", str(start_step + 10))
    qtbot.mouseClick(view.start_button, Qt.MouseButton.LeftButton)
    child_id = window.followed
    assert child_id != run_id
    child = window.runs.registry.get(child_id)
    assert child.parent_id == run_id and child.chain_id == parent.chain_id

    qtbot.waitUntil(lambda: window.runs.registry.get(child_id).status == st.FINISHED, timeout=WAIT_MS)
    trace = window.plot.traces[LIVE]
    qtbot.waitUntil(lambda: trace.series.steps and trace.series.steps[-1] == start_step + 10, timeout=10_000)
    # One curve through parent and child: steps run on from the checkpoint's step.
    assert trace.series.run_ids == [run_id, child_id]
    steps = trace.series.steps
    assert steps == sorted(steps) and steps[0] == 1
    assert any(title.endswith("завершён") for title, _ in window.notifications)
    # The run evaluates at «Шагов до»: the validation point and its 95% band are drawn.
    qtbot.waitUntil(lambda: trace.val_points() >= 1, timeout=10_000)
    assert trace._val_items, "the validation curve and its band are drawn"

    # The runs' measured speed now drives the estimate for this size on this CPU.
    qtbot.waitUntil(lambda: bool(view.form.ctx.measured), timeout=10_000)
    view.form.set("gpu", "cpu")
    assert view.form.estimate()["tokens_per_s_basis"]["kind"] == "measured"

    # The history shows both, and the finished child's row offers «Продолжить».
    rows = {r.id: r for r in window.history.rows}
    assert rows[child_id].status == st.FINISHED and rows[child_id].can_continue

    # Overlay the parent on the plot from its row's tick.
    r = next(i for i, row in enumerate(window.history.rows) if row.id == run_id)
    window.history.table.item(r, 0).setCheckState(Qt.CheckState.Checked)
    assert f"overlay:{run_id}" in window.plot.traces
    assert window.plot.traces[f"overlay:{run_id}"].points == parent.last_step

    # Export weights (a child process: the window never loads torch).
    out = tmp_path / "tiny.safetensors"
    proc = window.export_weights(child_id, str(out))
    with qtbot.waitSignal(proc.finished, timeout=WAIT_MS):
        pass
    assert out.is_file() and out.stat().st_size > 4 * 35_200, window.statusBar().currentMessage()
    assert "Веса сохранены" in window.statusBar().currentMessage()


def test_failed_run_shows_the_reason_and_which_file(qtbot, window, tiny_data, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_data, broken)
    (broken / "val.bin").write_bytes(b"\x01")  # not uint16 token ids
    assert window.add_prepared(str(broken)) is True
    cfg = window.form_view.form
    for name, value in (("context", 32), ("width", 32), ("heads", 2), ("layers", 2), ("batch_per_card", 4)):
        cfg.set(name, value)
    cfg.set("gpu", "cpu")
    run_cfg = cfg.run_config()
    run_cfg["data"]["dir"] = str(broken)
    # The lab's pre-check (the trainer's own data check) refuses it before a run exists.
    assert window.start_run(run_cfg) is None
    assert "val.bin" in window.statusBar().currentMessage() and window.runs.registry.list_runs() == []
    # Data broken after the start: the trainer's error event, as it writes it, in the banner.
    import time

    rec = window.runs.registry.create_run(run_cfg)
    message = f"{broken / 'val.bin'} is empty or not uint16 token ids: prepare the data again"
    events = [{"event": "error", "time": time.time(), "step": 0, "kind": "data", "message": message,
               "advice": "fix run.json or the data as the message says", "checkpoint": None},
              {"event": "end", "time": time.time(), "step": 0, "reason": "error", "state_sha256": None,
               "message": message}]
    rec.events_path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    window.runs.registry.ingest(rec.id)
    window.follow(rec.id)
    qtbot.waitUntil(lambda: window.banner.failure.isVisible(), timeout=WAIT_MS)
    text = window.banner.failure.text()
    assert "val.bin" in text and "Подготовьте данные заново" in text


# The out-of-memory banner's retry in one click: test_window_lifecycle, whose run then serves
# a data folder and a run folder deleted by hand.


def test_prepare_data_button_prepares_the_ticked_constellation(qtbot, window):
    """The demo constellation (Python's own docs) needs no download: «Подготовить данные»
    runs `ternit data prepare` in a child process, then Start is enabled."""
    view = window.form_view
    tick_only(view, "demo")
    type_into(qtbot, view, "context", "64")
    assert view.prepare_button.isVisible() and not view.start_button.isEnabled()
    assert "не подготовлены" in view.why.text()
    with qtbot.waitSignal(window.data_prepared, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(view.prepare_button, Qt.MouseButton.LeftButton)
    assert blocker.args[0] == 0, window.statusBar().currentMessage()
    prep = view.form.prepared_for_selection()
    assert prep is not None and prep.constellations == ("demo",)
    assert view.start_button.isEnabled(), view.why.text()
    assert not view.prepare_button.isVisible()
    # The library now knows the constellation's token count, and the form shows it.
    label = view._constellation_boxes["demo"].text()
    assert "токенов" in label and "не посчитаны" not in label, label


def test_the_first_status_line_says_what_became_of_a_damaged_state_file(qtbot, tmp_path, russian):
    from app.base import paths
    from ui.window.main_window import MainWindow

    paths.state_db_path().parent.mkdir(parents=True, exist_ok=True)
    paths.state_db_path().write_bytes(b"not a database " * 20)
    w = MainWindow(runs=RunManager())
    qtbot.addWidget(w)
    message = w.statusBar().currentMessage()
    assert "повреждён" in message and "отложен" in message, message
    w.close()


def test_a_kaggle_start_runs_off_the_ui_thread_and_reports_its_failure(qtbot, window, tiny_data):
    """No Kaggle account here: the start fails in its thread, the window says why and no run
    is left behind (nothing runs on Kaggle); the window kept answering meanwhile."""
    form = window.form_view.form
    for name, value in (("context", 32), ("width", 32), ("heads", 2), ("layers", 2), ("batch_per_card", 4)):
        form.set(name, value)
    form.values["constellations"] = ["tiny"]
    cfg = form.run_config()
    cfg["target"] = {"kind": "kaggle", "gpu": "auto", "account": "auto"}
    with qtbot.waitSignal(window.launch_done, timeout=WAIT_MS) as done:
        rec = window.start_run(cfg)
        assert rec is not None and window.followed == rec.id
    run_id, error = done.args
    assert run_id == rec.id and error
    assert "не запустился" in window.statusBar().currentMessage()
    assert window.runs.registry.list_runs() == [] and window.followed != rec.id
