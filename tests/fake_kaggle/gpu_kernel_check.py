"""Run the lab's kernel script on a machine with a GPU, as Kaggle would: inputs laid out
under TERNIT_KAGGLE_ROOT/input with their marker files, torchrun on every GPU it sees.

Leg 1 stops by a tiny time limit; leg 2 resumes from leg 1's checkpoint (as a checkpoint
dataset) and ends at steps_to. Needs torch, numpy and tokenizers; not part of pytest (CI
has no GPU): `python -m tests.fake_kaggle.gpu_kernel_check OUT_DIR`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.kaggle.kernel import KernelPlan, render  # noqa: E402
from bench.synthetic import make_prepared  # noqa: E402


def marker(folder: Path, kind: str, digest: str) -> None:
    (folder / "TERNIT_MARKER.json").write_text(json.dumps({"kind": kind, "hash": digest}))


def run_leg(base: Path, name: str, config: dict, limit_min: float, ckpt: Path | None) -> dict:
    root = base / name
    inp = root / "input"
    shutil.copytree(base / "code", inp / "ternit-code-x")
    shutil.copytree(base / "data", inp / "ternit-data-x")
    ckpt_hash = ""
    if ckpt is not None:
        (inp / "ternit-ckpt-x").mkdir(parents=True)
        shutil.copy(ckpt, inp / "ternit-ckpt-x" / ckpt.name)
        ckpt_hash = hashlib.sha256(ckpt.read_bytes()).hexdigest()
        marker(inp / "ternit-ckpt-x", "checkpoint", ckpt_hash)
    (root / "working").mkdir(parents=True)
    plan = KernelPlan("user", f"ternit-{name}", config, "C", "D", ckpt_hash, ckpt.name if ckpt else "", limit_min, ())
    script = root / "script.py"
    script.write_text(render(plan))
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH")}
    env["TERNIT_KAGGLE_ROOT"] = str(root)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, str(script)], cwd=root / "working", env=env,
                         capture_output=True, text=True, timeout=400)
    wall = time.monotonic() - t0
    run_dir = root / "working" / "run"
    events = [json.loads(ln) for ln in (run_dir / "events.jsonl").read_text().splitlines() if ln.strip()]
    human = [ln for ln in (out.stdout + out.stderr).splitlines() if not ln.startswith("{")]
    start = next(e for e in events if e["event"] == "start")
    end = next(e for e in reversed(events) if e["event"] == "end")
    steps = [e for e in events if e["event"] == "step"]
    ckpts = sorted((run_dir / "checkpoints").glob("step-*.pt"))
    return {"leg": name, "rc": out.returncode, "wall_s": round(wall, 1), "device": start.get("device"),
            "world_size": start.get("world_size"), "precision": start.get("precision"),
            "first_step": steps[0]["step"] if steps else None, "last_step": end["step"], "end": end["reason"],
            "first_loss": steps[0]["loss"] if steps else None, "last_loss": steps[-1]["loss"] if steps else None,
            "checkpoints_left": [p.name for p in ckpts], "kernel_lines": human[:6] + human[-3:],
            "ckpt": str(ckpts[-1]) if ckpts else None}


def main(out_dir: str) -> int:
    base = Path("/tmp/ternit-gpu-check")
    shutil.rmtree(base, ignore_errors=True)
    data = make_prepared(base / "data")
    marker(data, "data", "D")
    shutil.copytree(ROOT / "trainer", base / "code" / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
    marker(base / "code", "code", "C")
    config = {"name": "gpu-check", "model": {"context": 64, "width": 64, "heads": 2, "layers": 2, "vocab": 300},
              "training": {"batch_per_card": 8, "steps_to": 1000, "limit_min": 5, "eval_every": 500,
                           "eval_segments": 4, "warmup_steps": 10},
              "data": {"dir": ""}, "target": {"kind": "kaggle"}}
    one = run_leg(base, "leg1", config, 0.002, None)  # ~0.1 s of training: stops by its limit
    two = run_leg(base, "leg2", config, 5.0, Path(one["ckpt"]))
    try:
        smi = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip()
    except OSError:
        smi = "no nvidia-smi"
    report = {"nvidia_smi": smi, "legs": [one, two]}
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "gpu_kernel_check.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    ok = one["rc"] == 0 and one["end"] == "time_limit" and two["rc"] == 0 and two["end"] == "steps_reached" \
        and two["first_step"] == one["last_step"] + 1 and two["device"].startswith("cuda")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
