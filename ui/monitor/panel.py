"""The GPU monitor panel: every card, the machine, the trainer, warnings and the heat guard.

The window wires it with four calls: `start()`, `set_trainer_pid(pid)` when a local run
starts, `on_step_event(event)` for each trainer `step` event (its `mem_alloc_mb` and
`mem_peak_mb` are shown beside what the card reports), and `set_run(run_dir, local)` so the
heat guard knows where to put PAUSE. Sampling runs in a thread (ui.monitor.bridge); the
texts, levels and warnings come from app.gpu.present; this file only lays them out.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.base.i18n import current_language, t
from app.gpu import present
from app.gpu import settings as monitor_settings
from app.gpu.heat_guard import PAUSED, GuardStatus, HeatGuard
from app.gpu.heat_guard import status_text as guard_text
from app.gpu.history import History
from app.gpu.sampler import Sampler
from app.gpu.samples import OK, Snapshot
from ui.base import palette, wheel_guard
from ui.monitor.bridge import SamplerBridge
from ui.monitor.gpu_card import GpuCard

HISTORY_S = 600.0  # the plot's last ten minutes


class MonitorPanel(QWidget):
    pause_changed = Signal(bool)  # the heat guard paused (True) or resumed (False) the run
    alerts_changed = Signal(list)  # [app.gpu.present.Alert], when the set of warnings changes

    def __init__(self, sampler: Sampler | None = None,
                 settings: monitor_settings.MonitorSettings | None = None,
                 parent: QWidget | None = None, history_s: float = HISTORY_S,
                 save_settings: bool = True) -> None:
        super().__init__(parent)
        self.sampler = sampler if sampler is not None else Sampler()
        self.settings = settings if settings is not None else monitor_settings.load()
        self._save_settings = save_settings
        self.history = History(history_s)
        self.watch = present.RunWatch()
        self.bridge = SamplerBridge(self.sampler, self.settings.interval_s, self)
        self.bridge.sampled.connect(self.show_snapshot)
        self.cards: dict[int, GpuCard] = {}
        self.last_snapshot: Snapshot | None = None
        self.alerts: list[present.Alert] = []
        self.run_dir: Path | None = None
        self.run_is_local = False
        self.guard: HeatGuard | None = None
        self.guard_status: GuardStatus | None = None
        self._history_s = history_s
        self._alloc_on_a_card = False
        self._stale = False  # a sample arrived while hidden: render it when shown

        self.status_label = QLabel(t("Опрос видеокарт…", "Reading the GPUs…"))
        self.status_label.setWordWrap(True)
        self.cards_box = QVBoxLayout()
        self.host_label = QLabel()
        self.trainer_label = QLabel(present.trainer_text(None))
        self.trainer_label.setWordWrap(True)
        self.trainer_alloc_label = QLabel()
        self.trainer_alloc_label.setWordWrap(True)
        self.alerts_label = QLabel()
        self.alerts_label.setWordWrap(True)
        self.awake_label = QLabel()  # whether the PC is kept awake (app.runs.awake), set by the window
        self.awake_label.setWordWrap(True)
        self._paint()
        self.alerts_label.setVisible(False)

        guard_row = self._guard_row()

        layout = QVBoxLayout(self)
        layout.addWidget(self.status_label)
        layout.addLayout(self.cards_box)
        layout.addWidget(self.host_label)
        layout.addWidget(self.trainer_label)
        layout.addWidget(self.trainer_alloc_label)
        layout.addWidget(self.alerts_label)
        layout.addWidget(self.awake_label)
        layout.addLayout(guard_row)
        layout.addWidget(self.guard_label)
        layout.addStretch(1)

        self.guard_check.toggled.connect(self._guard_settings_changed)
        self.guard_threshold.valueChanged.connect(self._guard_settings_changed)
        self.guard_hold.valueChanged.connect(self._guard_settings_changed)
        self._update_guard_label()
        wheel_guard.guard(self)  # the wheel scrolls the tab, not the guard's numbers

    def _paint(self) -> None:
        palette.set_style(self.alerts_label, palette.style("error", "font-weight: bold;"))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        super().changeEvent(event)
        if palette.changed(event):  # the cards follow on their own
            self._paint()

    def _guard_row(self) -> QHBoxLayout:
        """The heat guard's switch, its threshold and how long the card may stay above it."""
        self.guard_check = QCheckBox(t("Защита от перегрева", "Heat guard"))
        self.guard_check.setToolTip(t(
            "Для локального прогона: если карта держится на заданной температуре или выше "
            "дольше заданного времени, обучение встаёт на паузу между шагами (файл PAUSE в "
            "папке прогона) и продолжается, когда карта остынет на 5 °C ниже порога. "
            "Пауза отмечается на графике потерь.",
            "For a local run: when the card stays at or above the set temperature for longer "
            "than the set time, training pauses between steps (a PAUSE file in the run folder) "
            "and goes on once the card is 5 °C below the threshold. The loss plot marks the "
            "pause."))
        self.guard_threshold = QSpinBox()
        self.guard_threshold.setRange(50, 105)
        self.guard_threshold.setSuffix(" °C")
        self.guard_hold = QDoubleSpinBox()
        self.guard_hold.setRange(0, 3600)
        self.guard_hold.setDecimals(0)
        self.guard_hold.setSuffix(t(" с", " s"))
        self.guard_check.setChecked(self.settings.heat_guard)
        self.guard_threshold.setValue(int(self.settings.guard_threshold_c))
        self.guard_hold.setValue(self.settings.guard_hold_s)
        self.guard_label = QLabel()
        self.guard_label.setWordWrap(True)
        guard_row = QHBoxLayout()
        guard_row.addWidget(self.guard_check)
        guard_row.addWidget(QLabel(t("порог", "at")))
        guard_row.addWidget(self.guard_threshold)
        guard_row.addWidget(QLabel(t("дольше", "for")))
        guard_row.addWidget(self.guard_hold)
        guard_row.addStretch(1)
        return guard_row

    # -- what the window calls -------------------------------------------------------------------

    def start(self, interval_s: float | None = None) -> None:
        """Start sampling (once a second by default) in the background."""
        self.bridge.start(interval_s)

    def stop(self) -> None:
        """Stop sampling. The heat guard's own pause is lifted too: with no one watching
        the card, nothing would ever lift it (the window closed with «keep training» left
        the trainer waiting on PAUSE until its time limit)."""
        self.bridge.stop()
        if self.guard is not None:
            self._release_guard()

    def set_trainer_pid(self, pid: int | None) -> None:
        """The local trainer's process (None when it ends): its CPU, RAM and GPU memory.

        Calling it again with the same pid changes nothing. None also lifts the heat guard's
        pause, so a stopped run does not leave a PAUSE behind for its next leg.
        """
        if pid == self.watch.pid:
            return
        self.sampler.set_trainer_pid(pid)
        self.watch.attach(pid, time.time())
        self.trainer_alloc_label.clear()
        if pid is None and self.guard is not None:
            self._release_guard()

    def on_step_event(self, event: dict[str, Any]) -> None:
        """The trainer's latest `step` event (from events.jsonl)."""
        self.watch.on_step(event)
        self._update_alloc_label()

    def set_run(self, run_dir: Path | str | None, local: bool = True) -> None:
        """The run the heat guard may pause (only a local one); None when it ends.

        The same run again changes nothing (a pause in progress stays).
        """
        new_dir = Path(run_dir) if run_dir is not None else None
        if new_dir == self.run_dir and local == self.run_is_local:
            return
        if self.guard is not None:
            self._release_guard()
        self.guard, self.guard_status = None, None
        self.run_dir = new_dir
        self.run_is_local = local
        self._make_guard()

    # -- sampling ------------------------------------------------------------------------------

    def show_snapshot(self, snap: Snapshot) -> None:
        """Show one sample (called in the UI thread for each sample of the bridge)."""
        self.last_snapshot = snap
        self.history.add(snap)
        lang = current_language()  # once per update: it may read the settings file
        if self.isVisible():
            self._render(snap, lang)
        else:  # a hidden tab: keep the history, warnings and heat guard; draw when shown
            self._stale = True
        alerts = present.warnings(snap, self.watch, time.time(), lang)
        if alerts != self.alerts:
            self.alerts = alerts
            self.alerts_label.setText("\n".join("⚠ " + a.text for a in alerts))
            self.alerts_label.setVisible(bool(alerts))
            self.alerts_changed.emit(list(alerts))
        self._feed_guard(snap, lang)

    def _render(self, snap: Snapshot, lang: str) -> None:
        self._stale = False
        self.status_label.setText(present.status_text(snap, lang))
        self.status_label.setVisible(snap.status != OK)
        gpus = snap.gpus if snap.status == OK else []
        if sorted(self.cards) != [g.index for g in gpus]:
            self._rebuild_cards([g.index for g in gpus])
        single = len(gpus) == 1
        self._alloc_on_a_card = False
        for gpu in gpus:
            card = self.cards[gpu.index]
            view = present.gpu_view(gpu, self.watch, single, lang)
            self._alloc_on_a_card |= view.shows_allocated
            card.show_view(view, gpu.slowdown_c, lang)
            card.show_history(self.history.series(gpu.index, snap.time))
        self.host_label.setText(present.host_text(snap.host, lang))
        self.trainer_label.setText(present.trainer_text(snap.trainer, lang))
        self._update_alloc_label(lang)

    def _rebuild_cards(self, indices: list[int]) -> None:
        for card in self.cards.values():
            self.cards_box.removeWidget(card)
            card.deleteLater()
        self.cards = {}
        for index in indices:
            card = GpuCard(index, self._history_s, self)
            self.cards[index] = card
            self.cards_box.addWidget(card)

    def _update_alloc_label(self, lang: str | None = None) -> None:
        """The trainer's own numbers, when no card shows them (e.g. it is not listed)."""
        alloc, peak = self.watch.allocated_mb()
        if self.watch.pid is None or alloc is None or self._alloc_on_a_card:
            self.trainer_alloc_label.clear()
            return
        lang = lang or current_language()
        text = t("Выделено тренером (его тензоры, без контекста CUDA и кэша): ",
                 "Allocated by the trainer (its tensors, without the CUDA context and cache): ",
                 lang)
        text += present.mb(alloc, lang)
        if peak is not None:
            text += t(f", пик {present.mb(peak, lang)}", f", peak {present.mb(peak, lang)}", lang)
        self.trainer_alloc_label.setText(text)

    # -- heat guard ------------------------------------------------------------------------------

    def _guard_settings_changed(self, *_: Any) -> None:
        s = self.settings
        s.heat_guard = self.guard_check.isChecked()
        s.guard_threshold_c = float(self.guard_threshold.value())
        s.guard_hold_s = float(self.guard_hold.value())
        if self._save_settings:
            try:
                monitor_settings.save(s)
            except OSError as exc:
                self.guard_label.setText(t(f"Не удалось сохранить настройки: {exc}",
                                           f"Could not save the settings: {exc}"))
        if not s.heat_guard:
            if self.guard is not None:
                self._release_guard()
            self.guard, self.guard_status = None, None
        elif self.guard is None:
            self._make_guard()
        else:  # new limits apply to the running guard; its state (e.g. paused) stays
            self.guard.threshold_c, self.guard.hold_s = s.guard_threshold_c, s.guard_hold_s
        self._update_guard_label()

    def _release_guard(self) -> None:
        """Lift the guard's own pause (if any) and say so."""
        was_paused = self.guard.state == PAUSED
        self.guard.release()
        self.guard_status = None
        if was_paused:
            self.pause_changed.emit(False)
        self._update_guard_label()

    def _make_guard(self) -> None:
        s = self.settings
        if s.heat_guard and self.run_dir is not None and self.run_is_local:
            self.guard = HeatGuard(self.run_dir, s.guard_threshold_c, s.guard_hold_s,
                                   s.guard_hysteresis_c)
        self._update_guard_label()

    def _feed_guard(self, snap: Snapshot, lang: str | None = None) -> None:
        # Only while a trainer runs: a finished run's folder is not paused by a hot card.
        if self.guard is None or snap.status != OK or self.watch.pid is None:
            return
        try:
            self.guard_status = self.guard.update_from(snap)
        except OSError as exc:  # the run folder is gone or read-only: say so, keep monitoring
            self.guard_label.setText(t(f"Защита от перегрева не смогла записать PAUSE: {exc}",
                                       f"The heat guard could not write PAUSE: {exc}"))
            return
        if self.guard_status.action == "paused":
            self.pause_changed.emit(True)
        elif self.guard_status.action == "resumed":
            self.pause_changed.emit(False)
        self._update_guard_label(lang)

    def _update_guard_label(self, lang: str | None = None) -> None:
        if self.settings.heat_guard and self.guard is None:
            self.guard_label.setText(t(
                "Защита от перегрева включится с локальным прогоном",
                "The heat guard acts on a local run once one is running", lang))
            return
        self.guard_label.setText(guard_text(self.guard, self.guard_status, lang))

    # -- Qt ------------------------------------------------------------------------------------

    def showEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if self._stale and self.last_snapshot is not None:
            self._render(self.last_snapshot, current_language())

    def closeEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        self.stop()
        super().closeEvent(event)
