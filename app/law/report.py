"""What `ternit law` says (and the form's advice rests on): the lab's runs of one data set,
the law fitted to them with its intervals, the largest run predicted from the rest, and
either «enough» or the ladder that would make it so."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from ..base.i18n import t
from ..base.numbers import count_text, counted, decimal_text, loss_text
from ..runs.registry import Registry
from . import fit as law_fit
from .ladder import Ladder, propose
from .points import RunFacts, Selection, lab_facts, select

NIGHT_HOURS = 10.0  # with no Kaggle account: one night of this PC's card

WHY = {
    "too_few": ("меньше шести точек: пять параметров закона ещё не определить",
                "fewer than six points: the law's five parameters cannot be pinned down yet"),
    "no_fit": ("без самого большого прогона закон не подобрать", "the law cannot be fitted without the largest run"),
    "wide_prediction": ("интервал предсказания самого большого прогона шире {w}",
                        "the largest run's predicted interval is wider than {w}"),
    "wide_exponents": ("показатели α и β известны хуже, чем ±{e}", "the exponents α and β are known worse than ±{e}"),
    "missed": ("закон промахнулся мимо самого большого прогона: он не описывает эти прогоны",
               "the law missed the largest run: it does not describe these runs"),
}
LEFT_OUT = {
    "not_at_end": ("последняя оценка не в конце расписания lr (прогон не дошёл до «Шагов до»)",
                   "its last evaluation is not at the end of its lr schedule (it did not reach «Steps to»)"),
    "repeated": ("данные повторялись (токенов больше, чем в данных)", "its data was repeated (more tokens than the data holds)"),
    "no_eval": ("нет оценки на отложенной выборке", "no held-out evaluation"),
    "superseded": ("у прогона того же N и D потери ниже", "a run of the same N and D reached a lower loss"),
}

WEIGHTS = (("вес", "веса", "весов"), ("weight", "weights"))
STEPS = (("шаг", "шага", "шагов"), ("step", "steps"))
TOKENS = (("токен", "токена", "токенов"), ("token", "tokens"))


@dataclass(frozen=True)
class Report:
    selection: Selection
    assessment: law_fit.Assessment
    ladder: Ladder | None

    def as_json(self) -> dict[str, Any]:
        a = self.assessment
        out: dict[str, Any] = {
            "runs": len(self.selection.points), "constellations": list(self.selection.constellations),
            "data_id": self.selection.data_id, "enough": a.enough, "why": a.why or None,
            "method": "variable projection: E, A, B by non-negative weighted least squares on an (alpha, beta) grid; "
                      f"{law_fit.BOOTSTRAPS} bootstrap refits over runs",
            "points": [{"run_id": p.run_id, "N": p.n, "D": p.d, "loss": p.loss} for p in self.selection.points],
            "left_out": dict(self.selection.left_out),
        }
        if a.law is not None and a.holdout is not None:
            fitted = {"fit": {k: {"value": v, "interval": a.intervals[k].as_list()} for k, v in a.law.as_dict().items()},
                      "holdout": {"run_id": a.holdout.point.run_id, "predicted": a.holdout.predicted,
                                  "interval": a.holdout.interval.as_list(), "observed": a.holdout.point.loss,
                                  "error": a.holdout.error}}
            # Enough: the law itself. Not enough: what the fit gave and how far it missed, as
            # `tried` (never read as advice), so the reason «not enough» is seen in numbers.
            if a.enough:
                out.update(fitted)
            else:
                out["tried"] = fitted
        if self.ladder is not None:
            out["ladder"] = self.ladder.as_json()
        return out


def hours_left(registry: Registry) -> float:
    """The GPU hours the ladder may take: the Kaggle accounts' quota left this week, or one
    night of this PC when there is no account."""
    from ..kaggle.store import KaggleStore

    accounts = KaggleStore(registry.state).accounts()
    left = sum(a.remaining_s for a in accounts) / 3600.0
    return left if accounts else NIGHT_HOURS


def report(registry: Registry, constellations: tuple[str, ...] | None = None,
           hours: float | None = None, facts: list[RunFacts] | None = None) -> Report:
    facts = lab_facts(registry) if facts is None else facts
    selection = select(facts, constellations)
    assessment = law_fit.assess(selection.points)
    ladder = None
    if not assessment.enough:
        mine = [f for f in facts if f.data_id == selection.data_id] if selection.data_id else facts
        base = _base_config(registry, mine)
        speeds = [f.flops_per_s for f in mine if f.flops_per_s]
        train = max((f.train_tokens for f in mine), default=0)
        ladder = propose(base, hours_left(registry) if hours is None else hours, train,
                         statistics.median(speeds) if speeds else None)
    return Report(selection, assessment, ladder)


def _base_config(registry: Registry, facts: list[RunFacts]) -> dict[str, Any]:
    for f in reversed(facts):  # the newest run of the data set
        try:
            return registry.get(f.run_id).config()
        except (KeyError, OSError, ValueError):
            continue
    return {}


def interval_text(low: float, high: float, digits: int = 3) -> str:
    return f"{decimal_text(low, digits)}…{decimal_text(high, digits)}"


def human(r: Report) -> list[str]:
    """The report as lines in the interface language."""
    a, sel = r.assessment, r.selection
    names = ", ".join(sel.constellations) or "—"
    lines = [t(f"прогонов в законе: {len(sel.points)} (созвездия: {names})",
               f"runs in the law: {len(sel.points)} (constellations: {names})")]
    for run_id, code in sorted(sel.left_out.items()):
        ru, en = LEFT_OUT[code]
        lines.append(t(f"  не вошёл {run_id}: {ru}", f"  left out {run_id}: {en}"))
    if a.law is not None and a.holdout is not None:
        if not a.enough:
            lines.append(t("что дала подгонка (это ещё не совет):", "what the fit gave (not advice yet):"))
        lines += fit_lines(a)
        if a.enough:
            return lines
    ru, en = WHY.get(a.why, ("", ""))
    fmt = {"w": decimal_text(law_fit.ENOUGH_PREDICTION, 2), "e": decimal_text(law_fit.ENOUGH_EXPONENT / 2, 2)}
    lines.append(t(f"пока мало, чтобы советовать: {ru.format(**fmt)}", f"not enough to advise yet: {en.format(**fmt)}"))
    if r.ladder is not None:
        lines += ladder_lines(r.ladder)
    return lines


def fit_lines(a: law_fit.Assessment) -> list[str]:
    """The fitted law with its intervals and its check on the largest run left out."""
    lines = ["L(N, D) = E + A / N^α + B / D^β:"]
    for k, v in a.law.as_dict().items():
        i = a.intervals[k]
        digits = 3 if k in ("E", "alpha", "beta") else 0
        lines.append(f"  {k:<5} {decimal_text(v, digits)}  [{interval_text(i.low, i.high, digits)}]")
    h = a.holdout
    lines.append(t(
        f"проверка на самом большом прогоне {h.point.run_id}: предсказано {loss_text(h.predicted)} "
        f"[{interval_text(h.interval.low, h.interval.high)}], измерено {loss_text(h.point.loss)}",
        f"check on the largest run {h.point.run_id}: predicted {loss_text(h.predicted)} "
        f"[{interval_text(h.interval.low, h.interval.high)}], measured {loss_text(h.point.loss)}"))
    return lines


def ladder_lines(ladder: Ladder) -> list[str]:
    basis = t("по скорости прогонов лабы", "by the lab's measured speed") if ladder.basis == "measured" \
        else t("по замеру 2×T4 из справки (оценка)", "by the guide's 2×T4 figure (an estimate)")
    lines = [t(f"лестница, которая его измерит ({decimal_text(ladder.hours, 1)} ч из {decimal_text(ladder.hours_left, 1)} ч, {basis}):",
               f"the ladder that would measure it ({decimal_text(ladder.hours, 1)} h of {decimal_text(ladder.hours_left, 1)} h, {basis}):")]
    for rung in ladder.rungs:
        lines.append(t(f"  ширина {rung.width}, {counted(rung.params, *WEIGHTS, 'ru', sig=3)}, "
                       f"{counted(rung.steps_to, *STEPS, 'ru')}, {counted(rung.tokens, *TOKENS, 'ru', sig=3)}, "
                       f"≈ {decimal_text(rung.hours, 2)} ч",
                       f"  width {rung.width}, {count_text(rung.params)} weights, {rung.steps_to} steps, "
                       f"{count_text(rung.tokens)} tokens, ≈ {decimal_text(rung.hours, 2)} h"))
    lines.append(t(f"в очередь: ternit law --queue (то же, что {ladder.command})",
                   f"to queue it: ternit law --queue (the same as {ladder.command})"))
    return lines
