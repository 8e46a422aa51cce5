"""python -m trainer.export CKPT OUT.safetensors — the weights alone, with the model config
in the file's metadata (what another program needs to load them)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .checkpoint import CheckpointError, load


def export(checkpoint: Path, out: Path) -> dict[str, str]:
    from safetensors.torch import save_file

    state = load(checkpoint)
    # fp32 whichever combination trained them: the lean state keeps bf16 weights.
    tensors = {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in state["model"].items()}
    metadata = {
        "format": "ternit-lab",
        "model": json.dumps(state["config"]["model"]),
        "step": str(state["step"]),
        "tokens_seen": str(state["tokens_seen"]),
        "params": str(state["params"]),
        "data_id": state["data"]["data_id"],
        "tokenizer_sha256": state["data"]["tokenizer_sha256"],
        "tied": "tok.weight is also the output layer",
    }
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(tmp), metadata=metadata)
        os.replace(tmp, out)
    # safetensors reports a failed write as its own error type (not OSError): caught as
    # Exception, the half-written file removed, and said as one line.
    except Exception as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise WriteError(f"cannot write {out} ({type(e).__name__}: {e})") from None
    return metadata


class WriteError(Exception):
    """OUT could not be written: a read-only folder, a full disk, a file where a folder should be."""


EXIT_CHECKPOINT, EXIT_WRITE = 2, 4


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.export", description=__doc__)
    p.add_argument("checkpoint", type=Path)
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    try:
        meta = export(args.checkpoint, args.out)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CHECKPOINT
    except WriteError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_WRITE
    print(f"wrote {args.out} ({meta['params']} weights, step {meta['step']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
