"""The economical-mode benchmark's statistics: medians, quartiles, the paired held-out
difference with its confidence interval, and the rounding control (bench.economical)."""

from __future__ import annotations

import math
import statistics
from typing import Any


def iqr(values: list[float]) -> list[float]:
    q = (
        statistics.quantiles(values, n=4, method="inclusive")
        if len(values) > 1
        else [values[0]] * 3
    )
    return [q[0], q[2]]


def t_quantile_975(df: int) -> float:
    """Student's t 97.5 % point (Cornish–Fisher expansion around the normal: good to 1e-3
    for df ≥ 8, which is all a 96-segment comparison needs)."""
    z = statistics.NormalDist().inv_cdf(0.975)
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def paired(normal: list[float], econ: list[float]) -> dict[str, Any]:
    """Mean paired difference (economical − normal) and its 95 % confidence interval."""
    diffs = [e - n for n, e in zip(normal, econ, strict=True)]
    k = len(diffs)
    mean = statistics.fmean(diffs)
    if k < 2:
        return {"segments": k, "diff": mean, "ci95": [float("nan"), float("nan")]}
    half = t_quantile_975(k - 1) * statistics.stdev(diffs) / math.sqrt(k)
    return {
        "segments": k,
        "normal_loss": statistics.fmean(normal),
        "economical_loss": statistics.fmean(econ),
        "diff": mean,
        "ci95": [mean - half, mean + half],
        "ci_includes_zero": mean - half <= 0 <= mean + half,
    }


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def pooled(runs: list[dict[str, Any]], key: str = "step_times_s") -> list[float]:
    return [v for r in runs for v in r[key]]


def rounding_control(normal: list[float], econ: list[float], controls: list[list[float]]) -> dict[str, Any]:
    """Is the economical mode's held-out difference of the size rounding alone makes?

    Two trainings that differ only in the order of float sums end at slightly different
    models, and with 96 paired segments even a difference of 1e-5 has a confidence
    interval clear of zero (seen in bf16: docs/PERF.md) — that interval measures the
    segments, not training's sensitivity to rounding. The controls measure that: the
    normal mode retrained from weights nudged by one rounding step. The economical mode
    counts as within rounding noise when its mean difference is at most 3× the controls'
    root-mean-square difference (about three standard deviations of a rounding-sized
    change, if those differences are centred on zero)."""
    diffs = [paired(normal, c)["diff"] for c in controls]
    rms = math.sqrt(statistics.fmean(d * d for d in diffs))
    econ_diff = paired(normal, econ)["diff"]
    ratio = abs(econ_diff) / rms if rms > 0 else (0.0 if econ_diff == 0 else math.inf)
    return {"control_diffs": diffs, "control_rms": rms, "ratio_to_control": ratio,
            "within_rounding_noise": ratio <= 3.0}
