"""Issue 16: a dark system palette. Every widget that colours its text or its plot takes the
colour from app.window.colors' table for the palette in use (ui/base/palette), shows the light table's
colour on a light palette and the dark table's on a dark one, and re-reads it when the
palette changes while it is open; no colour is written into ui/ by hand any more."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.base.i18n import set_language
from app.window.colors import colors
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts

fake = fixtures.fake  # the fake-server fixture

LIGHT, DARK = colors(False), colors(True)
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def app_palette(qtbot):
    """Switch the application's palette: `dark()` / `light()`; the light one comes back after."""
    from ui.base import palette

    app = QApplication.instance()
    before = app.palette()

    class Switch:
        @staticmethod
        def dark() -> None:
            app.setPalette(palette.dark_palette())
            app.processEvents()  # Qt posts the palette's change to the widgets, as a desktop's
            assert palette.dark()

        @staticmethod
        def light() -> None:
            app.setPalette(before)
            app.processEvents()
            assert not palette.dark()

    assert not palette.dark(), "the tests start on the light palette"
    yield Switch
    app.setPalette(before)


def test_the_tables_have_the_same_names_and_differ_where_dark_needs_it():
    assert LIGHT.keys() == DARK.keys()
    for name in ("error", "warning", "note", "muted", "plot_bg", "plot_fg", "grid",
                 "gpu_normal", "gpu_warm", "gpu_hot", "gpu_fill_normal", "gpu_fill_full",
                 "prompt_bg", "prompt_fg"):
        assert LIGHT[name] != DARK[name], name


# ---- the GPU card and the monitor panel -------------------------------------------------

@pytest.fixture
def hot_panel(qtbot, monkeypatch):
    """The monitor panel over two fake T4s: card 0 hot and nearly full, card 1 lost."""
    from app.gpu.nvml import NvmlSession
    from app.gpu.sampler import Sampler
    from app.gpu.settings import MonitorSettings
    from bench.fake_nvml import FakeNvml, two_cards
    from ui.monitor.panel import MonitorPanel

    set_language("en")
    nv = FakeNvml(two_cards())
    nv.install(monkeypatch)
    nv.cards[0].used_mb = 14800  # 96 %: "full"
    nv.cards[0].temp = 86  # at the slowdown threshold (85): "hot"
    nv.cards[1].lost = True

    def make() -> MonitorPanel:
        panel = MonitorPanel(Sampler(NvmlSession()), MonitorSettings(), save_settings=False)
        qtbot.addWidget(panel)
        panel.show()
        panel.show_snapshot(panel.sampler.sample())
        return panel

    yield make
    set_language(None)


def assert_panel_in(panel, table: dict) -> None:
    hot, lost = panel.cards[0], panel.cards[1]
    assert hot.temperature_level == "hot" and hot.memory_level == "full"
    assert hot.temp_colour == table["gpu_hot"] and table["gpu_hot"] in hot.temp_label.styleSheet()
    assert f"background-color: {table['gpu_fill_full']}" in hot.memory_bar.styleSheet()
    assert f"color: {table['error']}" in lost.title.styleSheet()
    assert f"color: {table['error']}" not in hot.title.styleSheet()
    assert f"color: {table['error']}" in panel.alerts_label.styleSheet() and panel.alerts_label.text()
    for card in (hot, lost):
        plot = card.plot_widget.getPlotItem()
        assert card.plot_widget.backgroundBrush().color().name() == table["plot_bg"]
        assert plot.getAxis("left").pen().color().name() == table["plot_fg"]
        assert plot.getAxis("bottom").textPen().color().name() == table["plot_fg"]
        assert {line.pen.color().name() for line in card.guides} == {table["grid"]}
        assert card.slowdown_line.pen.color().name() == table["gpu_hot"]
        assert {colour_name(label.opts["color"]) for _, label in card.legend.items} == {table["plot_fg"]}


