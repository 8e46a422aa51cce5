"""Window benchmarks: `python -m ui.window.bench startup|plot [N]`, `startup N --against DIR`.

startup: N cold starts of `ternit-lab --print-startup` (a new interpreter each time, in an
empty lab folder, modules from their .pyc as on a user's machine): the time from the
process's launch to the first shown (painted) window and the CPU seconds the process spent
to it (what a loaded machine's wall time hides), from importing ui.main to it and to the
plot and monitor built, and the whole child process as the parent times it. Median and
spread. With --against DIR, as many starts of the checkout in DIR, alternating with these.

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


def _start_once(tree: str | None) -> tuple[float, float, float, float, float]:
    """One cold start of `python -m ui.main --print-startup` in a new, empty lab folder, from
    `tree` (a checkout; None: this one): (launch → shown, import → shown, import → built,
    CPU seconds to shown, the whole child's wall)."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "TERNIT_HOME": home, "QT_QPA_PLATFORM": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
               "TERNIT_CPU_PROBE": os.environ.get("TERNIT_CPU_PROBE", "0")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as a user's start: modules from their .pyc
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "ui.main", "--print-startup"], env=env, cwd=tree,
                             capture_output=True, text=True, timeout=120)
        wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    shown, built, since_launch, cpu = (float(x) for x in out.stdout.strip().splitlines()[-1].split())
    return since_launch, shown, built, cpu, wall


def startup(n: int, against: str | None = None) -> int:
    """N starts of this checkout, and with `against` (another checkout) as many of that one,
    the two alternating (A B B A A B …) so that a machine's changing load falls on both."""
    trees = {"this": None, **({"other": against} if against else {})}
    results: dict[str, list[tuple[float, ...]]] = {k: [] for k in trees}
    for k in trees.values():  # one start each first: .pyc written, files in the OS cache
        _start_once(k)
    for i in range(n):
        order = list(trees) if i % 2 == 0 else list(reversed(trees))
        for key in order:
            results[key].append(_start_once(trees[key]))
    for key, rows in results.items():
        name = "this checkout" if key == "this" else against
        cols = list(zip(*rows, strict=True))
        print(f"{name}:")
        print(f"  launch → first shown window: {_spread(list(cols[0]))}")
        print(f"  CPU to the first shown window: {_spread(list(cols[3]))}")
        print(f"  `import ui.main` → first shown window: {_spread(list(cols[1]))}")
        print(f"  `import ui.main` → plot and GPU monitor built: {_spread(list(cols[2]))}")
        print(f"  the whole child (start, window, plot, exit): {_spread(list(cols[4]))}")
    return 0


def plot(n: int) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from ui.runs.loss_plot import LossPlot

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
    against = None
    if argv[:1] == ["startup"] and len(argv) == 4 and argv[2] == "--against":
        against, argv = argv[3], argv[:2]
    if not argv or argv[0] not in ("startup", "plot") or len(argv) > 2 or (len(argv) == 2 and not argv[1].isdigit()):
        print(__doc__, file=sys.stderr)
        print(f"ternit bench window: error: expected `startup|plot [N]` or `startup N --against DIR`, got "
              f"{' '.join(argv) or 'nothing'}", file=sys.stderr)
        return 2
    n = int(argv[1]) if len(argv) > 1 else (7 if argv[0] == "startup" else 20)
    return startup(n, against) if argv[0] == "startup" else plot(n)


if __name__ == "__main__":
    sys.exit(main())
