"""The economical-mode benchmark's report: the device, the printed table, the JSON file
(bench.economical)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import torch

from trainer.model import economical

MB = 2**20


def describe_device(device: torch.device) -> dict[str, Any]:
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        return {
            "type": "cuda",
            "name": p.name,
            "memory_bytes": p.total_memory,
            "torch": torch.__version__,
        }
    return {
        "type": "cpu",
        "name": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        f"device: {report['device']['name']} ({report['device']['type']}); level {report['level']}"
        f"{'' if report.get('lean_state', 'off') == 'off' else ', lean_state ' + report['lean_state']}; "
        f"{report['steps']} timed steps per run, {report['series']} series ({report['schedule']}), "
        f"{report['warmup']} warm-up",
        f"level {report['level']}: {economical.ABOUT.get(report['level'], '')}",
        f"{'mode':<11} {'series':>6} {'order':>5} {'median ms':>10} {'mean ms':>9} {'IQR ms':>17} "
        f"{'peak MB':>9} {'activ. MB':>9} {'observed MB':>11}",
    ]
    for mode, runs in report["modes"].items():
        for r in runs:
            q1, q3 = r["step_time_iqr"]
            obs = f"{r['observed_bytes'] / MB:.0f}" if r["observed_bytes"] else "-"
            lines.append(
                f"{mode:<11} {r['series']:>6} {r['order']:>5} {r['step_time_median'] * 1000:>10.1f} "
                f"{r['step_time_mean'] * 1000:>9.1f} {f'{q1 * 1000:.1f}–{q3 * 1000:.1f}':>17} "
                f"{r['peak_bytes'] / MB:>9.1f} {r['activation_bytes'] / MB:>9.1f} {obs:>11}"
            )
    ra, q = report["ratios"], report["quality"]
    lines.append(
        f"economical/normal: peak {ra['peak_bytes']:.3f}, activations {ra['activation_bytes']:.3f}, "
        f"median step {ra['step_time_median']:.3f}, mean step {ra['step_time_mean']:.3f}"
        + (
            f", paired median {ra['step_time_paired_median']:.3f}"
            if "step_time_paired_median" in ra
            else ""
        )
        + (f", CPU time {ra['cpu_time_median']:.3f}" if "cpu_time_median" in ra else "")
        + (f", observed {ra['observed_bytes']:.3f}" if "observed_bytes" in ra else "")
    )
    if "peak_bytes_with_library_temporaries" in ra:
        lines.append(
            f"peak with the bound of bitsandbytes' CPU temporaries (unseen by the count) added: "
            f"{ra['peak_bytes_with_library_temporaries']:.3f}"
        )
    if "ops_per_step" in ra:
        n0, e0 = report["modes"]["normal"][0], report["modes"]["economical"][0]
        lines.append(
            f"work per step: operator calls (kernel launches) {e0['ops_per_step']} vs "
            f"{n0['ops_per_step']} ({ra['ops_per_step']:.3f}), FLOPs {e0['flops_per_step']:.3g} vs "
            f"{n0['flops_per_step']:.3g} ({ra['flops_per_step']:.3f})"
        )
    lines.append(
        f"held-out loss on {q['segments']} segments: normal {q.get('normal_loss', float('nan')):.4f}, "
        f"economical {q.get('economical_loss', float('nan')):.4f}, difference {q['diff']:+.3g} "
        f"(95% CI {q['ci95'][0]:+.3g} … {q['ci95'][1]:+.3g})"
    )
    if "rounding" in q:
        rc = q["rounding"]
        lines.append(
            "rounding control (normal mode from weights nudged by 2^-23): differences "
            + ", ".join(f"{d:+.3g}" for d in rc["control_diffs"])
            + f"; the economical difference is {rc['ratio_to_control']:.2f}x their RMS"
            + (" — within rounding noise" if rc["within_rounding_noise"] else " — beyond rounding noise")
        )
    met = report["targets"]["met"]
    lines.append(
        "targets: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in met.items())
    )
    return "\n".join(lines)



def write_json(path: Path, report: dict[str, Any]) -> None:
    """Atomically: a temporary file in the same folder, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


