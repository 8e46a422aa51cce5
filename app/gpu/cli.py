"""`ternit monitor [--once] [--json]`: the monitor's samples on the command line.

No NVIDIA GPU is a normal answer (exit 0, with the plain message); only a bad argument is
an error. `--json` prints one JSON object per sample, one per line (the Snapshot's fields
plus "message", the same words the panel shows).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from app.base.cli_args import Parser
from app.base.i18n import t

from . import present
from .sampler import Sampler
from .samples import OK, Snapshot

# psutil's CPU figure needs two readings; --once waits this long between them.
CPU_WINDOW_S = 0.25


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="ternit monitor",
        description=t("Память, температура и загрузка видеокарты (NVML), процессор и память (psutil).",
                      "GPU memory, temperature and load (NVML), CPU and RAM (psutil)."),
    )
    p.add_argument("--once", action="store_true", help=t("один замер и выход", "one sample, then exit"))
    p.add_argument("--json", action="store_true",
                   help=t("каждый замер — объект JSON в одной строке", "one JSON object per sample and line"))
    p.add_argument("--interval", type=float, default=1.0, metavar=t("СЕК", "SEC"),
                   help=t("секунд между замерами (1)", "seconds between samples (1)"))
    p.add_argument("--count", type=int, default=0, metavar="N",
                   help=t("остановиться после N замеров (0: до Ctrl-C)", "stop after N samples (0: until Ctrl-C)"))
    p.add_argument("--pid", type=int, default=None, metavar="PID",
                   help=t("показать и этот процесс (тренер) с его памятью на видеокарте",
                          "also show this process (the trainer) and its GPU memory"))
    return p


def snapshot_json(snap: Snapshot, lang: str | None = None) -> str:
    data = snap.to_dict()
    data["message"] = present.status_text(snap, lang)
    data["warnings"] = [a.text for a in present.warnings(snap, lang=lang)]
    return json.dumps(data, ensure_ascii=False)


def snapshot_text(snap: Snapshot, lang: str | None = None) -> str:
    lines = []
    if snap.status != OK:
        lines.append(present.status_text(snap, lang))
    for gpu in snap.gpus:
        view = present.gpu_view(gpu, lang=lang)
        lines.append(view.title)
        if not view.lost:
            temp = t("температура ", "temperature ", lang) + view.temperature_text
            lines.append(f"  {view.memory_text} · {temp}")
            lines.append(f"  {view.load_text}")
            if gpu.trainer_mem_mb is not None:
                lines.append("  " + t("процесс --pid на карте: ", "the --pid process on the card: ",
                                      lang) + present.mb(gpu.trainer_mem_mb))
    lines.append(present.host_text(snap.host, lang))
    if snap.trainer is not None:
        lines.append(present.trainer_text(snap.trainer, lang))
    lines += [f"! {a.text}" for a in present.warnings(snap, lang=lang)]
    lines += [f"({e})" for e in snap.errors]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.interval <= 0:
        print(t("ternit monitor: --interval должен быть больше 0", "ternit monitor: --interval must be above 0"),
              file=sys.stderr)
        return 2
    sampler = Sampler()
    if args.pid is not None:
        sampler.set_trainer_pid(args.pid)
    show = snapshot_json if args.json else snapshot_text
    stop = threading.Event()
    count = 1 if args.once else args.count
    taken = 0
    try:
        # The first CPU reading needs an interval behind it.
        stop.wait(CPU_WINDOW_S if args.once else min(args.interval, CPU_WINDOW_S))
        next_at = time.monotonic()
        while True:
            print(show(sampler.sample()), flush=True)
            taken += 1
            if count and taken >= count:
                return 0
            if not args.json:
                print(flush=True)
            next_at += args.interval
            stop.wait(max(0.0, next_at - time.monotonic()))
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # `ternit monitor | head`
        return 0
