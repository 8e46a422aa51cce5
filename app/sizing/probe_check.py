"""`ternit bench sizing-gpu PROBE.json`: the sizing model against a GPU's own measurements.

scripts/gpu_probe.py (run by scripts/gpu_checks.sh on a GPU session) times the trainer's
step at a ladder of sizes on one card. This reads its JSON and asks app.sizing what a user
would be told:
- speed: each normal-mode size predicted from all the others (leave one out) as the lab
  would once those runs were in its history (a fit when two or more differ in compute,
  else the nearest run's scaling), beside the nearest single run's scaling;
- memory: the predicted peak (with the card's cuBLAS workspaces) against the peak the
  probe measured (torch.cuda.max_memory_allocated over the timed steps);
- the economical levels: the predicted slowdown (extra arithmetic only) against the
  measured one at the same size.
Pure arithmetic on the file: it runs anywhere, no torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from trainer.plan.memory_model import MiB, cublas_workspace_bytes, estimate_memory
from trainer.plan.step_cost import economical_factor

from .speed import estimate_speed, measured_shape, nearest_measured

GPU = "local"  # the probe's card is the machine's own


def _as_run(case: dict[str, Any], index: int) -> dict[str, Any]:
    """A probe case as the run history gives a measured run (app.sizing.speed)."""
    return {
        "run": f"probe-{index}", "gpu": GPU, "params": case["params"], "layers": case["layers"],
        "width": case["width"], "heads": case["heads"], "context": case["context"],
        "vocab": case["vocab"], "batch": case["batch"], "tokens_per_s": case["tokens_per_s"],
        "economical": case["level"] if case["level"] != "off" else False,
    }


def _label(c: dict[str, Any]) -> str:
    return f"L{c['layers']} d{c['width']} n{c['context']} b{c['batch']}"


def speed_rows(cases: list[dict[str, Any]], device: str) -> list[dict[str, Any]]:
    """Each normal-mode size predicted from all the others, and from the nearest one alone."""
    runs = [_as_run(c, i) for i, c in enumerate(cases)]
    rows = []
    for i, c in enumerate(cases):
        others = runs[:i] + runs[i + 1 :]
        s = measured_shape(c)
        fitted = estimate_speed(s, GPU, measured=others, local_name=device)
        near = nearest_measured(s, GPU, "off", others)
        assert near is not None
        alone = estimate_speed(s, GPU, measured=[near[0]], local_name=device)
        rows.append({
            "size": _label(c), "measured": c["tokens_per_s"],
            "predicted": fitted.tokens_per_s, "kind": fitted.kind,
            "error": fitted.tokens_per_s / c["tokens_per_s"] - 1,
            "nearest": _label(cases[runs.index(near[0])]),
            "nearest_error": alone.tokens_per_s / c["tokens_per_s"] - 1,
        })
    return rows


def memory_rows(cases: list[dict[str, Any]], compute_capability: tuple[int, int] | None) -> list[dict[str, Any]]:
    """Predicted peak (bf16, one card, the level of the case) against the measured one."""
    rows = []
    for c in cases:
        if c.get("peak_mb") is None:
            continue
        m = estimate_memory(measured_shape(c), "bf16", 1, c["level"], cublas_workspace_bytes(compute_capability))
        rows.append({"size": _label(c), "level": c["level"], "measured_mb": c["peak_mb"],
                     "predicted_mb": m.peak / MiB, "error": m.peak / MiB / c["peak_mb"] - 1})
    return rows


def economical_rows(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Measured step-time ratio of each economical case to the normal case of its size."""
    normal = {_label(c): c for c in cases if c["level"] == "off" and not c.get("compiled")}
    rows = []
    for c in cases:
        base = normal.get(_label(c))
        if c["level"] == "off" or c.get("compiled") or base is None:
            continue
        rows.append({"size": _label(c), "level": c["level"],
                     "measured_ratio": c["wall_ms"] / base["wall_ms"],
                     "arithmetic_ratio": economical_factor(measured_shape(c), c["level"]),
                     "kernel_ratio": (c["kernels"] / base["kernels"]) if c.get("kernels") and base.get("kernels") else None})
    return rows


def _distinct_normal(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The normal, uncompiled, successful cases, one per size (the first of repeats)."""
    seen: dict[str, dict[str, Any]] = {}
    for c in cases:
        if "error" in c or c.get("level") != "off" or c.get("compiled"):
            continue
        seen.setdefault(_label(c), c)
    return list(seen.values())


def check(probe: dict[str, Any], compute_capability: tuple[int, int] | None = (9, 0)) -> dict[str, Any]:
    cases = [c for c in probe.get("cases", []) if "error" not in c]
    normal = _distinct_normal(cases)
    speed = speed_rows(normal, probe.get("device", "")) if len(normal) >= 2 else []
    return {"device": probe.get("device"), "speed": speed, "memory": memory_rows(cases, compute_capability),
            "economical": economical_rows(cases)}


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def report(r: dict[str, Any]) -> str:
    lines = [f"device: {r['device']}"]
    if r["speed"]:
        lines.append("speed, each size from all the others (and from the nearest one alone):")
        for row in r["speed"]:
            lines.append(f"  {row['size']:<24} measured {row['measured']:>11,.0f} tok/s  predicted "
                         f"{row['predicted']:>11,.0f} ({row['kind']}) {_pct(row['error']):>9}   nearest "
                         f"{row['nearest']}: {_pct(row['nearest_error'])}")
        errs = [abs(x["error"]) for x in r["speed"]]
        near = [abs(x["nearest_error"]) for x in r["speed"]]
        lines.append(f"  median |error| {statistics.median(errs) * 100:.1f} %, worst {max(errs) * 100:.1f} %; "
                     f"nearest alone median {statistics.median(near) * 100:.1f} %, worst {max(near) * 100:.1f} %")
    if r["memory"]:
        lines.append("memory, predicted peak against measured:")
        for row in r["memory"]:
            lines.append(f"  {row['size']:<24} {row['level']:<9} measured {row['measured_mb']:>9.1f} MB  "
                         f"predicted {row['predicted_mb']:>9.1f} MB {_pct(row['error']):>9}")
    if r["economical"]:
        lines.append("economical levels, step time against the normal mode at the same size:")
        for row in r["economical"]:
            kr = f", kernels {row['kernel_ratio']:.3f}x" if row["kernel_ratio"] else ""
            lines.append(f"  {row['size']:<24} {row['level']:<9} measured {row['measured_ratio']:.3f}x, "
                         f"arithmetic {row['arithmetic_ratio']:.3f}x{kr}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ternit bench sizing-gpu", description=__doc__.splitlines()[0])
    p.add_argument("probe", type=Path, help="the JSON scripts/gpu_probe.py wrote")
    p.add_argument("--cc", default="9.0", help="the card's compute capability (cuBLAS workspaces), e.g. 7.5")
    p.add_argument("--out", type=Path, help="also write the comparison as JSON here")
    args = p.parse_args(argv)
    try:
        probe = json.loads(args.probe.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"ternit bench sizing-gpu: cannot read {args.probe}: {e}")
        return 2
    major, _, minor = args.cc.partition(".")
    result = check(probe, (int(major), int(minor or 0)))
    print(report(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0
