"""What a one-pass fused lean step's clipping costs against exact clipping.

    python -m bench.clip_lag [--data DIR] [--steps N] [--seeds S] [--precision fp32|bf16]
        [--width D] [--layers L] [--context T] [--batch B] [--clip C] [--lr LR] [--json FILE]

A lean step fused into one backward pass (each parameter updated from its gradient hook)
cannot know the step's global gradient norm before it updates: it can only clip by an
estimate. The first version of trainer/step/lean.py scaled step t by min(1, clip / ‖g_{t-1}‖),
the PREVIOUS step's norm, and did not clip the first step; this bench measured it, and the
trainer now clips exactly (lean_state true: gradients held; "fused": two backward passes).
For each seed this trains a small model with the trainer's own model, schedule, data reader
and step function, from the same initial weights on the same batches:

    lagged        one pass, clipped by the previous step's norm (the rejected first version;
                  the bench's own class, not the trainer's)
    exact         the trainer's lean_state true: gradients held, clipped exactly
    fused         the trainer's lean_state "fused": two backward passes, clipped exactly
                  (the same steps as `exact` bit for bit: fused − exact is 0)
    exact_nudged  `exact` from initial weights nudged by one fp32 rounding step (2⁻²³):
                  the control, how far rounding alone moves the result
    normal        the normal mode (torch AdamW, fp32 moments), for reference
    growth        another one-pass candidate: each parameter's step clipped by the previous
                  step's norm times how much this parameter's own gradient norm grew since
                  then (exact when a spike scales every gradient alike); the run's first step
                  clipped from a backward pass of its batch that updates nothing
    pertensor     one pass, no global norm: each parameter's update (the 8-bit AdamW step
                  over the learning rate) scaled down to an RMS of at most 1 — Adafactor's
                  update clipping with d = 1 (Shazeer & Stern 2018), the per-tensor rule of
                  StableAdamW (Wortsman et al. 2023); the moments see the raw gradient
                  (issue 34's candidate; a host sync per parameter here)
    progressive   one pass, the global norm estimated inside the backward pass: when a
                  parameter's hook fires, the squares of this step's gradients done so far
                  (S, this one included) and last step's squares of the same parameters (P)
                  and of all (P_all) give N² ≈ S · P_all / P (exact when the whole gradient
                  scales alike: a spike); the gradient is scaled by min(1, clip / N) BEFORE
                  it enters the moments; the run's first step's squares from a priming pass
    progressive_shrink  as progressive, the growth s² = (S + w) / (P + w) shrunk towards 1
                  by a prior of w = ¼ of last step's whole square (few tensors done: little
                  evidence, the rest assumed as last step)
    progressive_tail  N² ≈ S + (P_all − P): the tensors not yet done assumed as last step
    factored_exact  the trainer's one-pass optimizer (trainer/step/one_pass.py: the first moment
                  8-bit block-wise in bitsandbytes' dynamic map, the second factored into a
                  row and a column mean of g², bf16 weights rounded stochastically) in
                  train_step's "held" step: the gradients held, clipped exactly (step_held)
    factored_progressive  the trainer's own `lean_state: "one_pass"` step (train_step's
                  "one_pass": the same moments clipped by the progressive estimate, one pass)

Reported: over the lagged run's steps, the exact coefficient of each step against the one
used (relative difference |used − exact| / exact: median, 90th percentile, max), how often
clipping was active (exactly, and as used) and how often the two disagree about it; the
held-out loss of every run on the same validation segments, the lagged − exact difference
against the control's nudged − exact one. Without --data a synthetic prepared folder is
made (bench/synthetic.py); real text: `ternit data prepare --constellations demo`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch

from bench.lean_choice import held_out  # the same held-out losses as the library comparison
from trainer.config.run_config import ModelConfig, TrainingConfig
from trainer.model.gpt import GPT
from trainer.run.data import PreparedData, get_batch, open_prepared
from trainer.step.optim import Schedule, autocast, make_optimizer, make_scaler
from trainer.step.step import train_step

from .synthetic import make_prepared

# The progressive arms and the weight of their prior "the rest as last step" (a share of
# last step's whole square): 0, this step's evidence alone; None, the rest assumed unchanged.
PROGRESSIVE = {"progressive": 0.0, "progressive_shrink": 0.25, "progressive_tail": None}
# The small-moment arms (issue 34's memory): the trainer's one-pass optimizer, exactly clipped
# after a held backward pass and as its own one-pass step (which primes itself).
FACTORED = ("factored_exact", "factored_progressive")
RUNS = ("lagged", "exact", "fused", "exact_nudged", "normal", "growth", "pertensor", *PROGRESSIVE, *FACTORED)
ONE_PASS = ("lagged", "growth", "pertensor", *PROGRESSIVE)  # the bench's own one-pass class
PRIMED = ("growth", *PROGRESSIVE)  # the run's first step's norms from a priming pass
# Student's t, two-sided 95 %, by degrees of freedom (the seeds less one).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
NUDGE = 2.0**-23  # one fp32 rounding step, relative


@torch.no_grad()
def nudge(model: GPT, seed: int) -> None:
    """Every initial weight times 1 ± 2⁻²³ (random signs from `seed`)."""
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        sign = torch.randint(0, 2, p.shape, generator=g).to(p.dtype) * 2 - 1
        p.mul_(1 + NUDGE * sign)


def exact_coef(norm: float, clip: float) -> float:
    """clip_grad_norm_'s scale: clip / (norm + 1e-6), at most 1 (1 with clipping off)."""
    return min(1.0, clip / (norm + 1e-6)) if clip > 0 else 1.0


