"""`ternit bench monitor`: what sampling once a second costs in CPU.

Side by side in one run: windows of the process doing nothing (idle) and windows with the
sampler thread running, alternating which comes first in each round. For each window the
process's CPU time over its wall time is "% of one core"; the sampler's cost is the sampled
window minus its idle neighbour, reported as median and range over the rounds. Each
sample's own CPU time (thread time) is also kept: median, 90th percentile, max. The very
first sample (NVML initialisation and the cards' static values) is reported apart.

`--fake-gpus N` runs against a fake NVML (bench/fake_nvml.py, also the tests' own): it
measures the lab's own Python work per card, not the driver's time inside
real NVML calls, which only a machine with a GPU can measure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from typing import Any

from app.gpu.nvml import NvmlSession
from app.gpu.sampler import Sampler, SamplerThread
from app.gpu.samples import Snapshot

from .fake_nvml import FakeCard, FakeNvml


class TimedSampler(Sampler):
    """A Sampler that records the thread CPU time of each sample (seconds)."""

    def __init__(self, session: NvmlSession) -> None:
        super().__init__(session)
        self.costs: list[float] = []

    def sample(self) -> Snapshot:
        started = time.thread_time()
        snap = super().sample()
        self.costs.append(time.thread_time() - started)
        return snap


def _window(seconds: float, sampler: Sampler | None, interval_s: float) -> dict[str, float]:
    thread = None
    if sampler is not None:
        thread = SamplerThread(sampler, lambda snap: None, interval_s)
    cpu0, wall0 = time.process_time(), time.monotonic()
    if thread is not None:
        thread.start()
    threading.Event().wait(seconds)
    if thread is not None:
        thread.stop()
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    out = {"cpu_s": cpu, "wall_s": wall, "pct_one_core": 100.0 * cpu / wall}
    if thread is not None:
        out["samples"] = thread.samples
        out["sampler_thread_pct"] = 100.0 * thread.cpu_s / wall
    return out


def measure(seconds: float = 10.0, rounds: int = 3, interval_s: float = 1.0,
            trainer_pid: int | None = None) -> dict[str, Any]:
    """Alternating idle / sampling windows; see the module's text."""
    session = NvmlSession()
    sampler = TimedSampler(session)
    sampler.set_trainer_pid(trainer_pid)
    first = sampler.sample()  # NVML init + static values: reported apart
    first_cost = sampler.costs.pop()
    windows: list[dict[str, Any]] = []
    deltas: list[float] = []
    for r in range(rounds):
        order = ("idle", "sampling") if r % 2 == 0 else ("sampling", "idle")
        got: dict[str, dict[str, float]] = {}
        for kind in order:
            got[kind] = _window(seconds, sampler if kind == "sampling" else None, interval_s)
            windows.append({"round": r, "kind": kind, **got[kind]})
        deltas.append(got["sampling"]["pct_one_core"] - got["idle"]["pct_one_core"])
    costs_ms = sorted(c * 1000.0 for c in sampler.costs)
    sampling = [w for w in windows if w["kind"] == "sampling"]
    return {
        "status": first.status,
        "gpus": len(first.gpus),
        "trainer_pid": trainer_pid,
        "seconds_per_window": seconds,
        "rounds": rounds,
        "interval_s": interval_s,
        "first_sample_ms": first_cost * 1000.0,
        "sample_ms": {
            "n": len(costs_ms),
            "median": statistics.median(costs_ms) if costs_ms else None,
            "p90": costs_ms[int(0.9 * (len(costs_ms) - 1))] if costs_ms else None,
            "max": costs_ms[-1] if costs_ms else None,
        },
        "sampler_thread_pct": _spread([w["sampler_thread_pct"] for w in sampling]),
        "process_delta_pct": _spread(deltas),
        "windows": windows,
        "machine": {"cpus": os.cpu_count(), "loadavg": _loadavg()},
    }


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def report(result: dict[str, Any]) -> str:
    s, d, th = result["sample_ms"], result["process_delta_pct"], result["sampler_thread_pct"]
    gpus = f"{result['gpus']} GPU(s)" if result["status"] == "ok" else result["status"]
    lines = [
        f"GPU monitor sampling cost — {gpus}, one sample every {result['interval_s']:g} s, "
        f"{result['rounds']} rounds of {result['seconds_per_window']:g} s idle + "
        f"{result['seconds_per_window']:g} s sampling (order alternating)",
        f"machine: {result['machine']['cpus']} CPUs, load average {result['machine']['loadavg']}",
        f"first sample (NVML init, static values): {result['first_sample_ms']:.2f} ms CPU",
        f"per sample: median {s['median']:.3f} ms, p90 {s['p90']:.3f} ms, max {s['max']:.3f} ms "
        f"CPU (n={s['n']})" if s["n"] else "per sample: no samples",
        f"sampler thread: median {th['median']:.4f}% of one core "
        f"(range {th['min']:.4f}–{th['max']:.4f}%)",
        f"process, sampling minus idle: median {d['median']:+.4f}% of one core "
        f"(range {d['min']:+.4f} to {d['max']:+.4f}%)",
        "budget: under 1% of one core — "
        + ("met" if th["median"] < 1.0 and d["median"] < 1.0 else "NOT met"),
    ]
    return "\n".join(lines)


def _install_fake(n: int) -> FakeNvml:
    fake = FakeNvml([FakeCard(name=f"Fake GPU {i}", uuid=f"GPU-fake-{i}") for i in range(n)])
    fake.cards[0].processes = [(os.getpid(), 1024.0), (1, 64.0)]
    fake.install()
    return fake


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ternit bench monitor", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="length of each window (10)")
    p.add_argument("--rounds", type=int, default=3, help="idle/sampling pairs (3)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples (1)")
    p.add_argument("--fake-gpus", type=int, default=0,
                   help="measure against the fake NVML (bench/fake_nvml.py) with N cards")
    p.add_argument("--no-trainer", action="store_true",
                   help="do not follow a trainer process (default: follow this process)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.rounds < 1 or args.interval <= 0:
        print("ternit bench monitor: --seconds, --rounds and --interval must be positive",
              file=sys.stderr)
        return 2
    fake = None
    if args.fake_gpus:
        fake = _install_fake(args.fake_gpus)
    try:
        result = measure(args.seconds, args.rounds, args.interval,
                         None if args.no_trainer else os.getpid())
    finally:
        if fake is not None:
            fake.uninstall()
    result["fake_gpus"] = args.fake_gpus
    print(json.dumps(result, indent=1) if args.json else report(result))
    return 0