def test_the_gpu_cards_and_the_alerts_follow_the_palette(qtbot, hot_panel, app_palette):
    panel = hot_panel()
    assert_panel_in(panel, LIGHT)
    app_palette.dark()  # the desktop switched to a dark theme with the window open
    assert_panel_in(panel, DARK)
    app_palette.light()
    assert_panel_in(panel, LIGHT)


def test_a_panel_opened_on_a_dark_palette_is_dark(qtbot, hot_panel, app_palette):
    app_palette.dark()
    panel = hot_panel()
    assert_panel_in(panel, DARK)
    assert panel.cards[0].plot_widget.backgroundBrush().color().lightness() < 80


def test_the_gpu_series_read_on_both_plot_backgrounds():
    """The small plot's lines stay fixed (the loss plot's first colours): each keeps at least
    3:1 against the light and the dark background, the contrast lines and marks need."""
    from ui.monitor.gpu_card import SERIES_STYLE

    def luminance(hex_colour: str) -> float:
        rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    for colour, _ru, _en in SERIES_STYLE.values():
        for bg in (LIGHT["plot_bg"], DARK["plot_bg"]):
            a, b = sorted((luminance(colour), luminance(bg)))
            assert (b + 0.05) / (a + 0.05) >= 3.0, (colour, bg)


# ---- the loss plot -----------------------------------------------------------------------

def test_the_loss_plot_follows_a_palette_change(qtbot, app_palette, russian):
    from ui.runs.loss_plot import LossPlot

    plot = LossPlot()
    qtbot.addWidget(plot)
    plot.show()
    empty = LossPlot()  # its hint says what to do on an empty plot
    qtbot.addWidget(empty)
    tr = plot.trace("live", "прогон")
    tr.add_events("r", [{"event": "start", "step": 0, "tokens_per_step": 100, "data_id": "A"},
                        *({"event": "step", "step": s, "loss": 3.0 - s / 100} for s in range(1, 21)),
                        {"event": "pause", "step": 10, "seconds": 30}])
    tr.redraw(full=True)

    def colours(table: dict) -> None:
        assert plot.widget.backgroundBrush().color().name() == table["plot_bg"]
        assert plot.plot.getAxis("left").pen().color().name() == table["plot_fg"]
        assert plot.plot.getAxis("bottom").textPen().color().name() == table["plot_fg"]
        assert {colour_name(label.opts["color"]) for _, label in plot.plot.legend.items} == {table["plot_fg"]}
        assert plot.plot.legend.opts["brush"].color().name() == colors_rgb(table["legend_bg"])
        assert empty.hint.color.name() == table["hint"]
        assert tr._marker_items and {m.pen.color().name() for m in tr._marker_items} == {table["marker_pause"]}

    colours(LIGHT)
    app_palette.dark()
    colours(DARK)
    app_palette.light()
    colours(LIGHT)


def colors_rgb(rgba: tuple) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgba[:3])


def colour_name(colour) -> str:
    """"#rrggbb" of a QColor or of a colour pyqtgraph keeps as it was given (a string)."""
    import pyqtgraph as pg

    return pg.mkColor(colour).name()


def test_the_history_banner_and_form_follow_a_palette_change(qtbot, app_palette, russian):
    """They took the palette's colours when built (the window opened dark stays dark); a
    change of palette while the window is open reaches them too."""
    from app.base import run_status as st
    from tests.test_ui_history import row
    from ui.form.run_form import RunFormView
    from ui.runs.banner import RunBanner
    from ui.runs.history import HistoryView

    history = HistoryView()
    qtbot.addWidget(history)
    history.set_rows([row("a", st.FAILED), row("b", st.FINISHED)])
    banner = RunBanner()
    qtbot.addWidget(banner)
    form = RunFormView()  # no constellation is prepared: «Старт» says why in red
    qtbot.addWidget(form)

    def colours(table: dict) -> None:
        status = {history.run_id_at(r): history.table.item(r, 2).foreground().color().name()
                  for r in range(history.table.rowCount())}
        assert status == {"a": table["error"], "b": table["finished"]}
        assert banner.failure.styleSheet() == f"color: {table['error']};"
        assert banner.note.styleSheet() == f"color: {table['muted']};"
        assert form.why.text() and form.why.styleSheet() == f"color: {table['error']};"
        assert form.model_locked_note.styleSheet().startswith(f"color: {table['muted']};")

    colours(LIGHT)
    app_palette.dark()
    colours(DARK)
    app_palette.light()
    colours(LIGHT)