def make_run(kind: str, cfg: ModelConfig, t: TrainingConfig, precision: str) -> tuple[GPT, Any]:
    from trainer.step.lean import LeanOptimizer

    cpu = torch.device("cpu")
    model = GPT(cfg)
    model.init_weights(t.seed)
    if kind == "exact_nudged":
        nudge(model, t.seed + 1)
    if kind == "normal":  # fp32 weights also under bf16 (autocast), as in the trainer
        return model, make_optimizer(model, t, cpu)
    if kind in ONE_PASS:
        return model, _one_pass_class(kind)(model, t, cpu, precision, "fused")
    if kind in FACTORED:
        from trainer.step.one_pass import OnePassOptimizer

        return model, OnePassOptimizer(model, t, cpu, precision)
    # The trainer's own lean steps: "on" (gradients held) and "fused" (two backward passes).
    return model, LeanOptimizer(model, t, cpu, precision, "fused" if kind == "fused" else "held")


def progressive_estimate(done: torch.Tensor, done_prev: torch.Tensor, prev_all: torch.Tensor,
                         prior: float | None) -> torch.Tensor:
    """The global norm estimated in the middle of a backward pass: `done`, this step's
    squared gradient norms of the parameters whose hooks have fired (this one included);
    `done_prev`, last step's squares of the same parameters; `prev_all`, last step's whole
    square. The parameters not yet done are assumed to have grown as those done did:
    N² = done + (prev_all − done_prev) · s², s² = done / done_prev — so N is exact when the
    whole gradient is last step's times one factor (a spike), and exact at the last hook.
    `prior` (a share of prev_all) shrinks s² towards 1 while little is done; None: s² = 1."""
    rest = (prev_all - done_prev).clamp_min(0)
    if prior is None:
        growth = torch.ones(())
    else:
        w = prior * prev_all
        growth = (done + w) / (done_prev + w).clamp_min(1e-30)
    return (done + rest * growth).sqrt()


