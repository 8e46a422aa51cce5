"""Window benchmarks: `python -m ui.bench_window startup|plot [N]`.

startup: N cold starts of `ternit-lab --print-startup` (a new interpreter each time, in an
empty lab folder): the time from the process's launch to the first shown (painted) window,
from importing ui.main to it and to the plot and monitor built, and the whole child process
as the parent times it. Median and spread.

plot: one live update of the loss plot (50 new steps appended, curves redrawn, the widget
painted) with 100,000 points already on it, with the plot's settings (peak downsampling
and clip-to-view) against the same plot with both off; the two alternate, medians and
spread.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _spread(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"median {statistics.median(xs):.3f} s, min {xs[0]:.3f}, max {xs[-1]:.3f} (n={len(xs)})"


def startup(n: int) -> int:
    walls, inner, ready, launch = [], [], [], []
    for _ in range(n):
        with tempfile.TemporaryDirectory() as home:
            env = {**os.environ, "TERNIT_HOME": home, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen")}
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "ui.main", "--print-startup"], env=env,
                                 capture_output=True, text=True, timeout=120)
            walls.append(time.perf_counter() - t0)
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            shown, built, since_launch = out.stdout.strip().splitlines()[-1].split()
            inner.append(float(shown))
            ready.append(float(built))
            launch.append(float(since_launch))
    print(f"time to first shown window, from the process's launch: {_spread(launch)}")
    print(f"  from `import ui.main` to the first shown window: {_spread(inner)}")
    print(f"  from `import ui.main` to the plot and GPU monitor built: {_spread(ready)}")
    print(f"  the whole child process as the parent timed it (start, window, plot, exit): {_spread(walls)}")
    return 0


def plot(n: int) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from ui.loss_plot import LossPlot

    app = QApplication.instance() or QApplication([])

    def make(fast: bool) -> tuple[LossPlot, object]:
        view = LossPlot()
        view.resize(1000, 600)
        view.show()
        tr = view.trace("live", "bench")
        events = [{"event": "step", "step": s, "loss": 2 + 3 * math.exp(-s / 8000) + 0.2 * math.sin(s),
                   "tokens_seen": s * 12288} for s in range(1, 100_001)]
        tr.add_events("run", events)
        if not fast:
            for item in (tr.raw_curve, tr.smooth_curve):
                item.setDownsampling(auto=False, ds=1)
                item.setClipToView(False)
        tr.redraw(full=True)
        app.processEvents()
        return view, tr

    views = {"downsampled": make(True), "plain": make(False)}
    times: dict[str, list[float]] = {k: [] for k in views}
    step = 100_001
    for i in range(n):
        order = list(views) if i % 2 == 0 else list(reversed(views))
        for key in order:
            view, tr = views[key]
            t0 = time.perf_counter()
            tr.add_events("run", [{"event": "step", "step": step + j, "loss": 2.0, "tokens_seen": (step + j) * 12288}
                                  for j in range(50)])
            tr.redraw()
            view.widget.repaint()
            app.processEvents()
            times[key].append(time.perf_counter() - t0)
        step += 50
    for key, xs in times.items():
        print(f"live update at 100,000+ points, {key}: {_spread(xs)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    # Anything else than `startup|plot [N]` is a usage error: said on stderr, exit 2, no traceback.
    if not argv or argv[0] not in ("startup", "plot") or len(argv) > 2 or (len(argv) == 2 and not argv[1].isdigit()):
        print(__doc__, file=sys.stderr)
        print(f"ternit bench window: error: expected `startup|plot [N]`, got {' '.join(argv) or 'nothing'}", file=sys.stderr)
        return 2
    n = int(argv[1]) if len(argv) > 1 else (7 if argv[0] == "startup" else 20)
    return startup(n) if argv[0] == "startup" else plot(n)


if __name__ == "__main__":
    sys.exit(main())
