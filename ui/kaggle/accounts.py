"""The Kaggle accounts dialog: add (an API token, kaggle.json or a key by hand), test,
remove, clean the lab's datasets; each account's key status, remaining GPU quota as a bar
with its refresh time, what it holds and its kernels. Thin: every decision is app.kaggle's;
checks run off the GUI thread."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import t
from app.kaggle.accounts import Accounts, AccountView, auth_text, key_status_text
from app.kaggle.credentials import (
    Credential,
    CredentialsError,
    check,
    check_token,
    global_token_note,
)
from app.kaggle.quota import hours, refresh_text
from app.kaggle.store import KaggleStore
from ui.base import palette
from ui.base.background import run_in_thread
from ui.kaggle.clean import CleanFlow

COLUMNS = (("Аккаунт", "Account"), ("Ключ", "Key"), ("Квота GPU", "GPU quota"),
           ("Хранит", "Holds"), ("Ядра", "Kernels"))
STATUS_COLOR = {"ok": "note", "invalid": "error", "unreachable": "warning", "missing": "error"}  # app.window.colors' names


def quota_bar(view: AccountView) -> QProgressBar:
    bar = QProgressBar()
    bar.setRange(0, 1000)
    q = view.quota
    if q is None or q.total_s <= 0:
        bar.setValue(0)
        bar.setFormat(t("квота неизвестна — нажмите «Проверить»", "quota unknown — press Test"))
        return bar
    bar.setValue(int(round(1000 * q.fraction_left)))
    bar.setFormat(t(f"осталось {hours(q.remaining_s)} из {hours(q.total_s)}",
                    f"{hours(q.remaining_s)} of {hours(q.total_s)} left") + " · " + refresh_text(q.refresh_at))
    bar.setToolTip(refresh_text(q.refresh_at) + t(
        f"\nиспользовано {hours(q.used_s)}, занято идущими сессиями {hours(q.reserved_s)}",
        f"\nused {hours(q.used_s)}, reserved by running sessions {hours(q.reserved_s)}"))
    return bar


class AddByHandDialog(QDialog):
    """A username and a secret typed in: a legacy key («Добавить вручную…») or an API token
    («Добавить токен…», `token=True`)."""

    def __init__(self, parent: QWidget | None = None, token: bool = False) -> None:
        super().__init__(parent)
        self.token_mode = token
        self.setWindowTitle(t("Добавить токен API Kaggle", "Add a Kaggle API token") if token
                            else t("Добавить аккаунт Kaggle", "Add a Kaggle account"))
        self.username = QLineEdit()
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        form = QFormLayout(self)
        form.addRow(t("Имя пользователя", "Username"), self.username)
        form.addRow(t("Токен API", "API token") if token else t("Ключ API", "API key"), self.key)
        hint = QLabel(t("Токен: kaggle.com → Settings → API → Generate New Token; скопируйте его целиком "
                        "(начинается с KGAT_). ", "The token: kaggle.com → Settings → API → Generate New Token; "
                        "copy it whole (it starts with KGAT_). ") if token else
                      t("Устаревший ключ — из kaggle.json (kaggle.com → Settings → API → Create Legacy API Key). ",
                        "A legacy key is in kaggle.json (kaggle.com → Settings → API → Create Legacy API Key). ")
                      + t("Он хранится только в файле ключей лаборатории (доступ только у вас).",
                          "It is kept only in the lab's key file (readable by you alone)."))
        hint.setWordWrap(True)
        form.addRow(hint)
        self.error = QLabel()
        self.error.setStyleSheet(palette.style("error"))
        form.addRow(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.credential = None

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event) and hasattr(self, "error"):
            palette.set_style(self.error, palette.style("error"))

    def _accept(self) -> None:
        try:
            read = check_token if self.token_mode else check
            self.credential = read(self.username.text(), self.key.text())
        except CredentialsError as e:
            self.error.setText(str(e))
            return
        self.accept()


class AccountsDialog(QDialog):
    """Kaggle → Accounts…"""

    checked = Signal()  # a background check finished and the table shows its result

    def __init__(self, parent: QWidget | None = None, store: KaggleStore | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(t("Аккаунты Kaggle", "Kaggle accounts"))
        self.resize(1150, 380)
        self._own_store = store is None
        self.store = store or KaggleStore()
        self.accounts = Accounts(self.store)
        self._busy = 0
        self._closed = False
        layout = QVBoxLayout(self)
        self.warning = QLabel()
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet(palette.style("warning"))
        layout.addWidget(self.warning)
        rules = QLabel(t("Правила Kaggle: один аккаунт на человека. Добавляйте аккаунты участников "
                         "лаборатории, каждый со своим ключом; квота GPU у каждого своя и обновляется раз в неделю.",
                         "Kaggle's rules: one account per person. Add the lab members' accounts, each with "
                         "its own key; each has its own GPU quota, refreshed weekly."))
        rules.setWordWrap(True)
        layout.addWidget(rules)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels([t(ru, en) for ru, en in COLUMNS])
        header = self.table.horizontalHeader()
        for col, mode in enumerate((QHeaderView.ResizeMode.ResizeToContents, QHeaderView.ResizeMode.ResizeToContents,
                                    QHeaderView.ResizeMode.Fixed, QHeaderView.ResizeMode.ResizeToContents,
                                    QHeaderView.ResizeMode.Stretch)):
            header.setSectionResizeMode(col, mode)
        header.resizeSection(2, 420)  # the quota bar with its whole text
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        layout.addWidget(self.table)
        self.status = QLabel()
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        row = QHBoxLayout()
        self.add_token = QPushButton(t("Добавить токен…", "Add token…"))
        self.add_file = QPushButton(t("Добавить из kaggle.json…", "Add from kaggle.json…"))
        self.add_hand = QPushButton(t("Добавить вручную…", "Add by hand…"))
        self.test = QPushButton(t("Проверить все", "Test all"))
        self.remove = QPushButton(t("Удалить", "Remove"))
        self.clean = QPushButton(t("Очистить датасеты…", "Clean datasets…"))
        self.clean.setToolTip(t("Датасеты лаборатории на аккаунтах, не нужные ни одному прогону: список с размерами, "
                                "удаление после подтверждения", "The lab's datasets on the accounts that no run "
                                "needs: a list with sizes, deleted once confirmed"))
        close = QPushButton(t("Закрыть", "Close"))
        for b in (self.add_token, self.add_file, self.add_hand, self.test, self.remove, self.clean):
            row.addWidget(b)
        row.addStretch(1)
        row.addWidget(close)
        layout.addLayout(row)
        self.add_token.clicked.connect(lambda: self.add_by_hand(token=True))
        self.add_file.clicked.connect(self.add_from_files)
        self.add_hand.clicked.connect(self.add_by_hand)
        self.cleaning = CleanFlow(self, self.status, self.clean)
        self.clean.clicked.connect(lambda: self.cleaning.start(self.selected_names() or self.accounts.creds.names()))
        self.cleaning.finished.connect(self.refresh)
        self.test.clicked.connect(lambda: self.check([]))
        self.remove.clicked.connect(self.remove_selected)
        close.clicked.connect(self.accept)
        self.refresh()
        if self.accounts.creds.names():  # the state's figures may be days old: ask Kaggle now
            self.check([])

    # -- showing ---------------------------------------------------------------------------
    def refresh(self) -> None:
        self.warning.setText(global_token_note() or "")
        self.warning.setVisible(bool(self.warning.text()))
        views = self.accounts.views()
        self.table.setRowCount(len(views))
        for i, v in enumerate(views):
            self.table.setItem(i, 0, QTableWidgetItem(v.username))
            key = QTableWidgetItem(key_status_text(v))
            key.setToolTip("\n".join(x for x in (auth_text(v), v.key_reason or "") if x))
            key.setData(Qt.ItemDataRole.UserRole, v.key_status)
            self._colour_key(key)
            self.table.setItem(i, 1, key)
            self.table.setCellWidget(i, 2, quota_bar(v))
            holds = ", ".join(d.label or d.ref for d in v.holds) or t("ничего", "nothing")
            item = QTableWidgetItem(holds)
            item.setToolTip("\n".join(d.ref for d in v.holds))
            self.table.setItem(i, 3, item)
            kernels = ", ".join(f"{k.get('kernel_slug')} ({k['state']})" for k in v.kernels[:3]) or "—"
            self.table.setItem(i, 4, QTableWidgetItem(kernels))
        if not views:
            self.status.setText(t("Аккаунтов нет: добавьте токен API («Добавить токен…»).",
                                  "No accounts: add an API token («Добавить токен…», Add token)."))

    @staticmethod
    def _colour_key(key: QTableWidgetItem) -> None:
        status = key.data(Qt.ItemDataRole.UserRole)
        if status in STATUS_COLOR:
            key.setForeground(QColor(palette.color(STATUS_COLOR[status])))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event) and hasattr(self, "table"):  # not while being built
            palette.set_style(self.warning, palette.style("warning"))
            for row in range(self.table.rowCount()):
                key = self.table.item(row, 1)
                if key is not None:
                    self._colour_key(key)

    def selected_names(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [self.table.item(r, 0).text() for r in rows if self.table.item(r, 0)]

    # -- actions -----------------------------------------------------------------------------
    def add_from_files(self, files: list[str] | None = None) -> None:
        if not files:
            files, _ = QFileDialog.getOpenFileNames(self, t("Файлы kaggle.json", "kaggle.json files"),
                                                    str(Path.home()), "kaggle.json (*.json)")
        if not files:
            return
        try:
            names = self.accounts.add_json(*[Path(f) for f in files])
        except CredentialsError as e:
            self.status.setText(str(e))
            return
        self.refresh()
        self.check(names)

    def add_by_hand(self, token: bool = False) -> None:
        dlg = AddByHandDialog(self, token=token)
        if dlg.exec() != QDialog.DialogCode.Accepted or dlg.credential is None:
            return
        self.add_credential(dlg.credential)

    def add_credential(self, credential: Credential) -> None:
        names = self.accounts.add(credential)
        self.refresh()
        self.check(names)

    def check(self, names: list[str]) -> None:
        """Test keys and refresh quotas in the background ([] = every account)."""
        self._busy += 1
        self.test.setEnabled(False)
        self.status.setText(t("Проверка на Kaggle…", "Asking Kaggle…"))

        def work() -> object:
            store = KaggleStore()  # this thread's own connection to the state
            try:
                accounts = Accounts(store)
                return [accounts.check(n) for n in (names or accounts.creds.names())]
            finally:
                store.close()

        run_in_thread(work, self._checked, self, name="kaggle-accounts")

    def _checked(self, result: object) -> None:
        self._busy -= 1
        if not self._own_store and self._closed:
            return
        self.test.setEnabled(self._busy == 0)
        if isinstance(result, Exception):
            self.status.setText(str(result))
        else:
            # One line per message: a global token gives every account the same one.
            by_message: dict[str, list[str]] = {}
            for r in result:  # type: ignore[attr-defined]
                by_message.setdefault(r.message, []).append(r.username)
            self.status.setText("\n".join(f"{', '.join(names)}: {m}" for m, names in by_message.items()))
        self.refresh()
        self.checked.emit()

    def remove_selected(self, confirm: bool = True) -> None:
        names = self.selected_names()
        if not names:
            return
        busy = [leg["run_id"] for leg in self.store.legs_in_flight() if leg["account"] in names]
        question = t(f"Удалить {', '.join(names)} и их ключи из лаборатории? Файлы на Kaggle останутся.",
                     f"Remove {', '.join(names)} and their keys from the lab? Files on Kaggle stay.")
        if busy:  # without the key the lab cannot follow these kernels until the account is added again
            question += t(f"\n\nНа этих аккаунтах идут прогоны ({', '.join(busy)}): без ключа лаборатория не "
                          "сможет следить за ними и скачать результаты, пока аккаунт не добавят снова.",
                          f"\n\nRuns are going on these accounts ({', '.join(busy)}): without the key the lab "
                          "cannot follow them or download their outputs until the account is added again.")
        if confirm and QMessageBox.question(self, t("Удалить аккаунты", "Remove accounts"),
                                            question) != QMessageBox.StandardButton.Yes:
            return
        for n in names:
            self.accounts.remove(n)
        self.refresh()

    def done(self, result: int) -> None:  # closing: release our state connection
        if self._own_store and not self._closed:
            self.store.close()
        self._closed = True
        super().done(result)


__all__ = ["AccountsDialog", "AddByHandDialog", "quota_bar"]
