"""`ternit bench NAME`: the lab's benchmarks. Torch-heavy ones run as trainer processes."""

from __future__ import annotations

import importlib
import subprocess
import sys

# name -> ("module", "app.x.y") imported and called with main(argv), or
#         ("process", "trainer.x") run as `python -m trainer.x ARGS` (the window's core
#         never imports torch).
BENCHES: dict[str, tuple[str, str, str]] = {
    "trainer": ("process", "trainer.bench", "trainer step against a plain PyTorch loop"),
    "economical": ("process", "trainer.bench_economical", "economical vs normal mode"),
    "data": ("module", "app.data.bench", "data preparation throughput"),
    "sizing": ("module", "app.sizing.bench", "estimate accuracy against the real trainer"),
    "sizing-gpu": ("module", "app.sizing.probe_check", "estimates against a GPU probe (scripts/gpu_probe.py)"),
    "monitor": ("module", "app.gpu.bench", "GPU sampling cost"),
    "window": ("process", "ui.bench_window", "time to first window; the loss plot at 100,000 points"),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: ternit bench NAME [ARGS...]\n\nbenchmarks:")
        for name, (_, _, about) in BENCHES.items():
            print(f"  {name:<11} {about}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHES:
        print(f"ternit bench: unknown benchmark {name!r} (known: {', '.join(BENCHES)})", file=sys.stderr)
        return 2
    kind, target, _ = BENCHES[name]
    if kind == "process":
        return subprocess.call([sys.executable, "-m", target, *rest])
    return int(importlib.import_module(target).main(rest) or 0)
