"""When to grow: has validation reached a plateau? A trend test, not one noisy point.

Over the latest evaluations (the last half, at least 4) the validation loss is fitted as a
straight line in log₂ of training (steps or tokens): the slope is the loss gained per
DOUBLING of training, which is how learning curves flatten. Its 95 % interval comes from
the scatter of the points around the line (Student's t with k − 2 degrees of freedom).
The trainer's per-point val_ci95 is over the same fixed held-out segments at every
evaluation, so its noise is mostly shared between points and says little about the
slope; it is reported for the last point, not used as independent noise.

States: "falling" (the whole interval gains more than `min_gain` per doubling: training
longer is cheaper), "plateau" (the whole interval gains less than that), "rising" (the
loss grows: over-fitting), "unclear" (the interval straddles: wait for more points), and
"too_few" (under 4 usable points).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..base.i18n import current_language
from ..base.numbers import count_text, counted, decimal_text, format_value

# Two-sided 95 % Student t quantiles by degrees of freedom (1…30); 1.96 beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)

MIN_POINTS = 4
TOKENS_PER_WEIGHT = 20


def t95(dof: int) -> float:
    return _T95[dof - 1] if 1 <= dof <= len(_T95) else 1.96


def _usable(points: Sequence[Sequence[float]]) -> list[tuple[float, float, float, float]]:
    out = []
    for p in points:
        try:
            x, loss = float(p[0]), float(p[1])
            lo = float(p[2]) if len(p) > 2 and p[2] is not None else loss
            hi = float(p[3]) if len(p) > 3 and p[3] is not None else loss
        except (TypeError, ValueError, IndexError):
            continue
        if x > 0 and math.isfinite(x) and math.isfinite(loss):
            out.append((x, loss, lo, hi))
    out.sort()
    return out


def fit_slope(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least squares of y on log₂ x: (slope, its standard error, intercept)."""
    lx = [math.log2(x) for x in xs]
    k = len(lx)
    mx, my = sum(lx) / k, sum(ys) / k
    sxx = sum((a - mx) ** 2 for a in lx)
    if sxx <= 0:
        raise ValueError("the points must be at different steps")
    b = sum((a - mx) * (y - my) for a, y in zip(lx, ys, strict=True)) / sxx
    a0 = my - b * mx
    ssr = sum((y - (a0 + b * a)) ** 2 for a, y in zip(lx, ys, strict=True))
    se = math.sqrt(ssr / (k - 2) / sxx) if k > 2 else float("inf")
    return b, se, a0


def plateau(
    val_points: Sequence[Sequence[float]],
    *,
    params: int | None = None,
    data_tokens: int | None = None,
    min_gain: float = 0.01,
    grow: float = 2.0,
    lang: str | None = None,
) -> dict[str, Any]:
    """Judge the validation curve. `val_points`: (step or tokens, loss, ci_low, ci_high).

    With `params` and `data_tokens` the advice says whether a `grow`× bigger model has
    the ~20 tokens per weight it needs."""
    lang = lang or current_language()
    pts = _usable(val_points)
    result: dict[str, Any] = {
        "state": "too_few", "slope_per_doubling": None, "ci95": None, "points_used": 0,
        "min_gain": min_gain, "last": None, "advice": [],
    }
    if pts:
        x, loss, lo, hi = pts[-1]
        result["last"] = {"x": x, "loss": loss, "ci95": [lo, hi]}
    distinct = sorted({p[0] for p in pts})
    if len(distinct) < MIN_POINTS:
        result["advice"].append(_t(lang,
            f"Мало точек валидации ({len(distinct)} из {MIN_POINTS} нужных): судить о плато рано.",
            f"Too few validation points ({len(distinct)} of the {MIN_POINTS} needed) to judge a plateau."))
        return result
    use = pts[-max(MIN_POINTS, math.ceil(len(pts) / 2)):]
    b, se, _ = fit_slope([p[0] for p in use], [p[1] for p in use])
    half = t95(len(use) - 2) * se
    lo_b, hi_b = b - half, b + half
    if hi_b < -min_gain:
        state = "falling"
    elif lo_b > 0:
        state = "rising"
    elif lo_b > -min_gain:
        state = "plateau"
    else:
        state = "unclear"
    result.update(state=state, slope_per_doubling=b, ci95=[lo_b, hi_b], points_used=len(use),
                  x_range=[use[0][0], use[-1][0]])
    result["advice"] = _advice(state, b, lo_b, hi_b, min_gain, params, data_tokens, grow, lang)
    return result


def _t(lang: str, ru: str, en: str) -> str:
    return en if lang == "en" else ru


def _num(v: float, lang: str) -> str:
    return decimal_text(v, 3, lang, sign=True)


def _advice(state: str, b: float, lo: float, hi: float, min_gain: float, params: int | None,
            data_tokens: int | None, grow: float, lang: str) -> list[str]:
    span = _t(lang, f"{_num(b, lang)} за удвоение обучения (95 %: {_num(lo, lang)} … {_num(hi, lang)})",
              f"{_num(b, lang)} per doubling of training (95 %: {_num(lo, lang)} … {_num(hi, lang)})")
    gain = _num(-min_gain, lang).lstrip("-")
    out: list[str] = []
    if state == "falling":
        out.append(_t(lang, f"Валидация ещё падает: {span}. Учить дольше дешевле, чем растить модель.",
                      f"Validation is still falling: {span}. Training longer is cheaper than a bigger model."))
    elif state == "rising":
        out.append(_t(lang, f"Валидация растёт: {span} — модель переучивается на этих данных. Нужно больше данных, а не больше шагов.",
                      f"Validation is rising: {span} — the model over-fits this data. It needs more data, not more steps."))
    elif state == "unclear":
        out.append(_t(lang, f"Пока неясно: {span}. Подождите ещё несколько оценок.",
                      f"Not clear yet: {span}. Wait for a few more evaluations."))
    else:
        out.append(_t(lang, f"Плато: {span}, выигрыш меньше {gain} за удвоение.",
                      f"Plateau: {span}, less than {gain} gained per doubling."))
    if state in ("plateau", "rising") and params:
        bigger = int(params * grow)
        need = TOKENS_PER_WEIGHT * bigger
        weights = counted(bigger, ("вес", "веса", "весов"), ("weight", "weights"), lang, sig=3)
        tokens = counted(need, ("токен", "токена", "токенов"), ("token", "tokens"), lang, sig=2)
        head = _t(lang, f"Модели в {format_value(grow, 'ru')}× больше ({weights}) нужно около {tokens}",
                  f"A {format_value(grow, 'en')}× bigger model ({weights}) needs about {tokens}")
        if data_tokens is None:
            out.append(head + ".")
        elif data_tokens >= need:
            out.append(head + _t(lang, f", у вас {count_text(data_tokens, lang)}: можно растить.",
                                 f", you have {count_text(data_tokens, lang)}: grow it."))
        else:
            out.append(head + _t(lang, f", у вас {count_text(data_tokens, lang)}: сначала добавьте данные.",
                                 f", you have {count_text(data_tokens, lang)}: add data first."))
    return out
