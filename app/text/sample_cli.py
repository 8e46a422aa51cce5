"""`ternit sample RUN_ID|CHECKPOINT`: a checkpoint continues a text, streamed as it is written.

`ternit eval RUN_ID|CHECKPOINT FILE` (app.text.eval_cli) shares the child process and the checks
(app.text.generation); the model runs in `python -m trainer.text.sample`, the lab's core never imports torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..base.cli_args import Parser
from ..base.i18n import t
from .generation import (
    GenerationError,
    Settings,
    error_text,
    failure_text,
    lines,
    resolve,
    sample_argv,
    start,
    start_text,
    stop,
    target_help,
)


def parser() -> argparse.ArgumentParser:
    d = Settings()
    p = Parser(prog="ternit sample", description=t(
        "Продолжить текст чекпоинтом прогона; текст выводится по мере написания.",
        "Continue a text with a run's checkpoint; the text is printed as it is written."))
    p.add_argument("target", metavar=t("ID|ЧЕКПОИНТ", "RUN_ID|CHECKPOINT"),
                   help=target_help())
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prompt", default="", help=t("затравка (пусто: с начала документа)",
                                                    "the prompt (empty: from a document's start)"))
    src.add_argument("--prompt-file", type=Path, help=t("затравка из файла (UTF-8)", "the prompt from a UTF-8 file"))
    p.add_argument("--tokens", type=int, default=d.tokens, help=t("сколько токенов написать", "how many tokens to write"))
    p.add_argument("--temperature", type=float, default=d.temperature,
                   help=t("смелость выбора: 0 — всегда самый вероятный токен, 1 — как учила модель, выше — смелее",
                          "how bold: 0 always takes the likeliest token, 1 as the model learned, higher is bolder"))
    p.add_argument("--top-k", type=int, default=d.top_k,
                   help=t("выбирать только из K самых вероятных токенов (0 — из всех)",
                          "choose only among the K likeliest tokens (0: all)"))
    p.add_argument("--top-p", type=float, default=d.top_p,
                   help=t("выбирать из самых вероятных токенов с суммой вероятностей P (1 — без ограничения)",
                          "choose among the likeliest tokens whose probabilities add up to P (1: no limit)"))
    p.add_argument("--seed", type=int, default=d.seed, help=t("зерно: то же зерно — тот же текст", "seed: the same seed gives the same text"))
    p.add_argument("--num", type=int, default=d.num, help=t("сколько образцов (зерно +1 у каждого следующего)",
                                                            "how many samples (each next one with seed + 1)"))
    p.add_argument("--device", default=d.device, choices=["auto", "cpu", "cuda"])
    p.add_argument("--json", action="store_true", help=t("по строке JSON на образец", "one JSON line per sample"))
    return p


def read_prompt(args: argparse.Namespace) -> str:
    if args.prompt_file is None:
        return args.prompt
    try:
        return args.prompt_file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise GenerationError(t(f"затравку не прочитать из {args.prompt_file}: {e}; нужен текстовый файл в UTF-8",
                                f"cannot read the prompt from {args.prompt_file}: {e}; a UTF-8 text file is needed")) from None


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    s = Settings(args.tokens, args.temperature, args.top_k, args.top_p, args.seed, args.num, args.device)
    try:
        s.check()
        prompt = read_prompt(args)
        target = resolve(args.target)
    except GenerationError as e:
        print(f"ternit sample: {e.message}", file=sys.stderr)
        return e.exit_code
    for note in target.notes:  # what the choice of the checkpoint passed over: never silent
        print(f"ternit sample: {note}", file=sys.stderr)
    proc = start(sample_argv(target, s), prompt)
    try:
        return _stream(proc, args, prompt)
    except KeyboardInterrupt:
        return 130
    finally:
        stop(proc)


def _stream(proc, args: argparse.Namespace, prompt: str) -> int:
    started: dict = {}
    for record in lines(proc):
        kind = record["kind"]
        if kind == "error":
            print(f"ternit sample: {error_text(record)}", file=sys.stderr)
            proc.wait()
            return 2
        if kind == "start":
            started = record
            if record["sample"] == 0:
                print(start_text(record), file=sys.stderr)
            if not args.json:
                if args.num > 1:
                    print(t(f"— образец {record['sample'] + 1} —", f"— sample {record['sample'] + 1} —"))
                print(prompt, end="", flush=True)
        elif kind == "text" and not args.json:
            print(record["text"], end="", flush=True)
        elif kind == "done":
            if args.json:
                keep = ("sample", "text", "tokens", "tokens_per_s", "stopped")
                print(json.dumps({"prompt": prompt, **{k: record[k] for k in keep}, "device": started.get("device"),
                                  "step": started.get("step"), "seed": args.seed + record["sample"]},
                                 ensure_ascii=False), flush=True)
            else:
                print(flush=True)
    code = proc.wait()
    if code != 0:
        print(f"ternit sample: {failure_text(code, proc.stderr.read() if proc.stderr else '')}", file=sys.stderr)
        return 1
    return 0
