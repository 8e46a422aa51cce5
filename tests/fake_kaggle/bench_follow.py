"""How fast the lab turns a kernel's log stream into events.jsonl (no network): the cost of
a reconnect's replay (lines skipped) against lines written. Busy-machine figures; run:
`python -m tests.fake_kaggle.bench_follow [LINES]`. Alternates the two cases, 5 rounds each."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.kaggle.follow import RunSink, follow  # noqa: E402


def stream(n: int) -> list[dict]:
    out = []
    for i in range(1, n + 1):
        line = json.dumps({"event": "step", "time": 1.0 + i / 1000, "step": i, "loss": 5.0 - i * 1e-5,
                           "lr": 1e-3, "tokens_seen": i * 12288, "step_ms": 120.0, "tokens_per_s": 102000.0,
                           "mem_alloc_mb": 3000.0, "mem_peak_mb": 5000.0})
        out.append({"stream_name": "stdout", "time": i, "data": line + "\n"})
    return out


def once(events: list[dict], skip: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        sink = RunSink(Path(tmp))
        t0 = time.perf_counter()
        follow(events, skip, sink, lambda _n: None)
        sink.close()
        return time.perf_counter() - t0


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    events = stream(n)
    write, replay = [], []
    for r in range(5):
        for case in (("write", "replay") if r % 2 == 0 else ("replay", "write")):
            (write if case == "write" else replay).append(once(events, 0 if case == "write" else n))
    for name, xs in (("write", write), ("replay (all skipped)", replay)):
        med = statistics.median(xs)
        print(f"{name:>22}: median {med:.3f} s for {n:,} lines = {n / med:,.0f} lines/s "
              f"(min {min(xs):.3f}, max {max(xs):.3f})")


if __name__ == "__main__":
    main()
