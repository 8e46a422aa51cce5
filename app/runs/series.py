"""The loss plot's data: train loss per step, validation with its confidence band, for a
run and its ancestors (a continued run is one curve with its parent).

Markers show where the data changed (validation starts anew: eval points carry a
`segment` number that grows there), where a run paused, and where a new leg began.
A leg resumed from an earlier step than its parent reached replaces the parent's later
points, as does a run resumed in place (`--resume latest`) after its last checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .events import Event, iter_events
from .registry import Registry, RunRecord

DATA_CHANGED = "data_changed"
PAUSE = "pause"
LEG = "leg"


@dataclass
class Marker:
    kind: str          # data_changed, pause, leg
    step: int
    tokens: int
    run_id: str
    seconds: float | None = None  # how long a pause lasted


@dataclass
class LossSeries:
    """Plain lists, in step order (the view turns them into arrays)."""

    run_ids: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_tokens: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_low: list[float] = field(default_factory=list)
    val_high: list[float] = field(default_factory=list)
    eval_segment: list[int] = field(default_factory=list)  # +1 wherever the data changed
    markers: list[Marker] = field(default_factory=list)
    # Where reading stopped, so a builder made over this series appends live events
    # correctly: the data seen last, the tokens per step and the current eval segment.
    data_id: str | None = None
    tokens_per_step: int | None = None
    segment: int = 0

    def truncate(self, step: int) -> None:
        """Drop every point after `step` (a resume from there redoes them)."""
        k = _count_upto(self.steps, step)
        del self.steps[k:], self.tokens[k:], self.loss[k:]
        k = _count_upto(self.eval_steps, step)
        del self.eval_steps[k:], self.eval_tokens[k:], self.val_loss[k:], self.val_low[k:], self.val_high[k:]
        del self.eval_segment[k:]
        self.markers = [m for m in self.markers if m.step <= step]


def _count_upto(values: list[int], step: int) -> int:
    # Points are in step order: count from the end (truncation usually drops a few).
    k = len(values)
    while k and values[k - 1] > step:
        k -= 1
    return k


def _f(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class SeriesBuilder:
    """Folds events into a LossSeries; `add` may be fed live events as they arrive.

    Call `begin_run(run_id)` before each run's events (oldest run first). A builder made
    over an existing series (e.g. one loaded from the history) carries on from its end.
    """

    def __init__(self, series: LossSeries | None = None) -> None:
        self.series = series if series is not None else LossSeries()
        self._run_id = self.series.run_ids[-1] if self.series.run_ids else ""
        self._new_leg = False

    def begin_run(self, run_id: str) -> None:
        s = self.series
        if run_id not in s.run_ids:
            self._new_leg = bool(s.run_ids)
            s.run_ids.append(run_id)
        self._run_id = run_id

    def _mark_leg(self, step: int) -> None:
        if self._new_leg:
            self._new_leg = False
            self.series.markers.append(Marker(LEG, step, self._tokens_at(step), self._run_id))

    def _tokens_at(self, step: int) -> int:
        s = self.series
        if s.steps and s.steps[-1] == step:
            return s.tokens[-1]
        return step * (s.tokens_per_step or 0)

    def add(self, ev: Event) -> None:
        s = self.series
        kind = ev.get("event")
        step = ev.get("step")
        if not isinstance(step, int):
            return
        if kind == "step":
            tokens = ev.get("tokens_seen")
            if not isinstance(tokens, int):
                tokens = step * (s.tokens_per_step or 0)
            if s.steps and step <= s.steps[-1]:
                s.truncate(step - 1)
            self._mark_leg(step - 1)
            s.steps.append(step)
            s.tokens.append(tokens)
            s.loss.append(_f(ev.get("loss")))
        elif kind == "eval":
            ci = ev.get("val_ci95") or [None, None]
            v = _f(ev.get("val_loss"))
            s.eval_steps.append(step)
            s.eval_tokens.append(self._tokens_at(step))
            s.val_loss.append(v)
            s.val_low.append(_f(ci[0]) if len(ci) > 0 else v)
            s.val_high.append(_f(ci[1]) if len(ci) > 1 else v)
            s.eval_segment.append(s.segment)
        elif kind == "start":
            s.truncate(step)
            self._mark_leg(step)
            if isinstance(ev.get("tokens_per_step"), int):
                s.tokens_per_step = ev["tokens_per_step"]
            data_id = ev.get("data_id") or _data_key(ev.get("config"))
            changed = bool(ev.get("data_changed")) or (
                s.data_id is not None and data_id is not None and data_id != s.data_id
            )
            if changed and (s.steps or s.eval_steps):
                s.segment += 1
                s.markers.append(Marker(DATA_CHANGED, step, self._tokens_at(step), self._run_id))
            if data_id is not None:
                s.data_id = data_id
        elif kind == "pause":
            s.markers.append(Marker(PAUSE, step, self._tokens_at(step), self._run_id, _f(ev.get("seconds"))))


def _data_key(config: Any) -> str | None:
    if not isinstance(config, dict):
        return None
    data = config.get("data") or {}
    return f"{data.get('dir')}|{','.join(sorted(data.get('constellations') or []))}" if data else None


def run_series(records: list[RunRecord]) -> LossSeries:
    """One curve through these runs (oldest first), each read from its events.jsonl."""
    b = SeriesBuilder()
    for rec in records:
        b.begin_run(rec.id)
        for ev in iter_events(rec.events_path):
            b.add(ev)
    return b.series


def loss_series(registry: Registry, run_id: str, with_parents: bool = True) -> LossSeries:
    """The run's curve; with its ancestors first when it continues another run."""
    records = registry.lineage(run_id) if with_parents else [registry.get(run_id)]
    return run_series(records)
