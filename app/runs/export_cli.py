"""`ternit export CKPT|RUN-ID OUT [--format hf]`: a checkpoint's weights as safetensors,
or a Hugging Face folder (GPT2LMHeadModel and its tokenizer).

CKPT is a checkpoint (a .pt file, or the .dcp folder of a sharded run), or a run id (or a unique part of one) from `ternit run list`,
meaning that run's latest checkpoint. The export itself loads torch, so it runs as its
own process (`python -m trainer.export`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..base.cli_args import Parser
from ..base.i18n import t


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit export", formatter_class=argparse.RawDescriptionHelpFormatter, description=t(
        "`ternit export ЧЕКПОИНТ|ID OUT [--format hf]`: веса чекпоинта в файл safetensors или\n"
        "папку для `transformers` (GPT2LMHeadModel с токенизатором; из неё llama.cpp делает GGUF, см. README).\n\n"
        "ЧЕКПОИНТ — чекпоинт (файл .pt или папка .dcp) или ID прогона (или его уникальная\n"
        "часть) из `ternit run list`: тогда берётся последний чекпоинт прогона. Экспорт\n"
        "загружает torch и поэтому идёт отдельным процессом (`python -m trainer.export`).",
        "`ternit export CKPT|RUN-ID OUT [--format hf]`: a checkpoint's weights as safetensors, or a\n"
        "Hugging Face folder (GPT2LMHeadModel with its tokenizer; llama.cpp makes GGUF of it, see README).\n\n"
        "CKPT is a checkpoint (a .pt file or a .dcp folder), or a run id (or a unique part of\n"
        "one) from `ternit run list`, meaning that run's latest checkpoint. The export itself\n"
        "loads torch, so it runs as its own process (`python -m trainer.export`)."))
    p.add_argument("checkpoint", metavar=t("ЧЕКПОИНТ", "CKPT"),
                   help=t("чекпоинт (файл .pt или папка .dcp) или ID прогона",
                          "a checkpoint (a .pt file or a .dcp folder) or a run id"))
    p.add_argument("out", type=Path, metavar="OUT",
                   help=t("файл .safetensors (или папка для --format hf), который записать",
                          "the .safetensors file (or, with --format hf, the folder) to write"))
    p.add_argument("--format", choices=("safetensors", "hf"), default="safetensors", dest="fmt",
                   help=t("safetensors — веса лаборатории одним файлом (по умолчанию); hf — папка, которую "
                          "transformers загружает как GPT2LMHeadModel",
                          "safetensors: the lab's weights in one file (the default); hf: a folder transformers "
                          "loads as GPT2LMHeadModel"))
    p.add_argument("--tokenizer", type=Path, default=None, metavar="TOKENIZER.json",
                   help=t("(hf) tokenizer.json подготовленных данных, если его нет там, где их готовили",
                          "(hf) the prepared data's tokenizer.json, when it is not where the data was prepared"))
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from .checkpoints import is_checkpoint
    from .export import export_checkpoint, run_checkpoint

    ckpt = Path(args.checkpoint)
    tokenizer = args.tokenizer
    if not is_checkpoint(ckpt):  # else a run id
        from . import Registry, RunNotFound

        reg = Registry()
        try:
            rec = reg.find(args.checkpoint)
        except (RunNotFound, LookupError) as e:
            print(t(f"ternit export: {args.checkpoint} — не файл чекпоинта и не прогон ({e})",
                    f"ternit export: {args.checkpoint} is neither a checkpoint file nor a run ({e})"), file=sys.stderr)
            return 2
        finally:
            reg.close()
        if tokenizer is None and args.fmt == "hf":
            from .export import run_tokenizer

            tokenizer = run_tokenizer(rec.config())
        found = run_checkpoint(rec.folder)
        damaged = "; ".join(found.skipped)
        if found.path is None:
            print(t(f"ternit export: у прогона {rec.id} нет целого чекпоинта ({damaged})",
                    f"ternit export: run {rec.id} has no intact checkpoint ({damaged})") if damaged else
                  t(f"ternit export: у прогона {rec.id} ещё нет чекпоинта", f"ternit export: run {rec.id} has no checkpoint yet"),
                  file=sys.stderr)
            return 2
        if damaged:
            print(t(f"ternit export: пропущены повреждённые чекпоинты ({damaged}); экспорт из {found.path.name}",
                    f"ternit export: damaged checkpoints passed over ({damaged}); exporting {found.path.name}"),
                  file=sys.stderr)
        ckpt = found.path
    result = export_checkpoint(ckpt, args.out, fmt=args.fmt, tokenizer=tokenizer)
    print(result.message, file=sys.stdout if result.ok else sys.stderr)
    return 0 if result.ok else 1
