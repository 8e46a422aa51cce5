"""Make the README's screenshot from real runs: `python -m ui.window.demo_screenshot OUT.png [--lang ru]`.

In a fresh lab folder (TERNIT_HOME in a temporary folder, or --home) it prepares the demo
constellation, trains a small model on the CPU with the real trainer, stops it part-way
(time limit), continues it in a second run as the lab's «Продолжить» does, and then renders
the window with `ternit-lab --snapshot`. Takes a few minutes on a laptop CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def _run(args: list[str], env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ui.window.demo_screenshot")
    p.add_argument("out")
    p.add_argument("--lang", default="ru", choices=["ru", "en"])
    p.add_argument("--home", help="the lab folder to use (default: a new temporary one)")
    p.add_argument("--steps", type=int, default=240)
    args = p.parse_args(argv)
    home = Path(args.home or tempfile.mkdtemp(prefix="ternit-shot-"))
    env = {**os.environ, "TERNIT_HOME": str(home), "TERNIT_LANG": args.lang, "QT_QPA_PLATFORM": "offscreen"}
    prepared = _run(["-m", "app.cli", "data", "prepare", "--constellations", "demo", "--vocab", "2000",
                     "--context", "64"], env)
    data_dir = next(line.strip() for line in prepared.splitlines() if line.strip().startswith("/"))
    config = {
        "name": "demo-tiny",
        "model": {"context": 64, "width": 64, "heads": 4, "layers": 2, "vocab": 2000},
        "training": {"batch_per_card": 8, "steps_to": args.steps, "limit_min": 30, "lr": 0.004,
                     "warmup_steps": 20, "eval_every": 20, "eval_segments": 32},
        "data": {"dir": data_dir, "constellations": ["demo"]},
        "target": {"kind": "local", "gpu": "cpu"},
    }
    cfg_path = home / "demo-run.json"
    cfg_path.write_text(json.dumps(config), encoding="utf-8")
    # The first leg stops part-way (as a time limit would), the second continues it.
    code = ("import sys; from app.runs import RunManager; m = RunManager(); "
            f"r = m.start(sys.argv[1], stop_at_step={args.steps * 2 // 3}); m.wait(r.id); "
            "c = m.start_continue(r.id); m.wait(c.id); print(m.registry.get(c.id).status)")
    status = _run(["-c", code, str(cfg_path)], env).strip()
    print(f"runs done ({status}) in {home}", file=sys.stderr)
    _run(["-m", "ui.main", "--snapshot", args.out, "--lang", args.lang], env)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
