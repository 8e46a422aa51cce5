"""`ternit eval RUN_ID|CHECKPOINT FILE`: mean loss, perplexity and bits per byte of a
checkpoint on a text file, with 95 % intervals over segments (`python -m trainer.text.sample eval`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..base.cli_args import Parser
from ..base.i18n import t
from .generation import (
    GenerationError,
    error_text,
    eval_argv,
    eval_text,
    failure_text,
    lines,
    resolve,
    start,
    start_text,
    stop,
    target_help,
)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit eval", description=t(
        "Потери, перплексия и бит на байт чекпоинта на текстовом файле. Бит на байт сравнимы "
        "между токенизаторами разных словарей, потери на токен — нет.",
        "Loss, perplexity and bits per byte of a checkpoint on a text file. Bits per byte compare "
        "across tokenizers of different vocabularies; loss per token does not."))
    p.add_argument("target", metavar=t("ID|ЧЕКПОИНТ", "RUN_ID|CHECKPOINT"),
                   help=target_help())
    p.add_argument("file", type=Path, metavar=t("ФАЙЛ", "FILE"), help=t("текстовый файл в UTF-8", "a UTF-8 text file"))
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--json", action="store_true", help=t("результат одной строкой JSON", "the result as one JSON line"))
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        if not args.file.is_file():
            raise GenerationError(t(f"файла {args.file} нет: укажите текстовый файл", f"{args.file} does not exist: give a text file"))
        target = resolve(args.target)
    except GenerationError as e:
        print(f"ternit eval: {e.message}", file=sys.stderr)
        return e.exit_code
    for note in target.notes:  # what the choice of the checkpoint passed over: never silent
        print(f"ternit eval: {note}", file=sys.stderr)
    proc = start(eval_argv(target, args.file.resolve(), args.device))
    try:
        for record in lines(proc):
            if record["kind"] == "error":
                print(f"ternit eval: {error_text(record)}", file=sys.stderr)
                return 2
            if record["kind"] == "eval":
                print(start_text(record), file=sys.stderr)
                record.pop("kind")
                print(json.dumps(record, ensure_ascii=False) if args.json else eval_text(record), flush=True)
        code = proc.wait()
        if code != 0:
            print(f"ternit eval: {failure_text(code, proc.stderr.read() if proc.stderr else '')}", file=sys.stderr)
            return 1
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        stop(proc)
