"""The lab's scaling law, L(N, D) = E + A / N^α + B / D^β, fitted to its own runs (pure
numpy: no optimizer library, no torch).

How (Chinchilla's «approach 3», solved by variable projection): for fixed exponents (α, β)
the law is linear in E, A and B, so they are solved exactly, by weighted least squares with
E, A, B ≥ 0 (every subset of them free, the best admissible kept), for every (α, β) on a grid;
the grid's best cell is then refined twice on finer grids around it. Why not Huber on log L from
many starts (Hoffmann et al.): with the dozen runs a lab has, a general optimizer's answer
depends on its starts and its path, and the five parameters trade off (A with α, B with β), so
different starts end in different valleys; here only two parameters are searched, over their
whole plausible range, the answer is the same on every machine, and a bootstrap of 200 refits
costs well under a second. The loss is squared error in L weighted by each point's own
held-out interval (a run measured on a bigger held-out set counts more); the lab's loss
values are means over many segments, with few outliers for Huber to guard against.

Intervals: a bootstrap over runs (points drawn with replacement, the fit repeated), the 2.5th
and 97.5th percentiles. «Enough» is read from those widths (`ENOUGH_*`), not from a count:
the largest run is left out, predicted from the rest, and the prediction's interval must be
narrow enough to advise on, with the exponents pinned down.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ALPHAS = np.arange(0.05, 1.5001, 0.05)    # the coarse grid of α and β
REFINE = ((0.01, 5), (0.0025, 4))          # then around the best cell: (step, cells each side)
BOOTSTRAPS = 200
SEED = 20231                               # the bootstrap's draws: the same intervals every time
MIN_POINTS = 6                             # five parameters: below six the fit interpolates
ENOUGH_PREDICTION = 0.10                   # the held-out prediction's 95 % interval, nats, at most
ENOUGH_EXPONENT = 0.30                     # each exponent's 95 % interval, at most this wide
SIGMA_FLOOR = 1e-3                         # a point's σ, nats, at least (an interval of zero width)
PARAMS = ("E", "A", "B", "alpha", "beta")
_SUBSETS = [s for k in (3, 2, 1) for s in itertools.combinations(range(3), k)]


@dataclass(frozen=True)
class Point:
    """One (N, D) of the lab: the best held-out loss among its runs of that size and length."""

    n: float                # weights (the trainer's own count)
    d: float                # unique tokens trained
    loss: float             # held-out loss, nats per token
    sigma: float = 0.01     # its standard error (from the 95 % interval)
    run_id: str = ""

    @property
    def compute(self) -> float:
        return 6.0 * self.n * self.d


@dataclass(frozen=True)
class Law:
    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def loss(self, n: Any, d: Any) -> Any:
        return self.E + self.A / np.power(n, self.alpha) + self.B / np.power(d, self.beta)

    def optimal(self, compute: float) -> tuple[float, float]:
        """The N and D that reach the lowest loss for `compute` FLOPs (C = 6 N D): where the
        two terms' slopes balance, α A / N^α = β B / D^β."""
        a, b = self.alpha, self.beta
        if self.A <= 0 or self.B <= 0:
            return float("nan"), float("nan")
        g = (a * self.A / (b * self.B)) ** (1.0 / (a + b))
        n = g * (compute / 6.0) ** (b / (a + b))
        return float(n), float(compute / 6.0 / n)

    def as_dict(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in PARAMS}


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    def holds(self, x: float) -> bool:
        return self.low <= x <= self.high

    def as_list(self) -> list[float]:
        return [float(self.low), float(self.high)]


@dataclass(frozen=True)
class Holdout:
    point: Point
    predicted: float
    interval: Interval

    @property
    def error(self) -> float:
        return self.predicted - self.point.loss


@dataclass(frozen=True)
class Assessment:
    """What `ternit law` says: the fit on every point with its intervals, the largest run
    predicted from the others, and whether that is enough to advise on (and why not)."""

    points: list[Point]
    law: Law | None
    intervals: dict[str, Interval] = field(default_factory=dict)
    holdout: Holdout | None = None
    enough: bool = False
    why: str = ""           # a code: too_few, no_fit, wide_prediction, wide_exponents, missed
    samples: np.ndarray | None = None   # the bootstrap's laws (rows of PARAMS), for predictions

    def predict(self, n: float, d: float) -> tuple[float, Interval] | None:
        """The law's loss at (N, D) and its bootstrap interval."""
        if self.law is None or self.samples is None or not len(self.samples):
            return None
        s = self.samples
        values = s[:, 0] + s[:, 1] / n ** s[:, 3] + s[:, 2] / d ** s[:, 4]
        low, high = np.percentile(values, [2.5, 97.5])
        return float(self.law.loss(n, d)), Interval(float(low), float(high))


