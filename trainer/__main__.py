"""python -m trainer --run RUN_DIR [--resume CKPT|latest] [--device auto|cpu|cuda]
                     [--stop-at-step N] [--dry-run] [--run-id ID]

Under torchrun put `--` before `trainer`:
    torchrun --standalone --nproc_per_node=2 -m -- trainer --run RUN_DIR
Without it torchrun's own parser takes `--run` for an abbreviation of its `--run-path` and
stops with "ambiguous option" (torch 2.13, Python 3.11 argparse).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainer.config.run_config import ConfigError


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trainer", description="Train a Ternit Lab GPT as RUN_DIR/run.json says.")
    p.add_argument("--run", required=True, type=Path, help="the run folder holding run.json")
    p.add_argument("--resume", help="`latest` (this run's own latest checkpoint) or a checkpoint path")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--stop-at-step", type=int, help="stop at this step as if the time limit hit")
    p.add_argument("--dry-run", action="store_true", help="build the model, print and emit start, exit")
    p.add_argument("--run-id", help="the run's id written into its checkpoints (default: the run folder's name; "
                                    "a Kaggle kernel's folder is not named by it)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from trainer.base.lock import LockError
    from trainer.run.train import EXIT_CONFIG, Options, run

    if not (args.run / "run.json").is_file():
        print(f"error: {args.run / 'run.json'} does not exist: write the run's config there first", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return run(Options(args.run, args.resume, args.device, args.stop_at_step, args.dry_run, args.run_id))
    except (ConfigError, LockError) as e:  # nothing was written to the run folder
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main())