def _one_pass_class(kind: str) -> type:
    """The lean optimizer with a one-pass fused step clipped by an estimate of this step's
    norm, which trainer/step/lean.py does not do (measured and rejected there): `lagged`, the
    previous step's norm; `growth`, the previous norm times how much this parameter's own
    gradient norm grew since then."""
    from trainer.step.lean import LeanOptimizer

    class OnePass(LeanOptimizer):
        def __init__(self, model: GPT, t: TrainingConfig, *args: Any) -> None:
            super().__init__(model, t, *args)
            self.clip = t.grad_clip
            self.prev_norm: float | None = None  # the previous step's global norm
            self.param_norms: dict[int, float] = {}  # each parameter's last gradient norm
            self.priming = False  # a backward pass that measures the norms and updates nothing
            self._sum: torch.Tensor | None = None
            self.clipped = 0  # pertensor: the parameter updates scaled down
            # progressive: last step's squares of each parameter, and this step's running sums
            self.prev_sq: dict[int, torch.Tensor] = {}
            self._done = torch.zeros(())  # this step's squares so far
            self._done_prev = torch.zeros(())  # last step's squares of the same parameters
            self._prev_all: torch.Tensor | None = None
            self.estimates: list[float] = []  # the estimate at each parameter, this step
            self.step_estimates: list[list[float]] = []

        def one_pass_step(self, loss: torch.Tensor) -> float:
            """One backward pass updating from the hooks; returns the coefficient used."""
            prev = self.prev_norm
            self._coef = min(1.0, self.clip / (prev + 1e-6)) if self.clip > 0 and prev else 1.0
            self._sum = torch.zeros(())
            self._done, self._done_prev = torch.zeros(()), torch.zeros(())
            self._prev_all = torch.stack(list(self.prev_sq.values())).sum() if self.prev_sq else None
            self.estimates = []
            loss.backward()
            self.prev_norm = self.last_norm = float(self._sum.sqrt())
            if not self.priming:
                self.step_estimates.append(self.estimates)
            self._sum = None
            self.updates += 0 if self.priming else 1
            return self._coef

        def _hook(self, index: int):  # noqa: ANN202
            def hook(p: torch.nn.Parameter) -> None:
                if self._sum is None:
                    return
                sq = p.grad.detach().float().pow(2).sum()
                self._sum += sq
                coef = self._coef
                if kind == "growth":
                    mine = float(sq.sqrt())  # a host sync per parameter: a cost on a GPU
                    before = self.param_norms.get(index)
                    self.param_norms[index] = mine
                    if self.priming:
                        p.grad = None
                        return
                    if self.clip > 0 and self.prev_norm is not None and before:
                        coef = min(1.0, self.clip / (self.prev_norm * mine / before + 1e-6))
                if kind in PROGRESSIVE:
                    coef = self._progressive(index, sq)
                    if self.priming:
                        p.grad = None
                        return
                if kind == "pertensor":
                    self._update_clipped(index, p)
                else:
                    self._update(index, p, coef)
                p.grad = None

            return hook

        def _progressive(self, index: int, sq: torch.Tensor) -> float:
            """This step's coefficient at parameter `index` from the estimate of the global
            norm (the rule in the module's docstring); records last step's square."""
            before = self.prev_sq.get(index)
            self.prev_sq[index] = sq
            self._done += sq
            if self.priming or self.clip <= 0:
                return 1.0
            if before is None or self._prev_all is None:  # not seen last step: what is done is a lower bound
                est = float(self._done.sqrt())
            else:
                self._done_prev += before
                est = float(progressive_estimate(self._done, self._done_prev, self._prev_all, PROGRESSIVE.get(kind, 0.0)))
            self.estimates.append(est)
            return min(1.0, self.clip / (est + 1e-6))

        @torch.no_grad()
        def _update_clipped(self, index: int, p: torch.nn.Parameter) -> None:
            """The library's step from the raw gradient, then the step itself scaled to an
            RMS of at most 1 in units of the learning rate (weight decay included)."""
            from trainer.step.lean import stochastic_round_

            opt, target = self.inner[p]
            lr = self.param_groups[0]["lr"]
            opt.param_groups[0]["lr"] = lr
            if self.bf16:
                target.data, target.grad = p.detach().float(), p.grad.detach().float()
            before = (target if self.bf16 else p).detach().clone()
            opt.step()
            w = target.data if self.bf16 else p.data
            delta = w - before
            rms = float(delta.pow(2).mean().sqrt()) / lr if lr > 0 else 0.0
            if rms > 1.0:
                w.copy_(before.add_(delta, alpha=1.0 / rms))
            self.clipped += rms > 1.0
            if self.bf16:
                target.grad = None
                g = torch.Generator(device=p.device)
                g.manual_seed((self.seed * 1_000_003 + self.updates * 10_007 + index) % (2**63))
                stochastic_round_(p.data, target.data, g)
                target.data = torch.empty(0, device=self.device)
            self.state[p] = opt.state[target]

    return OnePass


