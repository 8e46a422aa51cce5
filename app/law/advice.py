"""The law's lines in the «Как выбрать размер» panel, where the guide's rules of thumb stand:
for the form's N and D the predicted held-out loss with its interval; for the compute the run
will spend (C = 6·N·D) the compute-optimal N and D by the lab's fit beside the guide's 20
tokens a weight; «Когда расти»: what holds this size back by the fit. Each says what it rests
on («по 12 прогонам лабы, ±0,03»). When the fit is not enough, one line says so and where
the ladder is.

The fit costs about a second (its bootstrap); `LawAdvisor` keeps it per data set and
recomputes it in a thread of its own when the history's ended runs change, so the form never
waits on it (until then its line says the law is being counted).
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..base.i18n import t
from ..base.numbers import count_text, counted, decimal_text
from ..runs.registry import Registry
from .fit import Assessment, Law, assess
from .points import lab_facts, select

log = logging.getLogger(__name__)

GUIDE_TOKENS_PER_WEIGHT = 20
NEAR = 1.25   # within this factor of the optimum (and inside its interval) the size is «near it»


@dataclass(frozen=True)
class AdviceLine:
    key: str
    label: str
    value: str
    note: str
    level: str = "ok"


def _basis(a: Assessment, spread: float | None = None) -> str:
    runs = len(a.points)
    pm = f", ±{decimal_text(spread, 2)}" if spread is not None else ""
    return t(f"по {counted(runs, ('прогону', 'прогонам', 'прогонам'), ('run', 'runs'), 'ru')} лабы{pm}",
             f"from {runs} of the lab's runs{pm}")


def _optimal_samples(a: Assessment, compute: float) -> np.ndarray:
    rows = []
    for s in a.samples if a.samples is not None else []:
        n, _ = Law(*s).optimal(compute)
        if math.isfinite(n) and n > 0:
            rows.append(n)
    return np.array(rows)


def advice_lines(a: Assessment | None, n: int, d: int, unique_tokens: int = 0) -> list[AdviceLine]:
    """The law's lines for a run of `n` weights trained on `d` tokens."""
    if a is None:
        return [AdviceLine("law", t("Закон лабы", "The lab's law"), "…", t("считается по прогонам лабы",
                                                                           "being fitted to the lab's runs"))]
    if not a.enough or a.law is None:
        return [AdviceLine("law", t("Закон лабы", "The lab's law"), "—", t(
            f"пока мало, чтобы советовать ({counted(len(a.points), ('прогон', 'прогона', 'прогонов'), ('run', 'runs'), 'ru')} на этих данных): лестницу "
            "прогонов, которая его измерит, покажет `ternit law` и поставит в очередь `ternit law --queue`",
            f"not enough to advise yet ({counted(len(a.points), ('прогон', 'прогона', 'прогонов'), ('run', 'runs'), 'en')} on this data): `ternit law` shows "
            "the ladder of runs that would measure it, `ternit law --queue` queues it"),
            "warning")]
    loss, interval = a.predict(n, d) or (float("nan"), None)
    spread = interval.width / 2 if interval else None
    lines = [AdviceLine("law_loss", t("Закон лабы: val loss", "The lab's law: val loss"), decimal_text(loss, 2),
                        _basis(a, spread) + " (E + A/N^α + B/D^β)")]
    compute = 6.0 * n * d
    n_opt, d_opt = a.law.optimal(compute)
    n_guide = math.sqrt(compute / (6.0 * GUIDE_TOKENS_PER_WEIGHT))
    spread_n = _optimal_samples(a, compute)
    low, high = (np.percentile(spread_n, [2.5, 97.5]) if len(spread_n) else (n_opt, n_opt))
    lines.append(AdviceLine(
        "law_optimum", t("Оптимум для этих вычислений", "Optimum for this compute"),
        t(f"N ≈ {count_text(n_opt, sig=2)}, D ≈ {count_text(d_opt, sig=2)}",
          f"N ≈ {count_text(n_opt, sig=2)}, D ≈ {count_text(d_opt, sig=2)}"),
        t(f"{_basis(a)}, N от {count_text(low, sig=2)} до {count_text(high, sig=2)}; по справке (20 токенов на вес): "
          f"N ≈ {count_text(n_guide, sig=2)}, D ≈ {count_text(20 * n_guide, sig=2)}",
          f"{_basis(a)}, N {count_text(low, sig=2)} to {count_text(high, sig=2)}; the guide (20 tokens per weight): "
          f"N ≈ {count_text(n_guide, sig=2)}, D ≈ {count_text(20 * n_guide, sig=2)}")))
    lines.append(_grow_line(a, n, d_opt, low, high, unique_tokens))
    return lines


