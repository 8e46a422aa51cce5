"""`ternit export CKPT|RUN-ID OUT [--format hf]`: a checkpoint's weights as safetensors,
or a Hugging Face folder (GPT2LMHeadModel and its tokenizer).

CKPT is a checkpoint (a .pt file, or the .dcp folder of a sharded run), or a run id (or a unique part of one) from `ternit run list`,
meaning that run's latest checkpoint. The export itself loads torch, so it runs as its
own process (`python -m trainer.model.export`).
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
        "загружает torch и поэтому идёт отдельным процессом (`python -m trainer.model.export`).",
        "`ternit export CKPT|RUN-ID OUT [--format hf]`: a checkpoint's weights as safetensors, or a\n"
        "Hugging Face folder (GPT2LMHeadModel with its tokenizer; llama.cpp makes GGUF of it, see README).\n\n"
        "CKPT is a checkpoint (a .pt file or a .dcp folder), or a run id (or a unique part of\n"
        "one) from `ternit run list`, meaning that run's latest checkpoint. The export itself\n"
        "loads torch, so it runs as its own process (`python -m trainer.model.export`)."))
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
    """Exit 0 when written; 2 when the checkpoint (or run) cannot be used, with what to do;
    1 when the weights could not be written or the exporter failed otherwise."""
    args = parser().parse_args(argv)
    from .checkpoints import inspect_checkpoint, is_checkpoint
    from .export import EXIT_CHECKPOINT, export_checkpoint

    ckpt = Path(args.checkpoint)
    tokenizer = args.tokenizer
    if is_checkpoint(ckpt):
        seen = inspect_checkpoint(ckpt)
        if seen.path is None:
            print(f"ternit export: {'; '.join(seen.passed_over)}. {_instead(ckpt)}", file=sys.stderr)
            return 2
    else:  # a run id
        from . import Registry, RunNotFound
        from .checkpoints import choose_checkpoint

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
        seen = choose_checkpoint(rec.path)
        if seen.path is None:
            why = "; ".join(seen.passed_over)
            print(t(f"ternit export: у прогона {rec.id} нет целого чекпоинта ({why})",
                    f"ternit export: run {rec.id} has no intact checkpoint ({why})") if why else
                  t(f"ternit export: у прогона {rec.id} ещё нет чекпоинта", f"ternit export: run {rec.id} has no checkpoint yet"),
                  file=sys.stderr)
            return 2
        ckpt = seen.path
    for line in seen.said():
        print(f"ternit export: {line}", file=sys.stderr)
    result = export_checkpoint(ckpt, args.out, fmt=args.fmt, tokenizer=tokenizer)
    print(result.message, file=sys.stdout if result.ok else sys.stderr)
    if result.ok:
        return 0
    return 2 if result.code == EXIT_CHECKPOINT else 1


def _instead(path: Path) -> str:
    """What to export instead of a damaged checkpoint: the newest sound one before it in the
    same folder, or its run by id (which takes its newest sound checkpoint)."""
    from .checkpoints import earlier_sound

    sound = earlier_sound(path)
    if sound is not None:
        return t(f"Целый более ранний: ternit export {sound} OUT", f"An earlier one is intact: ternit export {sound} OUT")
    return t("Выберите другой чекпоинт или прогон: ternit export ID_ПРОГОНА OUT берёт его новейший целый.",
             "Choose another checkpoint, or a run: ternit export RUN_ID OUT takes its newest intact one.")