# ---- the data window --------------------------------------------------------------------

def test_the_data_windows_statuses_and_note_follow_the_palette(qtbot, tmp_path, app_palette, russian):
    from app.data.library import Library
    from ui.data.dialog import DataDialog

    for name in ("есть", "пропал"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.txt").write_text(f"Текст набора {name}.\n", encoding="utf-8")
    lib = Library()
    try:
        lib.add(tmp_path / "есть", "есть", "созвездие")
        lib.add(tmp_path / "пропал", "пропал", "созвездие")
    finally:
        lib.state.close()
    (tmp_path / "пропал" / "a.txt").unlink()
    (tmp_path / "пропал").rmdir()
    dlg = DataDialog()
    qtbot.addWidget(dlg)
    dlg.show()
    with qtbot.waitSignal(dlg.statuses_ready, timeout=30_000):
        pass
    dlg.status.setText("Нет текстовых файлов", "warning")

    def colours(table: dict) -> None:
        found = {}
        for r in range(dlg.datasets.rowCount()):
            name = dlg.datasets.item(r, 0).data(Qt.ItemDataRole.UserRole)
            found[name] = dlg.datasets.item(r, 4).foreground().color().name()
        assert found["есть"] == table["note"] and found["пропал"] == table["error"], found
        assert f"color: {table['warning']}" in dlg.status.styleSheet()

    try:
        colours(LIGHT)
        app_palette.dark()
        colours(DARK)
        app_palette.light()
        colours(LIGHT)
    finally:
        dlg.done(0)


# ---- the Kaggle accounts ----------------------------------------------------------------

def test_the_kaggle_dialogs_follow_the_palette(qtbot, app_palette, monkeypatch):
    from ui.kaggle.accounts import AccountsDialog, AddByHandDialog

    monkeypatch.setenv("KAGGLE_API_TOKEN", "KGAT_someone_elses_token")  # the note shows: set, not used
    app_palette.dark()
    by_hand = AddByHandDialog()
    qtbot.addWidget(by_hand)
    by_hand.username.setText("кто-то")
    by_hand._accept()  # no key: the error says so, in the dark table's red
    assert by_hand.error.text() and by_hand.error.styleSheet().startswith(f"color: {DARK['error']};")
    accounts = AccountsDialog()
    qtbot.addWidget(accounts)
    assert accounts.warning.text() and f"color: {DARK['warning']}" in accounts.warning.styleSheet()
    app_palette.light()
    assert by_hand.error.styleSheet().startswith(f"color: {LIGHT['error']};")
    assert f"color: {LIGHT['warning']}" in accounts.warning.styleSheet()


def test_an_accounts_key_status_follows_the_palette(qtbot, app_palette, fake):
    from ui.kaggle.accounts import AccountsDialog

    fake.add_account("alice", KEYS["alice"])
    add_lab_accounts("alice", wrong_key=("alice",))
    dlg = AccountsDialog()  # it tests the keys as it opens: the fake server refuses this one
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.checked, timeout=20_000):
        pass
    assert dlg.table.item(0, 1).foreground().color().name() == LIGHT["error"]
    app_palette.dark()
    assert dlg.table.item(0, 1).foreground().color().name() == DARK["error"]


# ---- the form's prepare note and the «Текст» tab -----------------------------------------

