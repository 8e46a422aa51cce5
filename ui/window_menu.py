"""The main window's menu bar: «Лаборатория» (data, prepared folders, the runs folder,
refresh, quit), «Прогон» (start by key), «Kaggle» (accounts), «Настройки» (language) and
«Справка» (about, with the log file's path). Rebuilt whole when the language changes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QMenuBar, QMessageBox, QWidget

from app.base import logs, paths
from app.base.i18n import current_language, t

if TYPE_CHECKING:
    from .main_window import MainWindow


def keys(standard: QKeySequence.StandardKey, fallback: str) -> list[QKeySequence]:
    """The platform's own keys for an action where Qt knows them, else the usual ones
    (Windows, for one, has no standard key for Quit)."""
    return QKeySequence.keyBindings(standard) or [QKeySequence(fallback)]


def key_text(action: QAction) -> str:
    """An action's first key as the platform writes it («Ctrl+Enter»); "" when it has none."""
    return action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)


def _clear(window: MainWindow, bar: QMenuBar) -> None:
    """The old menus and actions go, keys and all (two live actions on one key make Qt
    fire neither)."""
    for action in window.shortcut_actions.values():
        action.setShortcuts([])
        action.deleteLater()
    window.shortcut_actions = {}
    for menu in bar.findChildren(QMenu, options=Qt.FindChildOption.FindDirectChildrenOnly):
        menu.deleteLater()
    bar.clear()


def build_menu(window: MainWindow) -> None:
    """The window's menus, in the interface language; `window.shortcut_actions` names the
    actions with a key, `window.language_actions` the language choices."""
    bar = window.menuBar()
    _clear(window, bar)
    actions = _lab_menu(window, bar.addMenu(t("Лаборатория", "Lab")))
    # «Старт» as the form's button has it (enabled only when the button is); no key stops
    # a run: one stray press would end hours of training.
    start = QAction(window.form_view.start_button.text(), window)
    start.setShortcuts([QKeySequence("Ctrl+Enter"), QKeySequence("Ctrl+Return")])
    start.triggered.connect(lambda: start_by_key(window))
    bar.addMenu(t("Прогон", "Run")).addAction(start)
    window.form_view.changed.connect(lambda: sync_start_action(window))
    window.shortcut_actions = {**actions, "start": start}
    kaggle = _kaggle_action(window)
    kaggle.setShortcut(QKeySequence("Ctrl+K"))
    bar.addMenu(t("Kaggle", "Kaggle")).addAction(kaggle)
    window.shortcut_actions["kaggle"] = kaggle
    _language_menu(window, bar.addMenu(t("Настройки", "Settings")))
    about = QAction(t("О программе", "About"), window)
    about.triggered.connect(lambda: show_about(window))
    bar.addMenu(t("Справка", "Help")).addAction(about)
    window.about_action = about
    window.form_view.start_shortcut = key_text(start)
    window.form_view.refresh()  # its tooltip names the key; the action follows (changed)


def _lab_menu(window: MainWindow, lab: QMenu) -> dict[str, QAction]:
    data = QAction(t("Данные…", "Data…"), window)
    data.setShortcut(QKeySequence("Ctrl+D"))
    data.setToolTip(t("Наборы текста и созвездия: добавить, убрать, переименовать, перепроверить",
                      "Text datasets and constellations: add, remove, rename, re-check"))
    data.triggered.connect(lambda: open_data_dialog(window))
    lab.addAction(data)
    add_data = QAction(t("Добавить подготовленные данные…", "Add prepared data…"), window)
    add_data.setToolTip(t("Папка, подготовленная раньше (`ternit data prepare`, другой компьютер): "
                          "в ней tokenizer.json, train.bin, val.bin и meta.json",
                          "A folder prepared before (`ternit data prepare`, another computer): "
                          "it holds tokenizer.json, train.bin, val.bin and meta.json"))
    add_data.triggered.connect(lambda: pick_prepared(window))
    lab.addAction(add_data)
    runs_folder = QAction(t("Открыть папку прогонов", "Open the runs folder"), window)
    runs_folder.triggered.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(paths.runs_dir()))))
    lab.addAction(runs_folder)
    refresh = QAction(t("Обновить", "Refresh"), window)
    refresh.setShortcuts(keys(QKeySequence.StandardKey.Refresh, "F5"))
    refresh.setToolTip(t("Перечитать данные, подготовленные папки, аккаунты Kaggle и историю прогонов "
                         "(если их меняли вне окна: ternit в терминале, другой компьютер)",
                         "Read the data, prepared folders, Kaggle accounts and run history again "
                         "(when they were changed outside the window: ternit in a terminal, another computer)"))
    refresh.triggered.connect(lambda: refresh_all(window))
    lab.addAction(refresh)
    lab.addSeparator()
    quit_action = QAction(t("Выход (обучение продолжится)", "Quit (training goes on)"), window)
    quit_action.setShortcuts(keys(QKeySequence.StandardKey.Quit, "Ctrl+Q"))
    quit_action.triggered.connect(window.close)
    lab.addAction(quit_action)
    lab.setToolTipsVisible(True)  # Qt hides menu items' tooltips unless asked
    return {"data": data, "refresh": refresh, "quit": quit_action}


