"""`ternit`: the lab without the window. Each command group lives in its own module.

A group module provides `main(argv: list[str]) -> int`; it is imported only when used, so
`ternit --help` stays fast and one group's dependencies never slow down another.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys

from trainer.base.streams import utf8_stdio

from ..base.i18n import LANGUAGES

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

    lines = [t("использование: ternit [--lang ru|en] КОМАНДА [АРГУМЕНТЫ...]",
               "usage: ternit [--lang ru|en] COMMAND [ARGS...]"), "",
             t("команды:", "commands:")]
    lines += [f"  {name:<10} {t(ru, en)}" for name, (_, ru, en) in GROUPS.items()]
    lines += ["", t("параметры:", "options:"),
              "  --lang ru|en  " + t("язык этого запуска (постоянный выбор — «Настройки → Язык интерфейса» "
                                     "в окне или TERNIT_LANG)",
                                     "this start's language (to keep a choice: “Settings → Interface language” "
                                     "in the window, or TERNIT_LANG)"),
              "  --version     " + t("версия лаборатории и сборка PyTorch", "the lab's version and the PyTorch build")]
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


def global_options(argv: list[str]) -> tuple[str | None, list[str]]:
    """The options before the command: `--lang ru|en` (or `--lang=en`) → (language, the
    rest). ValueError names a language the lab does not speak."""
    lang = None
    while argv and (argv[0] == "--lang" or argv[0].startswith("--lang=")):
        if argv[0] == "--lang":
            if len(argv) < 2:
                raise ValueError("--lang ru|en")
            lang, argv = argv[1], argv[2:]
        else:
            lang, argv = argv[0].split("=", 1)[1], argv[1:]
        if lang not in LANGUAGES:
            raise ValueError(f"--lang {lang}: ru|en")
    return lang, argv


def _main(argv: list[str] | None) -> int:
    from ..base.i18n import language_override, set_language, t

    try:
        lang, argv = global_options(list(sys.argv[1:] if argv is None else argv))
    except ValueError as e:
        print(t(f"ternit: язык: {e}", f"ternit: language: {e}"), file=sys.stderr)
        return 2
    if not lang:
        return _command(argv)
    before = language_override()
    set_language(lang)  # this start only: the setting stays as it is
    try:
        return _command(argv)
    finally:
        set_language(before)


def _command(argv: list[str]) -> int:
    from ..base.i18n import t

    if argv[:1] == ["--version"]:
        from ..base.version import version_lines

        print("\n".join(version_lines()))
        return 0
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in GROUPS:
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
    except sqlite3.Error as e:  # the state file past what a command handles itself: one line, not a traceback
        print(f"ternit {name}: {state.failure_text(e)}", file=sys.stderr)
        return 2
    finally:
        for line in state.repairs_to_say():  # a damaged state file set aside on the way: said once
            print(f"ternit: {line}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
