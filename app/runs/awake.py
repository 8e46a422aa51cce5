"""Whether this PC is kept awake now, in one line for the monitor: who holds the OS's "do not
sleep" request (the trainers training here, the queue runner between runs; trainer/run/awake.py),
or why nobody does, and what a battery changes.

The trainer says what it got in its `awake` event, right after `start`; the runner in its
lock note (app/queue/lock.py). Only the head of each events file is read: the event comes
early, and a long run's file is big.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import settings
from ..base.i18n import t
from .registry import Registry

HEAD_BYTES = 64 * 1024


def trainer_awake(events_path: Any) -> dict[str, Any] | None:
    """The last `awake` event in the head of a run's events file, or None."""
    try:
        with open(events_path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    found = None
    for line in head.splitlines():
        if b'"awake"' not in line:
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "awake":
            found = ev
    return found


def on_battery() -> bool | None:
    import psutil  # here: the window's first frame asks nothing of the OS

    try:
        battery = psutil.sensors_battery()
    except (psutil.Error, OSError, NotImplementedError):
        return None
    return None if battery is None else not battery.power_plugged


def awake_line(registry: Registry, runner_awake: dict[str, Any] | None = None) -> str:
    """The monitor's line. `runner_awake`: the queue runner's request, from its lock note."""
    if not settings.keep_awake():
        return t("Запрет сна выключен в настройках: ПК может уснуть во время обучения",
                 "Keeping the PC awake is off in the settings: it may sleep while training")
    holders, refused = [], []
    for rec in registry.active():
        if rec.target_kind != "local":
            continue
        ev = trainer_awake(rec.events_path)
        if ev is None:
            continue
        (holders if ev.get("held") else refused).append((f"«{rec.name}»", ev.get("how") or "", ev.get("why") or ""))
    if runner_awake is not None:
        (holders if runner_awake.get("held") else refused).append(
            (t("очередь", "the queue"), runner_awake.get("how") or "", runner_awake.get("why") or ""))
    if holders:
        who = ", ".join(f"{name} ({how})" if how else name for name, how, _ in holders)
        line = t(f"ПК не уснёт: запрет сна держит {who}; экран может погаснуть",
                 f"The PC will not sleep: {who} holds the request; the display may still sleep")
        if on_battery():
            line += t(" · на батарее: запрет действует, но при низком заряде система уснёт",
                      " · on battery: it holds, but a low battery still puts the PC to sleep")
        return line
    if refused:
        name, how, why = refused[0]
        return t(f"Запрет сна не получен ({name}): {why or how} — ПК может уснуть",
                 f"The sleep request was not granted ({name}): {why or how} — the PC may sleep")
    return t("Запрет сна сейчас не нужен: здесь ничего не обучается", "No sleep request now: nothing trains here")
