"""The main window's menu bar: «Лаборатория» (data, prepared folders, the runs folder,
refresh, quit), «Прогон» (start by key), «Kaggle» (accounts), «Настройки» (language) and
«Справка» (about, with the log file's path). Rebuilt whole when the language changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMenu, QMenuBar, QMessageBox, QWidget

from app.base import logs, paths
from app.base import settings as app_settings
from app.base.i18n import current_language, t
from app.queue import autostart
from ui.form.run_form import RunFormView


@dataclass
class MenuCalls:
    """What the menus do, as the window gives it."""

    set_language: Callable[[str], None]
    reload_context: Callable[[], None]  # the form's choices read again (data, accounts)
    refresh_history: Callable[[], None]  # the history read again (Lab.refresh)
    add_prepared: Callable[[str], bool]  # a prepared folder picked by hand
    status: Callable[[str, int], None]  # a line in the status bar, for so many ms
    quit: Callable[[], object]


@dataclass
class Menu:
    """The menus' actions the window and its tests reach: those with a key, the language
    choices and «О программе»."""

    shortcut_actions: dict[str, QAction] = field(default_factory=dict)
    language_actions: dict[str, QAction] = field(default_factory=dict)
    night_actions: dict[str, QAction] = field(default_factory=dict)  # "awake", "autostart"
    about_action: QAction | None = None


def keys(standard: QKeySequence.StandardKey, fallback: str) -> list[QKeySequence]:
    """The platform's own keys for an action where Qt knows them, else the usual ones
    (Windows, for one, has no standard key for Quit)."""
    return QKeySequence.keyBindings(standard) or [QKeySequence(fallback)]


def key_text(action: QAction) -> str:
    """An action's first key as the platform writes it («Ctrl+Enter»); "" when it has none."""
    return action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)


def _clear(old: Menu | None, bar: QMenuBar) -> None:
    """The old menus and actions go, keys and all (two live actions on one key make Qt
    fire neither)."""
    for action in (old.shortcut_actions.values() if old is not None else ()):
        action.setShortcuts([])
        action.deleteLater()
    for menu in bar.findChildren(QMenu, options=Qt.FindChildOption.FindDirectChildrenOnly):
        menu.deleteLater()
    bar.clear()


def build_menu(bar: QMenuBar, parent: QWidget, form_view: RunFormView, calls: MenuCalls,
               old: Menu | None = None) -> Menu:
    """The menus of `bar`, in the interface language (`old`: the menus they replace);
    `parent` owns the actions and the dialogs, `form_view` is the form «Старт» follows."""
    _clear(old, bar)
    menu = Menu()
    actions = _lab_menu(parent, form_view, calls, bar.addMenu(t("Лаборатория", "Lab")))
    # «Старт» as the form's button has it (enabled only when the button is); no key stops
    # a run: one stray press would end hours of training.
    start = QAction(form_view.start_button.text(), parent)
    start.setShortcuts([QKeySequence("Ctrl+Enter"), QKeySequence("Ctrl+Return")])
    start.triggered.connect(lambda: start_by_key(form_view))
    bar.addMenu(t("Прогон", "Run")).addAction(start)
    form_view.changed.connect(lambda: sync_start_action(start, form_view))
    menu.shortcut_actions = {**actions, "start": start}
    kaggle = _kaggle_action(parent, calls)
    kaggle.setShortcut(QKeySequence("Ctrl+K"))
    bar.addMenu(t("Kaggle", "Kaggle")).addAction(kaggle)
    menu.shortcut_actions["kaggle"] = kaggle
    options = bar.addMenu(t("Настройки", "Settings"))
    menu.language_actions = _language_menu(parent, calls, options)
    menu.night_actions = _night_menu(parent, calls, options)
    about = QAction(t("О программе", "About"), parent)
    about.triggered.connect(lambda: show_about(parent))
    bar.addMenu(t("Справка", "Help")).addAction(about)
    menu.about_action = about
    form_view.set_start_shortcut(key_text(start))  # its tooltip names the key
    return menu


