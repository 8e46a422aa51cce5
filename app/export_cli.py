"""`ternit export CKPT|RUN-ID OUT.safetensors`: a checkpoint's weights as safetensors.

CKPT is a checkpoint file, or a run id (or a unique part of one) from `ternit run list`,
meaning that run's latest checkpoint. The export itself loads torch, so it runs as its
own process (`python -m trainer.export`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli_args import Parser
from .i18n import t


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit export", formatter_class=argparse.RawDescriptionHelpFormatter, description=t(
        "`ternit export ЧЕКПОИНТ|ID OUT.safetensors`: веса чекпоинта в файл safetensors.\n\n"
        "ЧЕКПОИНТ — файл чекпоинта или ID прогона (или его уникальная часть) из `ternit run list`:\n"
        "тогда берётся последний чекпоинт прогона. Экспорт загружает torch и поэтому идёт\n"
        "отдельным процессом (`python -m trainer.export`).",
        "`ternit export CKPT|RUN-ID OUT.safetensors`: a checkpoint's weights as safetensors.\n\n"
        "CKPT is a checkpoint file, or a run id (or a unique part of one) from `ternit run list`,\n"
        "meaning that run's latest checkpoint. The export itself loads torch, so it runs as its\n"
        "own process (`python -m trainer.export`)."))
    p.add_argument("checkpoint", metavar=t("ЧЕКПОИНТ", "CKPT"),
                   help=t("файл чекпоинта (.pt) или ID прогона", "a checkpoint file (.pt) or a run id"))
    p.add_argument("out", type=Path, metavar="OUT.safetensors",
                   help=t("файл .safetensors, который записать", "the .safetensors file to write"))
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from .runs.export import export_checkpoint, run_checkpoint

    ckpt = Path(args.checkpoint)
    if not ckpt.is_file():
        from .runs import Registry, RunNotFound

        reg = Registry()
        try:
            rec = reg.find(args.checkpoint)
        except (RunNotFound, LookupError) as e:
            print(t(f"ternit export: {args.checkpoint} — не файл чекпоинта и не прогон ({e})",
                    f"ternit export: {args.checkpoint} is neither a checkpoint file nor a run ({e})"), file=sys.stderr)
            return 2
        finally:
            reg.close()
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
    result = export_checkpoint(ckpt, args.out)
    print(result.message, file=sys.stdout if result.ok else sys.stderr)
    return 0 if result.ok else 1
