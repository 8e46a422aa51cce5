"""The «Новый прогон» form: widgets built from app.form.fields' table, mirroring app.form.run_form.RunForm.

Every rule (validation, locking, what Start needs, the sizing numbers) is RunForm's; this
view passes edits in and shows what RunForm says.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import t
from app.base.numbers import count_text, field_text, parse_number
from app.form import fields as F
from app.form.checks import RUNNING
from app.form.run_form import ContinueFrom, FormContext, RunForm
from app.form.tooltips import wrap_tip
from ui.base import palette, settings, wheel_guard
from ui.form.help_page import HelpPage
from ui.form.queue_buttons import QueueButtons

log = logging.getLogger(__name__)


class RunFormView(QWidget):
    """Emits `start_requested(run_json_dict)`; `prepare_requested(constellations)` when the
    ticked data has no prepared folder yet."""

    start_requested = Signal(dict)
    queue_requested = Signal(dict, str)  # the form's run.json, and where ("" = the form's machine, "any")
    series_requested = Signal(dict)  # the form's run.json, to vary in «Серия…»
    search_requested = Signal(dict)  # the form's run.json, to search in «Поиск…»
    prepare_requested = Signal(list)
    changed = Signal()

    def __init__(self, ctx: FormContext | None = None, parent: QWidget | None = None,
                 continue_provider: Callable[[str], ContinueFrom | None] | None = None) -> None:
        super().__init__(parent)
        self.form = RunForm(ctx)
        self.continue_provider = continue_provider
        self.inputs: dict[str, QWidget] = {}
        self.labels: dict[str, QLabel] = {}
        self.messages: dict[str, QLabel] = {}
        self._constellation_boxes: dict[str, QCheckBox] = {}
        self.help_buttons: dict[str, QToolButton] = {}
        self.help_page: HelpPage | None = None
        self._updating = False
        self.start_shortcut = ""  # the window's key for «Старт», said in its tooltip
        self._why = ""  # every reason «Старт» cannot go now ("": it can)
        self._build()
        self.refresh()

    # -- building ----------------------------------------------------------------------

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        heading = QLabel(t("Новый прогон", "New run"))
        heading.setStyleSheet("font-size: 16px; font-weight: bold;")
        outer.addWidget(heading)
        self.groups: dict[str, QGroupBox] = {}
        for section in ("run", "data", "model", "training", "advanced"):
            box = QGroupBox(F.section_title(section))
            layout = self._collapsible(box, section) if section in F.COLLAPSED_SECTIONS else QFormLayout(box)
            layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
            for spec in F.FIELDS:
                if spec.section != section:
                    continue
                self._add_field(layout, spec)
            if section == "model":
                self.model_locked_note = QLabel(t(
                    "Модель — из чекпоинта: веса другой формы не загрузить, поэтому поля заблокированы.",
                    "The model is the checkpoint's: weights of another shape cannot be loaded, so these "
                    "fields are locked."))
                self.model_locked_note.setWordWrap(True)
                self.model_locked_note.setStyleSheet(palette.style("muted", "font-style: italic;"))
                layout.insertRow(0, self.model_locked_note)
            self.groups[section] = box
            outer.addWidget(box)
        # The live «Как выбрать размер» panel.
        self.size_box = QGroupBox(F.section_title("sizing"))
        self.size_layout = QVBoxLayout(self.size_box)
        self.size_layout.setSpacing(4)
        self.size_box.setToolTip(t(
            "Около 20 токенов данных на вес: 27,7 млн весов хотят около 550 млн токенов; большая "
            "модель на тех же данных недоучится. Время — оценка, не замер: скорость для нового размера "
            "пересчитана от замера. Расти, когда валидация вышла на плато и данных хватает; пока "
            "валидация падает, дешевле учить дольше.",
            "About 20 tokens of data per weight: 27.7 M weights want about 550 M tokens; a bigger "
            "model on the same data will be under-trained. Time is an estimate, not a measurement: "
            "the speed for a new size is recomputed from a measurement. Grow when validation has "
            "reached a plateau and there is enough data; while validation still falls, training "
            "longer is cheaper."))
        outer.addWidget(self.size_box)
        outer.addStretch(1)
        # Start, and why it cannot start: a footer the window keeps in sight under the form.
        self.footer = QWidget()
        foot = QVBoxLayout(self.footer)
        foot.setContentsMargins(6, 2, 6, 4)
        row = QHBoxLayout()
        self.prepare_button = QPushButton(t("Подготовить данные", "Prepare data"))
        self.prepare_button.setToolTip(t(
            "Обучить токенизатор и разрезать текст отмеченных созвездий на train/val (ternit data prepare)",
            "Train the tokenizer and split the ticked constellations' text into train/val (ternit data prepare)"))
        self.prepare_button.clicked.connect(lambda: self.prepare_requested.emit(list(self.form.values["constellations"])))
        self.start_button = QPushButton(t("Старт", "Start"))
        self.start_button.setStyleSheet("font-weight: bold; padding: 6px 18px;")
        self.start_button.clicked.connect(self._start_clicked)
        self.queue_buttons = QueueButtons(self)  # «В очередь», «Серия…» (ui/form/queue_buttons.py)
        row.addWidget(self.prepare_button)
        row.addStretch(1)
        row.addWidget(self.queue_buttons)
        row.addWidget(self.start_button)
        foot.addLayout(row)
        self.why = QLabel()
        self.why.setWordWrap(True)
        self.why.setStyleSheet(palette.style("error"))
        foot.addWidget(self.why)
        self._order_constellation_tabs()
        # F1 on a field: its help page (the tooltip's last line says so).
        help_key = QShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents), self)
        help_key.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        help_key.activated.connect(self._help_for_focus)
        wheel_guard.guard(self)  # the wheel scrolls the form, not the combo box under it
        app = QApplication.instance()
        if app is not None:
            app.focusChanged.connect(self._focus_moved)

    def _collapsible(self, box: QGroupBox, section: str) -> QFormLayout:
        """A section folded under a ▸/▾ button (its fields are rarely changed); returns the
        layout its fields go into."""
        box.setTitle("")
        outer = QVBoxLayout(box)
        outer.setContentsMargins(6, 2, 6, 2)
        self.advanced_toggle = QToolButton()
        self.advanced_toggle.setText(F.section_title(section))
        self.advanced_toggle.setCheckable(True)
        self.advanced_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.advanced_toggle.setAutoRaise(True)
        self.advanced_toggle.setToolTip(t(
            "Разогрев, спад скорости, затухание весов, обрезка градиента, точность: значения "
            "тренера по умолчанию подходят почти всегда",
            "Warm-up, rate decay, weight decay, gradient clipping, precision: the trainer's "
            "defaults suit almost every run"))
        self.advanced_body = QWidget()
        outer.addWidget(self.advanced_toggle)
        outer.addWidget(self.advanced_body)
        self.advanced_toggle.toggled.connect(self.set_advanced_open)
        self.advanced_toggle.clicked.connect(self._remember_open)  # the user's click, not a restore
        self.set_advanced_open(section in settings.open_sections(F.COLLAPSED_SECTIONS))
        return QFormLayout(self.advanced_body)

    def _remember_open(self) -> None:
        try:
            settings.save_open_sections({"advanced"} if self.advanced_open() else set())
        except OSError:  # a read-only config folder: it opens folded next time, nothing lost
            log.warning("could not remember the «Дополнительно» section's state", exc_info=True)

    def advanced_open(self) -> bool:
        return self.advanced_toggle.isChecked()

    def set_advanced_open(self, on: bool) -> None:
        """Unfold (or fold) «Дополнительно»."""
        if self.advanced_toggle.isChecked() != on:
            self.advanced_toggle.setChecked(on)  # comes back here through toggled
            return
        self.advanced_toggle.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.advanced_body.setVisible(on)

    def show_help(self, name: str) -> HelpPage:
        """«Подробнее»: the field's help page, in a window of its own."""
        if self.help_page is not None:
            self.help_page.close()
        self.help_page = HelpPage(name, self.form.default_of(name), self)
        self.help_page.show()
        return self.help_page

    def _help_for_focus(self) -> None:
        w = self.focusWidget()
        while w is not None and w is not self:
            for name, field in self.inputs.items():
                if field is w or name in self.help_buttons and self.help_buttons[name] is w:
                    self.show_help(name)
                    return
            w = w.parentWidget()

    def _add_field(self, layout: QFormLayout, spec: F.FieldSpec) -> None:
        name = spec.name
        label = QLabel(spec.label_text())
        self.labels[name] = label
        if name == "start_from":
            w = QWidget()
            row = QHBoxLayout(w)
            row.setContentsMargins(0, 0, 0, 0)
            self.scratch_radio = QRadioButton(t("с нуля", "from scratch"))
            self.continue_radio = QRadioButton(t("с чекпоинта", "from a checkpoint"))
            group = QButtonGroup(w)
            group.addButton(self.scratch_radio)
            group.addButton(self.continue_radio)
            row.addWidget(self.scratch_radio)
            row.addWidget(self.continue_radio)
            row.addStretch(1)
            self.scratch_radio.toggled.connect(self._start_from_toggled)
            widget: QWidget = w
        elif name == "checkpoint":
            combo = QComboBox()
            combo.activated.connect(lambda _i: self._checkpoint_chosen())
            widget = combo
        elif name == "constellations":
            w = QWidget()
            self.constellation_layout = QVBoxLayout(w)
            self.constellation_layout.setContentsMargins(0, 0, 0, 0)
            widget = w
            self._fill_constellations()
        elif spec.kind == "bool":
            box = QCheckBox(spec.label_text())
            box.toggled.connect(lambda on, n=name: self._edited(n, on))
            label = QLabel("")
            self.labels[name] = label
            widget = box
        elif spec.kind == "choice":
            combo = QComboBox()
            # Fixed options (the economical levels) are listed once, each with what it costs
            # as its own tooltip; the lab-dependent ones (GPU, machine) on every refresh.
            for i, (key, text) in enumerate(spec.option_choices()):
                combo.addItem(text, key)
                tip = spec.option_tooltip_text(key)
                if tip:
                    combo.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
            combo.activated.connect(lambda _i, n=name, c=combo: self._edited(n, c.currentData()))
            widget = combo
        else:
            edit = QLineEdit()
            edit.textEdited.connect(lambda text, n=name: self._typed(n, text))
            widget = edit
        self.inputs[name] = widget
        holder = QWidget()
        col = QVBoxLayout(holder)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(1)
        line = QHBoxLayout()
        line.addWidget(widget, 1)
        if spec.unit_text():
            line.addWidget(QLabel(spec.unit_text()))
        more = QToolButton()
        more.setText("?")
        more.setAutoRaise(True)
        more.setAccessibleName(t(f"Подробнее: {spec.label_text()}", f"More: {spec.label_text()}"))
        more.setToolTip(t(f"Подробнее о поле «{spec.label_text()}» (F1)",
                          f"More about «{spec.label_text()}» (F1)"))
        more.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Tab goes field to field; F1 opens it
        more.clicked.connect(lambda _=False, n=name: self.show_help(n))
        self.help_buttons[name] = more
        line.addWidget(more)
        col.addLayout(line)
        message = QLabel()
        message.setWordWrap(True)
        message.setVisible(False)
        col.addWidget(message)
        self.messages[name] = message
        layout.addRow(label, holder)  # its tooltip comes with the first refresh (_show_values)

    def _fill_constellations(self) -> None:
        _clear(self.constellation_layout)
        self._constellation_boxes.clear()
        names = list(self.form.ctx.constellations)
        names += [c for c in self.form.values["constellations"] if c not in names]
        if not names:
            empty = QLabel(t("Созвездий пока нет: добавьте данные («Лаборатория → Данные…»)",
                             "No constellations yet: add data (Lab → Data…)"))
            empty.setStyleSheet(palette.style("warning"))
            empty.setWordWrap(True)
            self.constellation_layout.addWidget(empty)
        for cname in names:
            tokens = self.form.ctx.constellations.get(cname)
            # All the constellation's tokens; «Данные» below counts the training part only.
            count = t(f"{count_text(tokens)} токенов всего", f"{count_text(tokens)} tokens in all") if tokens else t(
                "токены ещё не посчитаны", "tokens not counted yet")
            box = QCheckBox(f"{cname} — {count}")
            box.setToolTip(self.form.tooltip("constellations"))
            box.toggled.connect(lambda on, c=cname: self._constellation_toggled(c, on))
            self._constellation_boxes[cname] = box
            self.constellation_layout.addWidget(box)
        self._order_constellation_tabs()

    def _order_constellation_tabs(self) -> None:
        """Tab goes top to bottom: the constellation boxes (made after the other fields, and
        again whenever the list changes) came last in the focus chain, after «Старт» and even
        after the plot and the history."""
        before = self.inputs.get("checkpoint")
        if before is None:  # still building: _build orders them once every field is there
            return
        for box in self._constellation_boxes.values():
            if box.window() is not before.window():
                return
            QWidget.setTabOrder(before, box)
            before = box

    # -- edits -------------------------------------------------------------------------

    def _typed(self, name: str, text: str) -> None:
        # No `_updating` guard here: textEdited comes only from the user's keys, never from
        # setText, and a key dropped while a refresh ran came back as a lost letter.
        if F.spec(name).kind in ("int", "float"):
            self.form.set_text(name, text)
        else:
            self.form.set(name, text)
        self._hold_sizes_height()
        self.refresh(keep_text=name)

    def _hold_sizes_height(self) -> None:
        """While a field is typed in, the estimate keeps at least the height it has: an
        emptied number folded it to a line, the form grew shorter, its scroll area clamped
        the position and the form jumped up, the numbers being watched out of view. The
        space is given back when the field is left (`_focus_moved`)."""
        box = self.size_box
        box.setMinimumHeight(max(box.minimumHeight(), box.height() if box.isVisible() else 0))

    def _focus_moved(self, old: QWidget | None, new: QWidget | None) -> None:
        # Another control took the focus from a field: the space goes back. The focus gone
        # nowhere (another application's window came up) keeps it, the form where it was.
        if new is not None and old is not None and self.size_box.minimumHeight() and old in self.inputs.values():
            self.size_box.setMinimumHeight(0)

    def _edited(self, name: str, value: Any) -> None:
        if self._updating:
            return
        self.form.set(name, value)
        self.refresh()

    def _constellation_toggled(self, cname: str, on: bool) -> None:
        if self._updating:
            return
        self.form.toggle_constellation(cname, on)
        self.refresh()

    def _start_from_toggled(self) -> None:
        if self._updating:
            return
        if self.scratch_radio.isChecked():
            self.form.from_scratch()
        else:
            self.form.values["start_from"] = "checkpoint"
            self._checkpoint_chosen()
        self.refresh()

    def _checkpoint_chosen(self) -> None:
        combo: QComboBox = self.inputs["checkpoint"]  # type: ignore[assignment]
        run_id = combo.currentData()
        if run_id and self.continue_provider:
            info = self.continue_provider(run_id)
            if info is not None:
                self.continue_from(info)
                return
        self.refresh()

    def _start_clicked(self) -> None:
        if self.form.can_start():
            self.start_requested.emit(self.form.run_config())

    # -- public ------------------------------------------------------------------------

    def set_context(self, ctx: FormContext) -> None:
        """New choices (constellations, accounts, prepared data): values are kept."""
        self.form.ctx = ctx
        self._fill_constellations()
        self.refresh()

    def rename_constellation(self, old: str, new: str) -> None:
        self.form.rename_constellation(old, new)
        self._fill_constellations()
        self.refresh()

    def set_checkpoints(self, runs: list[tuple[str, str]]) -> None:
        """Runs that can be continued: (run id, label)."""
        combo: QComboBox = self.inputs["checkpoint"]  # type: ignore[assignment]
        current = self.form.values.get("checkpoint")
        combo.clear()
        combo.addItem(t("— выберите прогон —", "— pick a run —"), None)
        for run_id, label in runs:
            combo.addItem(label, run_id)
        if current:
            i = combo.findData(current)
            if i < 0:
                combo.addItem(current, current)
                i = combo.count() - 1
            combo.setCurrentIndex(i)

    def continue_from(self, info: ContinueFrom) -> None:
        """«Продолжить»: the form filled from the checkpoint, model locked, ready to start."""
        self.form.continue_from(info)
        combo: QComboBox = self.inputs["checkpoint"]  # type: ignore[assignment]
        if combo.findData(info.run_id) < 0:
            combo.addItem(info.label or info.run_id, info.run_id)
        combo.setCurrentIndex(combo.findData(info.run_id))
        self._fill_constellations()
        self.refresh()

    def load_config(self, cfg: dict[str, Any]) -> None:
        """Fill the form from a run.json (a retry after a failure)."""
        self.form.from_scratch()
        self.form.load_config(cfg)
        self.refresh()

    def refresh(self, keep_text: str | None = None) -> None:
        """Show what the form says now."""
        self._updating = True
        try:
            self._show_values(keep_text)
            self._show_issues()
            self._show_sizes()
        finally:
            self._updating = False
        self.changed.emit()

    def refresh_sizes(self) -> None:
        """«Как выбрать размер» shown again (the lab's law was fitted anew), the fields as they are."""
        self._show_sizes()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event) and hasattr(self, "why"):  # built: the new palette's colours
            self.model_locked_note.setStyleSheet(palette.style("muted", "font-style: italic;"))
            self.refresh()

    def _show_values(self, keep_text: str | None) -> None:
        form, v = self.form, self.form.values
        self.scratch_radio.setChecked(form.continuing is None and v["start_from"] == "scratch")
        self.continue_radio.setChecked(v["start_from"] == "checkpoint")
        self.inputs["checkpoint"].setEnabled(v["start_from"] == "checkpoint")
        self.model_locked_note.setVisible(form.continuing is not None)
        for cname, box in self._constellation_boxes.items():
            box.setChecked(cname in v["constellations"])
        for spec in F.FIELDS:
            name, w = spec.name, self.inputs.get(spec.name)
            if w is None:
                continue
            locked = form.locked(name)
            if isinstance(w, QLineEdit):
                text = form.texts.get(name)
                text = text if text is not None else ("" if v[name] is None else _plain(v[name]))
                # Only a text that differs is put back: setText on the field being typed
                # in (a tick's refresh) reset its cursor, selection and input method, and
                # the user's next letters went astray («nc-stop» became «nc-sto»). A number
                # typed another way («20000» for «20 000») is the same number: left as typed.
                if name != keep_text and w.text() != text and not _same_number(spec, w.text(), v[name]):
                    w.setText(text)
                w.setReadOnly(locked)
            elif isinstance(w, QCheckBox):
                w.setChecked(bool(v[name]))
                w.setEnabled(not locked)
            elif isinstance(w, QComboBox) and name in ("gpu", "machine"):
                choices = form.gpu_choices() if name == "gpu" else form.machine_choices()
                if [(w.itemData(i), w.itemText(i)) for i in range(w.count())] != choices:
                    w.clear()  # refilled only when they changed: every refresh did, at every key typed
                    for key, label in choices:
                        w.addItem(label, key)
                i = w.findData(v[name])
                if i < 0:
                    w.addItem(str(v[name]), v[name])
                    i = w.count() - 1
                w.setCurrentIndex(i)
            elif isinstance(w, QComboBox) and spec.options:
                w.setCurrentIndex(max(0, w.findData(v[name])))
                w.setEnabled(not locked)
            label = self.labels[name]
            label.setText("" if spec.kind == "bool" else spec.label_text())
            label.setStyleSheet(palette.style("locked_label") if locked else "")
            tip = form.tooltip(name)
            if locked:
                tip = wrap_tip(tip + t("\n\nЗаблокировано: берётся из чекпоинта.",
                                       "\n\nLocked: taken from the checkpoint."))
            for widget in (w, label):
                if widget.toolTip() != tip:  # set anew only when it changed: each one is rewrapped
                    widget.setToolTip(tip)

    def _show_issues(self) -> None:
        issues = self.form.issues()
        by_field: dict[str, list] = {}
        for issue in issues:
            by_field.setdefault(issue.field, []).append(issue)
        note = self.form.machine_note()
        for name, label in self.messages.items():
            found = by_field.get(name, [])
            lines = [i.text for i in found] + ([note] if name == "machine" and note else [])
            label.setVisible(bool(lines))
            label.setText("\n".join(lines))
            error = any(i.level == "error" for i in found)
            label.setStyleSheet(palette.style("error" if error else ("warning" if found else "muted")))
            w = self.inputs.get(name)
            if isinstance(w, QLineEdit):
                locked = (f"background: {palette.color('locked_bg')}; color: {palette.color('locked_fg')};"
                          if self.form.locked(name) else "")
                w.setStyleSheet(f"border: 1px solid {palette.color('error')};" if error else locked)
        blockers = [i.text for i in issues if i.level == "error"]
        running = [i.text for i in issues if i.level == RUNNING]
        self.start_button.setEnabled(not blockers and not running)
        self.queue_buttons.setEnabled(not blockers)  # a run going now is what the queue waits for
        shown = why = ""
        if blockers:
            why = t("Старт недоступен: ", "Start is disabled: ") + "; ".join(blockers)
            # Under the button the first reason and how many more (each is under its field,
            # all of them in the button's tooltip): the whole list took the form's room at a
            # small window, and the form shrank to a sliver above it.
            more = len(blockers) - 1
            shown = why if not more else (t("Старт недоступен: ", "Start is disabled: ") + blockers[0] + t(
                f" — и ещё {more} (у полей выше)", f" — and {more} more (by their fields above)"))
            self.why.setStyleSheet(palette.style("error"))
        elif running:  # the run just started: said as news under the button, the form left as it is
            shown = why = "; ".join(running)
            self.why.setStyleSheet(palette.style("note"))
        self.why.setText(shown)
        self._why = why
        self._show_start_tip()
        self.why.setVisible(bool(why))
        needs_prep = bool(self.form.values["constellations"]) and self.form.prepared_for_selection() is None
        self.prepare_button.setVisible(needs_prep)
        self.start_button.setText(t("Продолжить", "Continue") if self.form.continuing else t("Старт", "Start"))

    def _show_start_tip(self) -> None:
        """«Старт»'s tooltip: every reason it cannot start, else what it does and its key."""
        if self._why:
            self.start_button.setToolTip(self._why)
        else:
            key = f" ({self.start_shortcut})" if self.start_shortcut else ""
            self.start_button.setToolTip(t("Запустить обучение", "Start training") + key)

    def set_start_shortcut(self, key: str) -> None:
        """The window's key for «Старт», named in its tooltip (the menu's action follows the
        button through `changed`)."""
        self.start_shortcut = key
        self._show_start_tip()
        self.changed.emit()

    def _show_sizes(self) -> None:
        _clear(self.size_layout)
        colors = {"warning": palette.color("warning"), "error": palette.color("error"), "ok": palette.color("muted")}
        for row in self.form.size_rows():
            color = colors.get(row.level, colors["ok"])
            if row.key.startswith("advice"):
                text = f"<span style='color:{color}'>• {html.escape(row.note)}</span>"
            else:
                value_color = colors["error"] if row.level == "error" else palette.color("ink")
                text = (f"{html.escape(row.label)}: <b style='color:{value_color}'>{html.escape(row.value)}</b>"
                        + (f"<br><span style='color:{color}'>{html.escape(row.note)}</span>" if row.note else ""))
            label = QLabel(text)
            label.setWordWrap(True)
            label.setTextFormat(Qt.TextFormat.RichText)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.size_layout.addWidget(label)

    def size_text(self) -> str:
        """The panel as plain text (tests, accessibility)."""
        return "\n".join(f"{r.label}: {r.value} {r.note}".strip() for r in self.form.size_rows())


def _clear(layout: QVBoxLayout) -> None:
    """Empty a layout now: the old widgets are hidden at once (deleteLater alone would leave
    them painted under the new ones until the event loop comes round). Hidden, not given
    no parent: each would become a window of its own, and their going took the focus out of
    the field being typed in (the window lost its active state)."""
    while layout.count():
        item = layout.takeAt(0)
        w = item.widget()
        if w is not None:
            w.hide()
            w.deleteLater()


def _plain(value: Any) -> str:
    """A value as the field shows it: numbers as the interface language writes them
    («20 000», «0,001» / "20,000", "0.001"), which is how the form reads them back."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return field_text(value)
    return "" if value is None else str(value)


def _same_number(spec: F.FieldSpec, text: str, value: Any) -> bool:
    if spec.kind not in ("int", "float") or value is None:
        return False
    try:
        return parse_number(text, spec.kind) == value
    except ValueError:
        return False

