"""The window as a daily tool: it comes back as it was left (size, place, maximized, the
splitters, the bottom tab, the history's columns and order, the data window), also from a
screen that is gone and through a language switch; a bad settings.json costs nothing but
the defaults; the usual keys work and are shown; Tab walks the form top to bottom."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QDialog

from app.base import paths
from app.runs import RunManager
from tests.test_window import fill_tiny, window  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parent.parent
CHILD = ROOT / "tests" / "window_layout_child.py"

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian


def _screens(tmp_path: Path, count: int) -> str:
    """An offscreen platform with `count` 1920×1080 screens side by side."""
    screens = [{"name": "AB"[i], "x": 1920 * i, "y": 0, "width": 1920, "height": 1080,
                "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1} for i in range(count)]
    path = tmp_path / f"screens{count}.json"
    path.write_text(json.dumps({"synchronousWindowSystemEvents": True, "windowFrameMargins": True,
                                "screens": screens}), encoding="utf-8")
    return f"offscreen:configfile={path}"


def _start(tmp_path: Path, screens: int, changes: dict) -> tuple[dict, dict]:
    """One start of the lab (a new process): what it restored, and the layout after the changes."""
    env = {**os.environ, "TERNIT_HOME": str(tmp_path / "lab"), "QT_QPA_PLATFORM": _screens(tmp_path, screens)}
    env.pop("TERNIT_LANG", None)
    out = subprocess.run([sys.executable, str(CHILD), json.dumps(changes)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    before, after = (json.loads(line) for line in out.stdout.splitlines()[-2:])
    return before, after


def test_layout_survives_restarts_a_lost_screen_and_a_language_switch(tmp_path):
    first, _ = _start(tmp_path, 2, {"geometry": [2100, 100, 1300, 850], "main": [700, 596], "right": [300, 450],
                                    "tab": "gpu", "where_width": 150, "sort": [6, "asc"],
                                    "data": [100, 400], "data_geometry": [900, 700]})
    assert first["geometry"][2:] == [1500, 950] and first["tab"] == "history"  # no settings yet: defaults
    assert first["sort"] == ["created", "desc"]
    restored, switched = _start(tmp_path, 2, {"language": "en"})
    # Everything as the first start left it (the second screen, the splitters, «Видеокарта»,
    # the column the user widened, the order, the data window).
    assert restored["screen"] == "B" and restored["geometry"][2:] == [1300, 850]
    assert restored["geometry"][0] >= 1920
    assert restored["right"][0] < restored["right"][1]  # 300 : 450 as set
    assert abs(restored["main"][0] - 700) <= 60  # Russian labels need the right side's 638 px
    assert restored["tab"] == "gpu" and restored["widths"] == {"where": 150} and restored["where_width"] == 150
    assert restored["sort"] == ["tokens", "asc"]
    assert restored["data_geometry"] == [900, 700] and restored["data"][0] < restored["data"][1] / 2
    # The language switch rebuilds the window: the layout stays.
    for key in ("geometry", "right", "tab", "widths", "where_width", "sort"):
        assert switched[key] == restored[key], key
    assert abs(switched["main"][0] - restored["main"][0]) <= 60
    # The second screen is gone: the window comes up whole on the one that is left.
    alone, _ = _start(tmp_path, 1, {"maximized": True})
    x, y, w, h = alone["geometry"]
    assert alone["screen"] == "A" and 0 <= x and x + w <= 1920 and 0 <= y and y + h <= 1080
    assert [w, h] == [1300, 850] and alone["tab"] == "gpu"
    maximized, _ = _start(tmp_path, 1, {})
    assert maximized["maximized"]
    assert maximized["geometry"] == alone["geometry"]  # un-maximizing goes back to it


@pytest.mark.parametrize("text", [
    "[1, 2]", "not json {", '"text"',
    json.dumps({"language": ["en"], "window": {
        "states": {"geometry": "!!not base64!!", "splitter.main": "AAAA", "splitter.right": 5,
                   "data.splitter": "QUJD" * 10_000},
        "tab": ["gpu"], "history_columns": {"name": "wide", "where": -3, "steps": 1e9, "x" * 99: 100},
        "history_sort": ["tokens", "sideways"]}}),
])
def test_a_damaged_settings_file_costs_only_the_defaults(qtbot, text):
    from ui.window.main_window import DEFAULT_SIZE, MainWindow

    (paths.config_dir() / "settings.json").write_text(text, encoding="utf-8")
    w = MainWindow(runs=RunManager(), poll_ms=60_000)
    qtbot.addWidget(w)
    assert (w.width(), w.height()) == DEFAULT_SIZE
    plain = MainWindow(runs=RunManager(), poll_ms=60_000, remember_layout=False)
    qtbot.addWidget(plain)
    assert w.main_split.sizes() == plain.main_split.sizes()
    assert w.right_split.sizes() == plain.right_split.sizes()
    assert w.history.user_widths == {} and w.history.sort_order() == ("created", "desc")
    w.show()
    w.ensure_ready()
    assert w.tabs.currentIndex() == 0
    assert w.form_view.start_button.text() == "Старт"
    w.close()  # and it writes a good file over the bad one
    saved = json.loads((paths.config_dir() / "settings.json").read_text(encoding="utf-8"))
    assert saved["window"]["tab"] == "history" and "geometry" in saved["window"]["states"]


def test_a_settings_file_that_is_not_an_object_leaves_the_language_russian(russian):
    from app.base import i18n

    i18n.set_language(None)
    (paths.config_dir() / "settings.json").write_text("[1, 2]", encoding="utf-8")
    assert i18n.t("да", "yes") == "да"  # it raised AttributeError in every text


def test_the_snapshot_neither_takes_nor_leaves_a_layout(qtbot):
    from ui.window.main_window import MainWindow

    w = MainWindow(runs=RunManager(), poll_ms=60_000)
    qtbot.addWidget(w)
    w.show()
    w.right_split.setSizes([100, 600])
    w.close()
    kept = (paths.config_dir() / "settings.json").read_text(encoding="utf-8")
    shot = MainWindow(runs=RunManager(), poll_ms=60_000, remember_layout=False)
    qtbot.addWidget(shot)
    assert shot.right_split.sizes() != w.right_split.sizes()
    shot.show()
    shot.close()
    assert (paths.config_dir() / "settings.json").read_text(encoding="utf-8") == kept


# -- keys -------------------------------------------------------------------------------


def _press(qtbot, w, key: QKeySequence) -> None:  # noqa: ANN001
    """A key pressed in the window (made active again: offscreen, nothing re-activates it
    after a dialog closes, as a desktop does)."""
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w)
    combo = key[0]
    qtbot.keyClick(QApplication.focusWidget() or w, combo.key(), combo.keyboardModifiers())


def _modal_closed_later() -> list[str]:
    """Close the modal dialog a key opens (exec() waits for it), noting its class."""
    seen: list[str] = []

    def close() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QDialog):
            seen.append(type(box).__name__)
            box.reject()

    QTimer.singleShot(300, close)
    return seen


def test_keys_are_in_the_menus_and_do_what_they_say(qtbot, window, tiny_data):  # noqa: F811
    from ui.data.dialog import DataDialog

    actions = window.shortcut_actions
    in_menus = {a for menu in window.menuBar().actions() if menu.menu() for a in menu.menu().actions()}
    for name in ("data", "refresh", "quit", "start", "kaggle"):
        assert actions[name] in in_menus and not actions[name].shortcut().isEmpty(), name
    assert actions["data"].shortcut() == QKeySequence("Ctrl+D")
    assert actions["start"].shortcuts()[:2] == [QKeySequence("Ctrl+Enter"), QKeySequence("Ctrl+Return")]

    # Data…: Ctrl+D opens the data window.
    _press(qtbot, window, actions["data"].shortcut())
    dialogs = [d for d in window.findChildren(DataDialog) if d.isVisible()]
    assert len(dialogs) == 1
    dialogs[0].reject()
    # Kaggle accounts: Ctrl+K opens the accounts window.
    seen = _modal_closed_later()
    _press(qtbot, window, actions["kaggle"].shortcut())
    assert seen == ["AccountsDialog"]
    # Refresh: data prepared outside the window (a terminal) reaches the form.
    copy = paths.prepared_dir() / "from-terminal"
    shutil.copytree(tiny_data, copy)
    _press(qtbot, window, actions["refresh"].shortcut())
    assert str(copy) in {p.dir for p in window.form_view.form.ctx.prepared}

    # Start: only when the form allows it; then as a click on «Старт» (a real run).
    view = window.form_view
    view.inputs["width"].setFocus()
    view._constellation_boxes["tiny"].setChecked(False)
    assert not view.start_button.isEnabled() and not actions["start"].isEnabled()
    _press(qtbot, window, QKeySequence("Ctrl+Return"))
    assert window.runs.registry.list_runs() == []
    fill_tiny(qtbot, view)
    assert view.start_button.isEnabled() and actions["start"].isEnabled()
    assert view.start_button.toolTip() == "Запустить обучение (Ctrl+Enter)"
    view.inputs["name"].setFocus()  # typing in a field: the key still starts
    _press(qtbot, window, QKeySequence("Ctrl+Return"))
    assert [r.name for r in window.runs.registry.list_runs()] == ["tiny"]

    # A language switch rebuilds the menus: each key is still one action (two would fire none).
    window.set_language("en")
    assert window.shortcut_actions["data"].text() == "Data…"
    _press(qtbot, window, window.shortcut_actions["data"].shortcut())
    dialogs = [d for d in window.findChildren(DataDialog) if d.isVisible()]
    assert len(dialogs) == 1
    dialogs[0].reject()
    # Quit: the window closes (the run goes on: asked first, answered «keep training»).
    _press(qtbot, window, window.shortcut_actions["quit"].shortcut())
    box = window.close_question
    assert box is not None and box.isVisible()
    box.buttons_by_answer["keep"].click()
    assert not window.isVisible()


def test_quit_key_closes_the_window(qtbot):
    from ui.window.main_window import MainWindow

    w = MainWindow(runs=RunManager(), poll_ms=60_000)
    qtbot.addWidget(w)
    w.show()
    _press(qtbot, w, w.shortcut_actions["quit"].shortcut())
    assert not w.isVisible()
    assert "geometry" in json.loads((paths.config_dir() / "settings.json").read_text())["window"]["states"]


def test_tab_walks_the_form_top_to_bottom(qtbot):
    # The constellation boxes are made after the other fields: they came last in the focus
    # chain, after «Старт», the plot and the history.
    from app.form.run_form import FormContext
    from ui.window.main_window import MainWindow

    ctx = FormContext()
    ctx.constellations = {"demo": 1000, "books": None}
    w = MainWindow(runs=RunManager(), ctx=ctx, poll_ms=60_000)
    qtbot.addWidget(w)
    w.show()
    w.ensure_ready()
    w.set_language("en")  # rebuilt: the order is made again
    view = w.form_view
    order = [view.inputs["name"], view.scratch_radio, *view._constellation_boxes.values(),
             view.inputs["context"], view.inputs["width"], view.inputs["heads"], view.inputs["layers"],
             view.inputs["gpu"], view.inputs["machine"], view.inputs["batch_per_card"]]
    chain, widget = [], view.inputs["name"]
    for _ in range(200):
        if widget in order and widget not in chain:
            chain.append(widget)
        widget = widget.nextInFocusChain()
    assert chain == order


def test_layout_round_trips_and_each_bad_part_is_dropped_alone():
    from app.window.layout import WindowLayout, from_settings, merged

    good = WindowLayout(states={"geometry": b"\x01\xd9\xd0\xcb", "splitter.main": b"\x00\xff"}, tab="gpu",
                        columns={"where": 150}, sort=("tokens", "asc"))
    kept = merged({"language": "en", "ask_on_close": False}, good)
    assert kept["language"] == "en" and kept["ask_on_close"] is False
    assert from_settings(json.loads(json.dumps(kept))) == good
    kept["window"]["states"]["splitter.main"] = "%%%"
    kept["window"]["history_columns"]["steps"] = True  # not a width
    back = from_settings(kept)
    assert back.states == {"geometry": b"\x01\xd9\xd0\xcb"} and back.columns == {"where": 150}
    assert back.tab == "gpu" and back.sort == ("tokens", "asc")
