"""Which of the lab's runs the law is fitted to, and the point each one gives.

- One data set: runs whose prepared data has the same `data_id` (the same constellations,
  vocabulary and held-out split, so the same held-out set and a loss on one scale).
- One point per run: its last evaluation, taken only where its learning rate had decayed to
  its own end (the run reached «Шагов до», the evaluation made at that step). The lab's
  schedule is a cosine decay to `steps_to`: an evaluation in the middle of a run is made at a
  higher learning rate than a run of that length would end with, so it lies above the
  frontier L(N, D), and a fit to such points would learn the schedule, not the law. The
  intermediate evaluations give each point its uncertainty instead: the interval of the last
  one, and they show the run still improving at its end (a run that did not is kept: that is
  what its D gives).
- D is the tokens trained. A run that read its training data more than once (D above the
  prepared data's train tokens) is left out and said: repeated tokens are worth less than new
  ones (Muennighoff et al. 2023), and this law counts unique ones.
- Among runs of one (N, D) that differ in lr or warm-up, the best (the lowest loss): the law
  describes what a size and length can reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base import run_status as st
from ..data.prepared import Prepared
from ..runs.events import iter_events
from ..runs.registry import Registry, RunRecord
from ..sizing.formulas import flops_per_token
from .fit import Point

Z95 = 1.959964


@dataclass(frozen=True)
class RunFacts:
    """What the law needs of one run, read from its row, run.json and events."""

    run_id: str
    data_id: str
    constellations: tuple[str, ...]
    n: int | None
    d: int | None
    loss: float | None
    ci: tuple[float, float] | None
    at_end: bool            # the last evaluation is at «Шагов до», the run having reached it
    train_tokens: int       # the prepared data's (0: unknown)
    flops_per_s: float | None = None   # its last measured speed, in training FLOPs per second


@dataclass(frozen=True)
class Selection:
    points: list[Point]
    left_out: dict[str, str]   # run id -> a code: not_at_end, repeated, no_eval, superseded
    data_id: str
    constellations: tuple[str, ...]


def run_facts(rec: RunRecord) -> RunFacts | None:
    """The facts of one run, or None when it has no readable run.json."""
    try:
        cfg = rec.config()
    except (OSError, ValueError):
        return None
    data = cfg.get("data") or {}
    prepared = Prepared.read(str(data.get("dir") or "")) if data.get("dir") else None
    last: dict[str, Any] | None = None
    tokens, speed = 0, None
    for ev in iter_events(rec.events_path):
        if ev.get("event") == "step" and isinstance(ev.get("tokens_seen"), int):
            tokens = ev["tokens_seen"]
            speed = ev.get("tokens_per_s") if isinstance(ev.get("tokens_per_s"), int | float) else speed
        elif ev.get("event") == "eval" and isinstance(ev.get("val_loss"), int | float):
            last = {**ev, "tokens_seen": tokens}
    ci = last.get("val_ci95") if last else None
    steps_to = rec.steps_to or (cfg.get("training") or {}).get("steps_to")
    return RunFacts(
        run_id=rec.id,
        data_id=prepared.data_id if prepared else "",
        constellations=tuple(sorted(prepared.constellations if prepared else data.get("constellations") or ())),
        n=rec.params,
        d=int(last["tokens_seen"]) if last else None,
        loss=float(last["val_loss"]) if last else None,
        ci=(float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 else None,
        at_end=bool(last) and rec.status == st.FINISHED and last.get("step") == steps_to,
        train_tokens=prepared.train_tokens if prepared else 0,
        flops_per_s=_flops_per_s(cfg, speed),
    )


def _flops_per_s(cfg: dict[str, Any], tokens_per_s: float | None) -> float | None:
    m = cfg.get("model") or {}
    try:
        per_token = flops_per_token(int(m["layers"]), int(m["width"]), int(m["context"]), int(m["vocab"]))
    except (KeyError, TypeError, ValueError):
        return None
    return per_token * float(tokens_per_s) if tokens_per_s else None


def lab_facts(registry: Registry) -> list[RunFacts]:
    """Every ended run's facts (oldest first)."""
    out = [run_facts(r) for r in reversed(registry.list_runs()) if r.ended]
    return [f for f in out if f is not None]


def select(facts: list[RunFacts], constellations: tuple[str, ...] | None = None, data_id: str | None = None) -> Selection:
    """The points of one data set: the one `data_id` names, or of those named by
    `constellations` (any order) the one with the most runs."""
    pool = [f for f in facts if f.data_id and (constellations is None or f.constellations == tuple(sorted(constellations)))
            and (data_id is None or f.data_id == data_id)]
    counts: dict[str, int] = {}
    for f in pool:
        counts[f.data_id] = counts.get(f.data_id, 0) + 1
    if not counts:
        return Selection([], {}, "", tuple(sorted(constellations or ())))
    data_id = max(counts, key=lambda k: (counts[k], k))
    chosen = [f for f in pool if f.data_id == data_id]
    left_out: dict[str, str] = {}
    best: dict[tuple[int, int], tuple[RunFacts, Point]] = {}
    for f in chosen:
        if f.loss is None or f.n is None or f.d is None:
            left_out[f.run_id] = "no_eval"
        elif not f.at_end:
            left_out[f.run_id] = "not_at_end"
        elif f.train_tokens and f.d > f.train_tokens:
            left_out[f.run_id] = "repeated"
        else:
            sigma = (f.ci[1] - f.ci[0]) / (2 * Z95) if f.ci else 0.0
            point = Point(float(f.n), float(f.d), f.loss, sigma, f.run_id)
            key = (f.n, _length_key(f.d))
            if key in best and best[key][1].loss <= point.loss:
                left_out[f.run_id] = "superseded"
                continue
            if key in best:
                left_out[best[key][0].run_id] = "superseded"
            best[key] = (f, point)
    return Selection([p for _, p in best.values()], left_out, data_id, chosen[0].constellations)


def _length_key(d: int) -> int:
    """Runs whose tokens differ by under 1 % are one length (a batch rounded differently)."""
    import math

    return round(math.log(d) / math.log(1.01)) if d > 0 else 0
