"""CPU cost of one monitor-panel update (text + 10-minute plots redrawn), offscreen.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/bench_monitor_panel.py [--gpus 2]

Feeds the panel samples from the tests' fake NVML with the history already full (600
points per card), then times `show_snapshot` plus the repaint it causes (process CPU time),
for --updates updates. Offscreen drawing is Qt's software rasteriser into memory: a real
screen (GPU compositing, a larger window) costs differently; that was not measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", type=int, default=2)
    p.add_argument("--updates", type=int, default=200)
    args = p.parse_args()

    from PySide6.QtWidgets import QApplication

    app = QApplication([])
    from app.gpu.nvml import NvmlSession
    from app.gpu.sampler import Sampler
    from app.gpu.settings import MonitorSettings
    from bench.fake_nvml import FakeCard, FakeNvml
    from ui.monitor.panel import MonitorPanel

    fake = FakeNvml([FakeCard(name=f"Fake GPU {i}") for i in range(args.gpus)])
    fake.install()
    panel = MonitorPanel(Sampler(NvmlSession()), MonitorSettings(), save_settings=False)
    panel.resize(720, 300 + 380 * args.gpus)
    panel.show()
    t0 = time.time()
    snaps = []
    for i in range(600 + args.updates):
        fake.cards[0].temp = 50 + i % 30
        snap = panel.sampler.sample()
        snap.time = t0 + i
        snaps.append(snap)
    for snap in snaps[:600]:  # fill the ten-minute history
        panel.show_snapshot(snap)
    app.processEvents()
    costs = []
    for snap in snaps[600:]:
        started = time.process_time()
        panel.show_snapshot(snap)
        panel.repaint()  # draw now, as the event loop would within the second
        app.processEvents()
        costs.append((time.process_time() - started) * 1000.0)
    costs.sort()
    print(f"monitor panel, {args.gpus} GPU(s), history full, {len(costs)} updates: "
          f"median {statistics.median(costs):.2f} ms, p90 {costs[int(0.9 * (len(costs) - 1))]:.2f} "
          f"ms, max {costs[-1]:.2f} ms CPU per update (at 1 Hz: "
          f"{statistics.median(costs) / 10:.2f}% of one core)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
