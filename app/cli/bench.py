"""`ternit bench NAME`: the lab's benchmarks. Torch-heavy ones run as their own processes."""

from __future__ import annotations

import importlib
import subprocess
import sys

from ..base.i18n import t

# name -> (kind, target, what it measures in Russian, in English). kind "module": the module
# imported and called with main(argv); "process": run as `python -m bench.x ARGS` (the
# window's core never imports torch). The tools live in bench/, outside the trainer package
# that a Kaggle kernel receives.
BENCHES: dict[str, tuple[str, str, str, str]] = {
    "trainer": ("process", "bench.step", "шаг тренера против простого цикла PyTorch",
                "trainer step against a plain PyTorch loop"),
    "economical": ("process", "bench.economical", "экономный режим (уровень, lean_state) против обычного",
                   "economical mode (level, lean_state) vs normal"),
    "data": ("module", "app.data.bench", "скорость подготовки данных", "data preparation throughput"),
    "sizing": ("module", "app.sizing.bench", "точность оценок против настоящего тренера",
               "estimate accuracy against the real trainer"),
    "sizing-gpu": ("module", "app.sizing.probe_check", "оценки против замера на видеокарте (scripts/gpu_probe.py)",
                   "estimates against a GPU probe (scripts/gpu_probe.py)"),
    "one-pass": ("process", "bench.one_pass_step", "шаг lean_state \"one_pass\" против обычного (процессор)",
                 "the lean_state \"one_pass\" step against the normal one (CPU)"),
    "memory": ("process", "bench.memory_grid", "подсчёт памяти шага тренера против оценки, все сочетания",
               "the trainer step's counted memory against the estimate, every combination"),
    "sample": ("process", "bench.sample", "генерация текста с кэшем против простого цикла; цена образцов в обучении",
               "text generation with a cache vs a plain loop; the cost of samples in training"),
    "monitor": ("module", "bench.monitor", "цена замеров видеокарты", "GPU sampling cost"),
    "window": ("process", "ui.window.bench", "время до первого окна; график потерь на 100 000 точек",
               "time to first window; the loss plot at 100,000 points"),
}


def usage() -> str:
    lines = [t("использование: ternit bench ЗАМЕР [АРГУМЕНТЫ...]", "usage: ternit bench NAME [ARGS...]"), "",
             t("замеры:", "benchmarks:")]
    lines += [f"  {name:<11} {t(ru, en)}" for name, (_, _, ru, en) in BENCHES.items()]
    lines.append(t("\n`ternit bench ЗАМЕР --help` — аргументы замера (справка и отчёты замеров — на английском).",
                   "\n`ternit bench NAME --help` for a benchmark's arguments."))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHES:
        print(t(f"ternit bench: нет замера {name!r} (есть: {', '.join(BENCHES)})",
                f"ternit bench: unknown benchmark {name!r} (known: {', '.join(BENCHES)})"), file=sys.stderr)
        return 2
    kind, target, _, _ = BENCHES[name]
    if kind == "process":
        return subprocess.call([sys.executable, "-m", target, *rest])
    return int(importlib.import_module(target).main(rest) or 0)