def _language_menu(window: MainWindow, options: QMenu) -> None:
    lang_menu = options.addMenu(t("Язык интерфейса", "Interface language"))
    group = QActionGroup(window)
    window.language_actions = {}
    for code, name in (("ru", "Русский"), ("en", "English")):
        action = QAction(name, window, checkable=True)
        action.setChecked(current_language() == code)
        action.triggered.connect(lambda _=False, c=code: window.set_language(c))
        group.addAction(action)
        lang_menu.addAction(action)
        window.language_actions[code] = action


def refresh_all(window: MainWindow) -> None:
    """«Обновить»: the form's choices and the history read again."""
    window.reload_context()
    window.refresh_history()
    window.statusBar().showMessage(t("Обновлено", "Refreshed"), 3000)


def sync_start_action(window: MainWindow) -> None:
    """The «Старт» action follows the form's button: its text («Продолжить» for a
    continued run) and whether it can start now."""
    action = window.shortcut_actions.get("start")
    if action is not None:
        action.setText(window.form_view.start_button.text())
        action.setEnabled(window.form_view.start_button.isEnabled())


def start_by_key(window: MainWindow) -> None:
    if window.form_view.start_button.isEnabled():  # the form's own checks, as for a click
        window.form_view.start_button.click()


def _kaggle_action(window: MainWindow) -> QAction:
    """«Аккаунты…» (ui/kaggle_accounts.py); the form's accounts are read again after it."""
    from .kaggle_accounts import AccountsDialog

    action = QAction(t("Аккаунты…", "Accounts…"), window)

    def open_dialog() -> None:
        AccountsDialog(window).exec()
        window.reload_context()

    action.triggered.connect(open_dialog)
    return action


def open_data_dialog(window: MainWindow) -> QWidget:
    """«Данные…» (ui/data_dialog.py): the form's constellations are read again after each
    change there, so a constellation just added can be ticked at once."""
    from .data_dialog import DataDialog

    dialog = DataDialog(window)
    dialog.changed.connect(window.reload_context)
    dialog.renamed.connect(window.form_view.rename_constellation)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog


def pick_prepared(window: MainWindow) -> None:
    """«Добавить подготовленные данные…»: a folder prepared before joins the form's choices."""
    folder = QFileDialog.getExistingDirectory(window, t("Папка подготовленных данных", "Prepared data folder"),
                                              str(paths.prepared_dir()))
    if folder:
        window.add_prepared(folder)


def about_text() -> str:
    """«О программе»: what the lab is, where its data and its log file are."""
    return t(
        "Ternit Lab: подготовка данных, обучение и сравнение небольших GPT-моделей дома и на Kaggle.\n\n"
        f"Папка данных: {paths.data_dir()}\nЖурнал (для сообщения об ошибке): {logs.log_path()}",
        "Ternit Lab: prepare data, train and compare small GPT models at home and on Kaggle.\n\n"
        f"Data folder: {paths.data_dir()}\nLog file (for a bug report): {logs.log_path()}")


def show_about(parent: QWidget) -> QMessageBox:
    """Window-modal, not blocking (open()): the tests read it and close it."""
    box = QMessageBox(QMessageBox.Icon.Information, t("О программе", "About"), about_text(),
                      QMessageBox.StandardButton.Ok, parent)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.open()
    return box