def _lab_menu(window: QWidget, form_view: RunFormView, calls: MenuCalls, lab: QMenu) -> dict[str, QAction]:
    data = QAction(t("Данные…", "Data…"), window)
    data.setShortcut(QKeySequence("Ctrl+D"))
    data.setToolTip(t("Наборы текста и созвездия: добавить, убрать, переименовать, перепроверить",
                      "Text datasets and constellations: add, remove, rename, re-check"))
    data.triggered.connect(lambda: open_data_dialog(window, form_view, calls))
    lab.addAction(data)
    add_data = QAction(t("Добавить подготовленные данные…", "Add prepared data…"), window)
    add_data.setToolTip(t("Папка, подготовленная раньше (`ternit data prepare`, другой компьютер): "
                          "в ней tokenizer.json, train.bin, val.bin и meta.json",
                          "A folder prepared before (`ternit data prepare`, another computer): "
                          "it holds tokenizer.json, train.bin, val.bin and meta.json"))
    add_data.triggered.connect(lambda: pick_prepared(window, calls))
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
    refresh.triggered.connect(lambda: refresh_all(calls))
    lab.addAction(refresh)
    lab.addSeparator()
    quit_action = QAction(t("Выход (обучение продолжится)", "Quit (training goes on)"), window)
    quit_action.setShortcuts(keys(QKeySequence.StandardKey.Quit, "Ctrl+Q"))
    quit_action.triggered.connect(calls.quit)
    lab.addAction(quit_action)
    lab.setToolTipsVisible(True)  # Qt hides menu items' tooltips unless asked
    return {"data": data, "refresh": refresh, "quit": quit_action}


def _language_menu(window: QWidget, calls: MenuCalls, options: QMenu) -> dict[str, QAction]:
    lang_menu = options.addMenu(t("Язык интерфейса", "Interface language"))
    group = QActionGroup(window)
    choices = {}
    for code, name in (("ru", "Русский"), ("en", "English")):
        action = QAction(name, window, checkable=True)
        action.setChecked(current_language() == code)
        action.triggered.connect(lambda _=False, c=code: calls.set_language(c))
        group.addAction(action)
        lang_menu.addAction(action)
        choices[code] = action
    return choices


def _night_menu(window: QWidget, calls: MenuCalls, options: QMenu) -> dict[str, QAction]:
    """The night's two switches: the sleep request, and the queue carried on after a reboot."""
    keep = QAction(t("Не давать ПК уснуть, пока идёт обучение", "Keep the PC awake while training"), window,
                   checkable=True)
    keep.setChecked(app_settings.keep_awake())
    keep.setToolTip(t("Обучение и очередь просят систему не засыпать, пока работают; экран может гаснуть",
                      "Training and the queue ask the system not to sleep while they work; the display may sleep"))
    keep.toggled.connect(app_settings.save_keep_awake)
    again = QAction(t("Продолжать очередь после перезагрузки", "Carry the queue on after a reboot"), window,
                    checkable=True)
    again.setChecked(autostart.status().installed)
    again.setToolTip(t("При следующем входе в систему очередь продолжится сама (ternit queue autostart)",
                       "At the next logon the queue goes on by itself (ternit queue autostart)"))
    again.toggled.connect(lambda on: calls.status(autostart.switch(on), 8000))
    options.addSeparator()
    options.addAction(keep)
    options.addAction(again)
    options.setToolTipsVisible(True)
    return {"awake": keep, "autostart": again}


def refresh_all(calls: MenuCalls) -> None:
    """«Обновить»: the form's choices and the history read again."""
    calls.reload_context()
    calls.refresh_history()
    calls.status(t("Обновлено", "Refreshed"), 3000)


def sync_start_action(action: QAction, form_view: RunFormView) -> None:
    """The «Старт» action follows the form's button: its text («Продолжить» for a
    continued run) and whether it can start now."""
    action.setText(form_view.start_button.text())
    action.setEnabled(form_view.start_button.isEnabled())


def start_by_key(form_view: RunFormView) -> None:
    if form_view.start_button.isEnabled():  # the form's own checks, as for a click
        form_view.start_button.click()


def _kaggle_action(window: QWidget, calls: MenuCalls) -> QAction:
    """«Аккаунты…» (ui/kaggle/accounts.py, loaded when first opened, not with the window's
    first frame); the form's accounts are read again after it."""
    action = QAction(t("Аккаунты…", "Accounts…"), window)

    def open_dialog() -> None:
        from ui.kaggle.accounts import AccountsDialog

        AccountsDialog(window).exec()
        calls.reload_context()

    action.triggered.connect(open_dialog)
    return action


def open_data_dialog(window: QWidget, form_view: RunFormView, calls: MenuCalls) -> QWidget:
    """«Данные…» (ui/data/dialog.py): the form's constellations are read again after each
    change there, so a constellation just added can be ticked at once."""
    from ui.data.dialog import DataDialog

    dialog = DataDialog(window)
    dialog.changed.connect(calls.reload_context)
    dialog.renamed.connect(form_view.rename_constellation)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog


def pick_prepared(window: QWidget, calls: MenuCalls) -> None:
    """«Добавить подготовленные данные…»: a folder prepared before joins the form's choices."""
    folder = QFileDialog.getExistingDirectory(window, t("Папка подготовленных данных", "Prepared data folder"),
                                              str(paths.prepared_dir()))
    if folder:
        calls.add_prepared(folder)


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