def train(kind: str, data: PreparedData, cfg: ModelConfig, t: TrainingConfig, precision: str,
          steps: int) -> dict[str, Any]:
    """One run; its steps' global gradient norms, and for the one-pass arms the
    coefficients used."""
    model, opt = make_run(kind, cfg, t, precision)
    schedule = Schedule.fresh(t)
    cpu = torch.device("cpu")
    scaler = make_scaler("fp32", cpu)
    norms: list[float] = []
    used: list[float] = []
    losses: list[float] = []
    one_pass = kind in ONE_PASS
    times: list[float] = []
    if kind in PRIMED:  # the first step's norms from a backward pass of its own batch
        opt.priming = True
        opt.one_pass_step(model(*get_batch(data.train, cfg.context, t.batch_per_card, t.seed, 0, 0)))
        opt.priming = False
    for i in range(steps):
        batch = get_batch(data.train, cfg.context, t.batch_per_card, t.seed, i, 0)
        began = time.perf_counter()
        if one_pass:
            for g in opt.param_groups:
                g["lr"] = schedule.at(i)
            with autocast(precision, cpu):
                loss = model(*batch)
            used.append(opt.one_pass_step(loss))
            norms.append(opt.last_norm)
        else:
            # factored_exact: the trainer's held step (a backward pass that holds the gradients,
            # the hooks idle, then step_held's exact clip); the one-pass optimizer's own kind is
            # "one_pass" (factored_progressive)
            step_kind = "held" if kind == "factored_exact" else getattr(opt, "step_kind", "normal")
            loss = train_step(model, opt, scaler, batch, schedule.at(i), precision, cpu, t.grad_clip, step_kind)
            norms.append(opt.last_norm if kind != "normal" else math.nan)
        losses.append(float(loss.detach()))
        times.append(time.perf_counter() - began)
    out = {"kind": kind, "norms": norms, "losses": losses, "step_ms_median": statistics.median(times) * 1e3,
           "segment_losses": held_out(model, data, cfg.context, 96, t.batch_per_card)}
    if one_pass:
        out["used_coefs"] = used
    if kind == "pertensor":
        out["clipped_updates"] = opt.clipped
    if kind.startswith("progressive"):
        out["step_estimates"] = opt.step_estimates
    return out


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def lag_stats(norms: list[float], used: list[float], clip: float) -> dict[str, Any]:
    """The used coefficients against the exact ones of the same steps."""
    exact = [exact_coef(n, clip) for n in norms]
    rel = [abs(u - e) / e for u, e in zip(used, exact, strict=True)]
    active_exact = [e < 1.0 for e in exact]
    active_used = [u < 1.0 for u in used]
    both = [r for r, a, b in zip(rel, active_exact, active_used, strict=True) if a or b]
    return {
        "steps": len(norms),
        "rel_diff_median": statistics.median(rel),
        "rel_diff_p90": quantile(rel, 0.9),
        "rel_diff_max": max(rel),
        "rel_diff_max_step": rel.index(max(rel)) + 1,
        "rel_diff_median_where_clipping": statistics.median(both) if both else 0.0,
        "active_exact": sum(active_exact) / len(norms),
        "active_used": sum(active_used) / len(norms),
        "disagree": sum(a != b for a, b in zip(active_exact, active_used, strict=True)) / len(norms),
        "norm_first": norms[0],
        "norm_median": statistics.median(norms),
        "norm_last": norms[-1],
        "norm_step_ratio_median": statistics.median(
            max(a, b) / min(a, b) for a, b in pairwise(norms) if min(a, b) > 0),
    }


