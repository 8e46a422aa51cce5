"""`ternit`: the lab without the window. Each command group lives in its own module.

A group module provides `main(argv: list[str]) -> int`; it is imported only when used, so
`ternit --help` stays fast and one group's dependencies never slow down another.
"""

from __future__ import annotations

import importlib
import os
import sys

from trainer.base.streams import utf8_stdio

# name: (module, what it does in Russian, in English)
GROUPS: dict[str, tuple[str, str, str]] = {
    "data": ("app.data.cli", "наборы данных, созвездия и подготовленные данные",
             "datasets, constellations and prepared data"),
    "run": ("app.runs.cli", "запуск, список, остановка и продолжение прогонов",
            "start, list, stop and continue training runs"),
    "estimate": ("app.sizing.cli", "веса, скорость, память и данные для прогона",
                 "weights, speed, memory and data estimates for a run"),
    "monitor": ("app.gpu.cli", "память, температура и загрузка видеокарты (NVML)",
                "GPU memory, temperature and load (NVML)"),
    "queue": ("app.queue.cli", "очередь прогонов: этот ПК и аккаунты Kaggle, серии",
              "the run queue over this PC and the Kaggle accounts; series"),
    "kaggle": ("app.kaggle.cli", "аккаунты Kaggle, квота и ядра", "Kaggle accounts, quota and kernels"),
    "law": ("app.law.cli", "закон лабы: потери от числа весов и токенов по её прогонам",
            "the lab's scaling law: loss from weights and tokens, fitted to its runs"),
    "search": ("app.search.cli", "поиск гиперпараметров по свободным квотам (Optuna)",
               "a hyperparameter search over the free quotas (Optuna)"),
    "bench": ("app.cli.bench", "замеры (экономный режим, подготовка данных и др.)",
              "benchmarks (economical mode, data preparation)"),
    "sample": ("app.text.sample_cli", "текст от чекпоинта прогона", "text from a run's checkpoint"),
    "eval": ("app.text.eval_cli", "потери и бит на байт чекпоинта на файле", "loss and bits per byte of a checkpoint on a file"),
    "export": ("app.runs.export_cli", "веса чекпоинта в файл safetensors",
               "export a checkpoint's weights as safetensors"),
}


def usage() -> str:
    from ..base.i18n import t

    lines = [t("использование: ternit КОМАНДА [АРГУМЕНТЫ...]", "usage: ternit COMMAND [ARGS...]"), "",
             t("команды:", "commands:")]
    lines += [f"  {name:<10} {t(ru, en)}" for name, (_, ru, en) in GROUPS.items()]
    lines.append(t("\n`ternit КОМАНДА --help` — аргументы каждой команды.",
                   "\n`ternit COMMAND --help` for each command's arguments."))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    utf8_stdio()  # `ternit run list > runs.txt` on Windows: UTF-8, not the ANSI code page
    try:
        return _main(argv)
    except BrokenPipeError:
        # `ternit data list | head`: the reader left; not an error worth a traceback. Point
        # stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports it


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in GROUPS:
        from ..base.i18n import t

        print(t(f"ternit: нет команды {name!r}", f"ternit: unknown command {name!r}") + f"\n\n{usage()}",
              file=sys.stderr)
        return 2
    from ..base import logs

    logs.setup()  # what a broad except swallows goes to the lab's log file (README: Logs)
    from ..base import state

    state.on_wait(lambda line: print(f"ternit: {line}", file=sys.stderr, flush=True))  # a lock is waited on aloud
    module = importlib.import_module(GROUPS[name][0])
    try:
        return int(module.main(rest) or 0)
    finally:
        for line in state.repairs_to_say():  # a damaged state file set aside on the way: said once
            print(f"ternit: {line}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