def _grow_line(a: Assessment, n: int, d_opt: float, low: float, high: float, unique_tokens: int) -> AdviceLine:
    label = t("Когда расти", "When to grow")
    if unique_tokens and d_opt > unique_tokens:
        return AdviceLine("law_grow", label, t("упирается в данные", "data-limited"), t(
            f"оптимуму нужно ≈{counted(d_opt, ('токен', 'токена', 'токенов'), ('token', 'tokens'), 'ru', sig=2)}, а в данных {count_text(unique_tokens, sig=2)}: "
            f"больше данных поможет больше, чем рост ({_basis(a)})",
            f"the optimum wants ≈{count_text(d_opt, sig=2)} tokens and the data holds {count_text(unique_tokens, sig=2)}: "
            f"more data helps more than growing ({_basis(a)})"), "warning")
    if n < low and n * NEAR < high:
        return AdviceLine("law_grow", label, t("упирается в размер", "size-limited"), t(
            f"при этих вычислениях модель больше даст меньшую потерю: пора расти ({_basis(a)})",
            f"for this compute a bigger model reaches a lower loss: time to grow ({_basis(a)})"))
    if n > high and n > low * NEAR:
        return AdviceLine("law_grow", label, t("упирается в токены", "token-limited"), t(
            f"модель больше оптимума для этих вычислений: учить дольше выгоднее, чем расти ({_basis(a)})",
            f"the model is bigger than this compute's optimum: training longer pays more than growing ({_basis(a)})"))
    return AdviceLine("law_grow", label, t("размер близок к оптимуму", "near the optimum"), t(
        f"для этих вычислений размер и длина в равновесии ({_basis(a)})",
        f"for this compute the size and the length are in balance ({_basis(a)})"))


class LawAdvisor:
    """The form's law lines, with each data set's assessment kept and refitted in a thread
    when the history's ended runs change."""

    def __init__(self, registry: Registry, fit: Callable[[list], Assessment] = assess,
                 on_ready: Callable[[], object] | None = None) -> None:
        self.registry = registry
        self._fit = fit
        self.on_ready = on_ready  # told (from the fitting thread) when a new fit is there
        self._lock = threading.Lock()
        self._done: dict[str, tuple[tuple, Assessment]] = {}
        self._busy: set[str] = set()

    def _key(self) -> tuple:
        ended = [r for r in self.registry.list_runs() if r.ended]
        return (len(ended), max((r.ended_at or 0.0 for r in ended), default=0.0))

    def assessment(self, data_id: str, wait: bool = False) -> Assessment | None:
        """The data set's assessment, or None while it is being fitted (`wait`: fit it here)."""
        key = self._key()
        with self._lock:
            hit = self._done.get(data_id)
            if hit is not None and hit[0] == key:
                return hit[1]
            started = data_id not in self._busy
            self._busy.add(data_id)
        if wait:
            self._compute(data_id, key)
            done = self._done.get(data_id)
            return done[1] if done is not None else None
        if started:
            threading.Thread(target=self._compute, args=(data_id, key), daemon=True, name="law-fit").start()
        return hit[1] if hit is not None else None

    def _compute(self, data_id: str, key: tuple) -> None:
        try:
            points = select(lab_facts(self.registry), data_id=data_id).points
            result = self._fit(points)
            with self._lock:
                self._done[data_id] = (key, result)
            if self.on_ready is not None:
                self.on_ready()
        except (OSError, ValueError, sqlite3.Error) as e:  # a folder unreadable, the state closed: no advice
            log.warning("the lab's law could not be fitted for %s: %s", data_id, e)
        finally:
            with self._lock:
                self._busy.discard(data_id)

    def lines(self, data_id: str, n: int, d: int, unique_tokens: int = 0) -> list[AdviceLine]:
        return advice_lines(self.assessment(data_id), n, d, unique_tokens)