def estimate_stats(step_estimates: list[list[float]], exact_norms: list[float]) -> dict[str, float]:
    """How far the progressive estimates (every parameter's, every step) are from the exact
    arm's norm of the same step: |est − exact| / exact, median and max, and the share of
    steps on which the exact norm is over the first estimate by more than 10 % (a spike
    caught late)."""
    rel = [abs(e - n) / n for ests, n in zip(step_estimates, exact_norms, strict=False) for e in ests if n > 0]
    late = [ests[0] < 0.9 * n for ests, n in zip(step_estimates, exact_norms, strict=False) if ests]
    return {"rel_median": statistics.median(rel) if rel else 0.0, "rel_max": max(rel, default=0.0),
            "first_low": sum(late) / len(late) if late else 0.0}


def paired(a: list[float], b: list[float]) -> float:
    return statistics.fmean(x - y for x, y in zip(a, b, strict=True))


def one_seed(seed: int, data: PreparedData, cfg: ModelConfig, t: TrainingConfig, precision: str, steps: int,
             runs: tuple[str, ...]) -> dict[str, Any]:
    ts = replace(t, seed=seed)
    results = {k: train(k, data, cfg, ts, precision, steps) for k in runs}
    out: dict[str, Any] = {"seed": seed}
    exact = results["exact"]["segment_losses"]
    out["held_out"] = {k: statistics.fmean(r["segment_losses"]) for k, r in results.items()}
    out["step_ms"] = {k: r["step_ms_median"] for k, r in results.items()}
    if "lagged" in results:
        lag = results["lagged"]
        out["lag"] = lag_stats(lag["norms"], lag["used_coefs"], t.grad_clip)
        out["lagged_minus_exact"] = paired(lag["segment_losses"], exact)
    if "pertensor" in results:
        out["pertensor_minus_exact"] = paired(results["pertensor"]["segment_losses"], exact)
        out["pertensor_clipped_updates"] = results["pertensor"]["clipped_updates"]
    if "exact_nudged" in results:
        out["nudged_minus_exact"] = paired(results["exact_nudged"]["segment_losses"], exact)
    for arm in (*PROGRESSIVE, *FACTORED):
        if arm in results:
            out[f"{arm}_minus_exact"] = paired(results[arm]["segment_losses"], exact)
        if arm in results and "step_estimates" in results[arm]:
            out[f"{arm}_est"] = estimate_stats(results[arm]["step_estimates"], results["exact"]["norms"])
    if "growth" in results:
        out["growth_minus_exact"] = paired(results["growth"]["segment_losses"], exact)
    if "fused" in results:
        out["fused_minus_exact"] = paired(results["fused"]["segment_losses"], exact)
    if "normal" in results and "lagged" in results:
        out["lagged_minus_normal"] = paired(results["lagged"]["segment_losses"], results["normal"]["segment_losses"])
        out["exact_minus_normal"] = paired(exact, results["normal"]["segment_losses"])
    out["runs"] = results
    return out


def interval95(xs: list[float]) -> list[float] | None:
    """The mean's two-sided 95 % interval over the seeds (Student's t); None under two."""
    if len(xs) < 2:
        return None
    half = T95.get(len(xs) - 1, 1.96) * statistics.stdev(xs) / math.sqrt(len(xs))
    m = statistics.fmean(xs)
    return [m - half, m + half]