def _arrays(points: list[Point]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = np.array([p.n for p in points], dtype=float)
    d = np.array([p.d for p in points], dtype=float)
    y = np.array([p.loss for p in points], dtype=float)
    w = 1.0 / np.maximum(np.array([p.sigma for p in points], dtype=float), SIGMA_FLOOR) ** 2
    return n, d, y, w / w.mean()


def _solve_grid(n: np.ndarray, d: np.ndarray, y: np.ndarray, w: np.ndarray,
                alphas: np.ndarray, betas: np.ndarray) -> tuple[float, np.ndarray]:
    """For every (α, β) of the grid, E, A, B ≥ 0 by weighted least squares; the best cell:
    (its weighted squared error, [E, A, B, α, β])."""
    a, b = (g.ravel() for g in np.meshgrid(alphas, betas, indexing="ij"))
    x = np.power(n[None, :], -a[:, None])                     # (G, n)
    z = np.power(d[None, :], -b[:, None])
    xs, zs = x.max(axis=1, keepdims=True), z.max(axis=1, keepdims=True)
    cols = np.stack([np.ones_like(x), x / xs, z / zs], axis=2)  # scaled: the 3×3 systems stay sound
    cw = cols * w[None, :, None]
    gram = cw.transpose(0, 2, 1) @ cols                         # (G, 3, 3), once for every subset
    rhs = (cw * y[None, :, None]).sum(axis=1)                   # (G, 3)
    yy = float((w * y * y).sum())
    best_sse = np.full(a.shape, np.inf)
    best = np.zeros((a.size, 3))
    for subset in _SUBSETS:
        k = list(subset)
        g, r = gram[:, k][:, :, k] + 1e-12 * np.eye(len(k)), rhs[:, k]
        theta = np.linalg.solve(g, r[..., None])[..., 0]
        sse = yy - 2 * (theta * r).sum(axis=1) + np.einsum("gi,gij,gj->g", theta, g, theta)
        ok = (theta >= 0).all(axis=1) & (sse < best_sse)
        full = np.zeros((a.size, 3))
        full[:, k] = theta
        best[ok], best_sse[ok] = full[ok], sse[ok]
    i = int(np.argmin(best_sse))
    e, aa, bb = best[i] / np.array([1.0, xs[i, 0], zs[i, 0]])
    return float(best_sse[i]), np.array([e, aa, bb, a[i], b[i]])


def fit(points: list[Point]) -> Law | None:
    """The law that fits these points best (None below three points: nothing to fit)."""
    if len(points) < 3:
        return None
    n, d, y, w = _arrays(points)
    _, p = _solve_grid(n, d, y, w, ALPHAS, ALPHAS)
    for step, cells in REFINE:
        fine = np.arange(-cells, cells + 1) * step
        _, p = _solve_grid(n, d, y, w, np.clip(p[3] + fine, 0.01, None), np.clip(p[4] + fine, 0.01, None))
    return Law(*map(float, p))


def bootstrap(points: list[Point], draws: int = BOOTSTRAPS, seed: int = SEED) -> np.ndarray:
    """The law refitted on `draws` resamplings of the points (rows of E, A, B, α, β)."""
    rng = np.random.default_rng(seed)
    rows: list[list[float]] = []
    for _ in range(draws * 5):  # redrawn: see below; a hopeless set gives up after 5× the draws
        if len(rows) == draws:
            break
        pick = rng.integers(0, len(points), len(points))
        # A resample that spans fewer than three sizes or three lengths cannot tell an exponent
        # from its coefficient and E (two values of N fit any α): it says nothing, and is redrawn.
        if len({points[i].n for i in pick}) < 3 or len({points[i].d for i in pick}) < 3:
            continue
        law = fit([points[i] for i in pick])
        if law is not None:
            rows.append([getattr(law, k) for k in PARAMS])
    return np.array(rows, dtype=float).reshape(-1, len(PARAMS))


def _intervals(samples: np.ndarray) -> dict[str, Interval]:
    if not len(samples):
        return {}
    low, high = np.percentile(samples, [2.5, 97.5], axis=0)
    return {k: Interval(float(lo), float(hi)) for k, lo, hi in zip(PARAMS, low, high, strict=True)}


def assess(points: list[Point], draws: int = BOOTSTRAPS) -> Assessment:
    """Fit, bootstrap, and check on the largest run (by compute) left out."""
    law = fit(points)
    if len(points) < MIN_POINTS or law is None:
        return Assessment(points, law, why="too_few")
    samples = bootstrap(points, draws)
    intervals = _intervals(samples)
    largest = max(points, key=lambda p: p.compute)
    rest = [p for p in points if p is not largest]
    rest_fit = Assessment(rest, fit(rest), samples=bootstrap(rest, draws))
    guess = rest_fit.predict(largest.n, largest.d)
    if guess is None:
        return Assessment(points, law, intervals, why="no_fit", samples=samples)
    holdout = Holdout(largest, guess[0], guess[1])
    why = ""
    if holdout.interval.width > ENOUGH_PREDICTION:
        why = "wide_prediction"
    elif max(intervals["alpha"].width, intervals["beta"].width) > ENOUGH_EXPONENT:
        why = "wide_exponents"
    elif not Interval(holdout.interval.low - 2 * largest.sigma, holdout.interval.high + 2 * largest.sigma).holds(largest.loss):
        why = "missed"  # narrow, and wrong: the law does not describe these runs
    return Assessment(points, law, intervals, holdout, not why, why, samples)
