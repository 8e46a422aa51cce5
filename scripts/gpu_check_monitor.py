"""What the GPU monitor shows on a real NVIDIA card: run on a machine with one, record in PERF.md.

    .venv/bin/python scripts/gpu_check_monitor.py [--load-seconds 15] [--alloc-mb 2048]

Prints one JSON object:
- "cli": `ternit monitor --once --json` run as a process (exit code and its JSON);
- "idle": one sample of every card before any load;
- "load": a torch process (the stand-in trainer) allocates --alloc-mb on cuda:0 and runs
  matmuls; the monitor follows its pid. Recorded side by side: what the process *allocated*
  (torch.cuda.memory_allocated / max_memory_allocated, like the trainer's mem_alloc_mb /
  mem_peak_mb) and what NVML reports as *used* by that process and on the card in all;
  utilisation, temperature, power and clocks under load;
- "fields_na": which fields this card/driver does not report;
- "cost": `ternit bench monitor` windows against the real driver (CPU per sample).
Needs torch with CUDA for the load part; without it the load part says why it was skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.gpu import bench, present  # noqa: E402
from app.gpu.nvml import NvmlSession  # noqa: E402
from app.gpu.sampler import Sampler  # noqa: E402

LOAD = r"""
import json, sys, time, torch
alloc_mb, seconds = float(sys.argv[1]), float(sys.argv[2])
dev = torch.device("cuda:0")
block = torch.empty(int(alloc_mb * 2**20), dtype=torch.uint8, device=dev)
a = torch.randn(4096, 4096, device=dev)
b = torch.randn(4096, 4096, device=dev)
torch.cuda.synchronize()
print(json.dumps({"ready": True, "name": torch.cuda.get_device_name(0)}), flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    c = a @ b
    torch.cuda.synchronize()
print(json.dumps({
    "mem_alloc_mb": torch.cuda.memory_allocated(dev) / 2**20,
    "mem_peak_mb": torch.cuda.max_memory_allocated(dev) / 2**20,
    "mem_reserved_mb": torch.cuda.memory_reserved(dev) / 2**20,
    "torch": torch.__version__, "cuda": torch.version.cuda,
}), flush=True)
"""


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def sample_dict(snap) -> dict:
    data = snap.to_dict()
    data["message"] = present.status_text(snap, "en")
    data["warnings"] = [a.text for a in present.warnings(snap, lang="en")]
    return data


def run_cli() -> dict:
    proc = subprocess.run([sys.executable, "-m", "app.cli", "monitor", "--once", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, TERNIT_LANG="en"))
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        out = proc.stdout[-2000:]
    return {"returncode": proc.returncode, "output": out, "stderr": proc.stderr[-2000:]}


def run_load(alloc_mb: float, seconds: float) -> dict:
    try:
        import torch  # noqa: F401  (only to know whether the load can run)
    except ImportError:
        return {"skipped": "torch is not installed"}
    proc = subprocess.Popen([sys.executable, "-c", LOAD, str(alloc_mb), str(seconds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    if not first:
        proc.wait(60)
        return {"skipped": "the load process failed", "stderr": proc.stderr.read()[-2000:]}
    sampler = Sampler(NvmlSession())
    sampler.set_trainer_pid(proc.pid)
    samples = []
    while proc.poll() is None:
        samples.append(sample_dict(sampler.sample()))
        time.sleep(1.0)
    rest = proc.stdout.read().strip().splitlines()
    torch_side = json.loads(rest[-1]) if rest else {}
    under_load = [s for s in samples if s["status"] == "ok"]
    card0 = [s["gpus"][0] for s in under_load if s["gpus"]]
    return {
        "started": json.loads(first),
        "allocated_by_process": torch_side,
        "samples": len(samples),
        "last_sample": samples[-1] if samples else None,
        "nvml_process_mem_mb": [g["trainer_mem_mb"] for g in card0],
        "nvml_process_mem_note": card0[-1]["trainer_mem_note"] if card0 else None,
        "card_used_mb": [g["mem_used_mb"] for g in card0],
        "util_pct": [g["util_pct"] for g in card0],
        "temp_c": [g["temp_c"] for g in card0],
        "power_w": [g["power_w"] for g in card0],
        "clock_sm_mhz": [g["clock_sm_mhz"] for g in card0],
        "returncode": proc.returncode,
        "stderr": proc.stderr.read()[-1000:],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--load-seconds", type=float, default=15.0)
    p.add_argument("--alloc-mb", type=float, default=2048.0)
    p.add_argument("--bench-seconds", type=float, default=5.0)
    args = p.parse_args()
    started = time.time()
    session = NvmlSession()
    sampler = Sampler(session)
    time.sleep(0.3)  # psutil's first CPU figure needs an interval
    idle = sample_dict(sampler.sample())
    result = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "nvidia_ml_py": _version("nvidia-ml-py"),
        "driver": session.driver,
        "cli": run_cli(),
        "idle": idle,
        "fields_na": {str(g["index"]): g["na"] for g in idle["gpus"]},
    }
    result["load"] = (run_load(args.alloc_mb, args.load_seconds) if idle["status"] == "ok"
                      else {"skipped": idle["message"]})
    result["cost"] = bench.measure(args.bench_seconds, 2, 1.0, os.getpid())
    result["cost"].pop("windows", None)
    result["seconds"] = round(time.time() - started, 1)
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