def summary(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lag = [s["lagged_minus_exact"] for s in seeds if "lagged_minus_exact" in s]
    if lag:
        out |= {
            "lagged_minus_exact_mean": statistics.fmean(lag),
            "lagged_minus_exact_abs_max": max(abs(x) for x in lag),
            "rel_diff_median": statistics.median(s["lag"]["rel_diff_median"] for s in seeds),
            "rel_diff_max": max(s["lag"]["rel_diff_max"] for s in seeds),
            "active_exact": statistics.fmean(s["lag"]["active_exact"] for s in seeds),
            "active_used": statistics.fmean(s["lag"]["active_used"] for s in seeds),
        }
    ctl = [s["nudged_minus_exact"] for s in seeds if "nudged_minus_exact" in s]
    for arm in ("growth", "fused", "pertensor", *PROGRESSIVE, *FACTORED):
        diffs = [s[f"{arm}_minus_exact"] for s in seeds if f"{arm}_minus_exact" in s]
        if diffs:
            out[f"{arm}_minus_exact_mean"] = statistics.fmean(diffs)
            out[f"{arm}_minus_exact_95"] = interval95(diffs)
    arms = seeds[0]["step_ms"]
    out["step_ms_median"] = {k: statistics.median(s["step_ms"][k] for s in seeds) for k in arms}
    if ctl:
        rms = math.sqrt(statistics.fmean(c * c for c in ctl))
        out["control_rms"] = rms
        if lag:
            out["ratio_to_control"] = (abs(out["lagged_minus_exact_mean"]) / rms) if rms > 0 else math.inf
    return out


def table(report: dict[str, Any]) -> str:
    lines = []
    for s in report["seeds"]:
        h = "  ".join(f"{k} {v:.4f}" for k, v in s["held_out"].items())
        diffs = "  ".join(f"{k} {v:+.5f}" for k, v in s.items() if k.endswith("_minus_exact"))
        lines.append(f"seed {s['seed']}: held-out {h}; {diffs}")
        if "lag" in s:
            g = s["lag"]
            lines.append(f"  lagged |used−exact|/exact median {g['rel_diff_median']:.4f}, p90 {g['rel_diff_p90']:.4f}, "
                         f"max {g['rel_diff_max']:.4f} (step {g['rel_diff_max_step']}); clipping active exact "
                         f"{g['active_exact']:.0%} / used {g['active_used']:.0%}")
    m = report["summary"]
    parts = [f"{k} {v:+.5f}" if isinstance(v, float) else f"{k} {v}" for k, v in m.items()
             if k.endswith(("_mean", "_95", "control_rms", "ratio_to_control"))]
    lines.append("; ".join(parts))
    lines.append("step, ms (median over seeds): " + ", ".join(f"{k} {v:.1f}" for k, v in m["step_ms_median"].items()))
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.clip_lag", description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, help="a prepared-data folder (default: a synthetic one)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--clip", type=float, default=1.0, help="training.grad_clip (the trainer's default 1.0)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-control", action="store_true", help="skip the nudged and normal runs")
    p.add_argument("--runs", help=f"the arms, comma-separated (default: all of {', '.join(RUNS)}); exact is always run")
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    from trainer.config.run_config import ConfigError
    from trainer.step.lean import import_library

    try:
        import_library()
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ternit-clip-lag-") as tmp:
        data = open_prepared(args.data or make_prepared(Path(tmp) / "data", vocab=300, sentences=6000))
        cfg = ModelConfig(context=args.context, width=args.width, heads=args.heads, layers=args.layers,
                          vocab=data.vocab_size)
        t = TrainingConfig(batch_per_card=args.batch, lr=args.lr, warmup_steps=max(1, args.steps // 10),
                           steps_to=args.steps, grad_clip=args.clip)
        runs = ("lagged", "exact", "fused") if args.no_control else RUNS
        if args.runs:
            asked = tuple(r.strip() for r in args.runs.split(","))
            unknown = [r for r in asked if r not in RUNS]
            if unknown:
                print(f"unknown arm(s) {', '.join(unknown)} (known: {', '.join(RUNS)})", file=sys.stderr)
                return 2
            runs = ("exact", *(r for r in asked if r != "exact"))
        started = time.perf_counter()
        seeds = []
        for k in range(args.seeds):
            seeds.append(one_seed(t.seed + k, data, cfg, t, args.precision, args.steps, runs))
            print(f"seed {t.seed + k} done", file=sys.stderr, flush=True)
        report = {
            "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                        "threads": args.threads, "torch": torch.__version__},
            "data": str(args.data) if args.data else "synthetic (bench/synthetic.py)",
            "model": {"context": cfg.context, "width": cfg.width, "heads": cfg.heads, "layers": cfg.layers,
                      "vocab": cfg.vocab, "batch": args.batch},
            "steps": args.steps, "precision": args.precision, "clip": args.clip, "lr": args.lr,
            "wall_s": time.perf_counter() - started,
            "seeds": seeds,
            "summary": summary(seeds),
        }
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main())
