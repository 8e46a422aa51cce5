"""`ternit export CKPT|RUN-ID OUT.safetensors`: a checkpoint's weights as safetensors.

CKPT is a checkpoint file, or a run id (or a unique part of one) from `ternit run list`,
meaning that run's latest checkpoint. The export itself loads torch, so it runs as its
own process (`python -m trainer.export`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .i18n import t


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ternit export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="a checkpoint file (.pt) or a run id")
    p.add_argument("out", type=Path, help="the .safetensors file to write")
    args = p.parse_args(argv)
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
        if found is None:
            print(t(f"ternit export: у прогона {rec.id} ещё нет чекпоинта", f"ternit export: run {rec.id} has no checkpoint yet"),
                  file=sys.stderr)
            return 2
        ckpt = found
    result = export_checkpoint(ckpt, args.out)
    if result.message:
        print(result.message, file=sys.stdout if result.ok else sys.stderr)
    if not result.ok:
        return 1
    print(t(f"веса записаны: {result.out}", f"weights written: {result.out}"))
    return 0