def test_the_prepare_note_follows_the_palette(qtbot, app_palette, russian):
    from app.data import manage
    from ui.data.prepare_row import PrepareRow
    from ui.form.run_form import RunFormView

    view = RunFormView()
    qtbot.addWidget(view)
    row = PrepareRow()
    row.build(view)
    row.result = (2, manage.CliOutput(), ["пропавшие"])  # a failed prepare
    row.show_note()
    assert row.note.styleSheet() == f"color: {LIGHT['error']};"
    app_palette.dark()
    assert row.note.styleSheet() == f"color: {DARK['error']};"


def test_the_text_tab_follows_the_palette(qtbot, app_palette, russian):
    from PySide6.QtWidgets import QWidget

    from app.runs import RunManager
    from ui.text.tab import TextTab

    history = QWidget()
    qtbot.addWidget(history)
    tab = TextTab(RunManager(), history, lambda: None)
    qtbot.addWidget(tab)
    tab._refuse(KeyError("gone"))  # the run left the history: the status says so in red
    assert tab.status.styleSheet() == f"color: {LIGHT['error']};"
    assert tab.samples_note.styleSheet() == f"color: {LIGHT['muted']};"
    app_palette.dark()
    assert tab.status.styleSheet() == f"color: {DARK['error']};"
    assert tab.samples_note.styleSheet() == f"color: {DARK['muted']};"
    tab.stop()


def test_the_samples_tint_their_prompts_in_the_palettes_colours():
    from app.text import training_samples as view

    samples = [view.Sample("a", 10, 0, "кот", " и мяч")]
    for table in (LIGHT, DARK):
        html = view.samples_html(samples, None, table)
        assert f"background-color:{table['prompt_bg']}; color:{table['prompt_fg']};" in html
        assert f"color:{table['muted']};" in html
        assert table["prompt_bg"] in view.continuation_html("кот", " и мяч", table)
    assert view.samples_html(samples) == view.samples_html(samples, None, LIGHT)


# ---- no colour by hand ------------------------------------------------------------------

# A colour written as a literal: #rgb in a style sheet, #rrggbb or #rrggbbaa anywhere, or a
# named colour in a style sheet ("color: red;", not a "color: str" hint) or as a plot's
# background ("w", "k").
HAND_COLOUR = re.compile(r"#[0-9a-fA-F]{6}(?:[0-9a-fA-F]{2})?\b"
                         r"|(?:color|background)\s*:\s*(?:#[0-9a-fA-F]{3}\b|[a-zA-Z]+\s*[;}'\"])"
                         r"|background\s*=\s*['\"]\w+['\"]")
PALETTE_ROLE = re.compile(r"palette\([\w-]+\)")  # a style sheet's palette(base): the palette's own


def hand_colours(path: Path) -> list[str]:
    found = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if HAND_COLOUR.search(PALETTE_ROLE.sub("", line)):
            found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    return found


def test_no_colour_is_written_by_hand_outside_the_tables():
    """Every colour the window shows comes from app/window/colors.py (through ui/base/palette.py): a new
    hard-coded one is unreadable on one of the palettes and fails here."""
    files = [p for p in sorted((ROOT / "ui").rglob("*.py")) if p.name != "palette.py"]
    files += [p for p in sorted((ROOT / "app").rglob("*.py")) if p.name != "colors.py"]
    found = [hit for p in files for hit in hand_colours(p)]
    assert not found, "\n".join(found)


def test_the_hand_colour_check_can_fail():
    probe = ROOT / "ui" / "base" / "palette.py"  # any file under the root, read as text
    assert hand_colours(probe)  # palette.py's own dark palette is written by hand
    for bad in ('x.setStyleSheet("color: #b00020;")', 'pg.PlotWidget(background="w")',
                "QLabel { color: red; }", 'pen = "#dddddd"', "'color: gray'", "color: #abc;"):
        assert HAND_COLOUR.search(bad), bad
    for fine in ("background: palette(alternate-base);", "color: {palette.color('error')};",
                 "# issue #123: a comment", "def f(color: str) -> None:"):
        assert not HAND_COLOUR.search(PALETTE_ROLE.sub("", fine)), fine
