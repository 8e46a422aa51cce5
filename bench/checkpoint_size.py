"""A checkpoint's size on disk against the sizing's estimate (trainer.plan.state_bytes.checkpoint_bytes):
the trainer's own .pt files at a few tiny shapes, and a sharded run's .dcp folder over two
CPU processes (torchrun, gloo). docs/PERF.md «A checkpoint's size on disk» has the figures.

    python -m bench.checkpoint_size
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from app.sizing.formulas import Shape
from bench.synthetic import make_prepared
from trainer.config.run_config import weight_count
from trainer.plan.state_bytes import checkpoint_bytes
from trainer.state.checkpoint_index import checkpoint_files

SHAPES = ((2, 32, 32), (2, 64, 64), (4, 128, 64))


def _train(run: Path, data: Path, layers: int, width: int, context: int, sharded: bool) -> Path:
    run.mkdir(parents=True)
    training = {"batch_per_card": 2, "steps_to": 2, "limit_min": 5, "eval_every": 10, "eval_segments": 2,
                "warmup_steps": 1, "checkpoint_every_min": 0, "keep_checkpoints": 1}
    if sharded:
        training.update(sharding="fsdp", precision="fp16")
    cfg = {"name": "size", "model": {"context": context, "width": width, "heads": 2, "layers": layers, "vocab": 300},
           "training": training, "data": {"dir": str(data)}}
    (run / "run.json").write_text(json.dumps(cfg), encoding="utf-8")
    args = ["--run", str(run), "--device", "cpu"]
    cmd = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "--", "trainer",
            *args] if sharded else [sys.executable, "-m", "trainer", *args])
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
    return checkpoint_files(run / "checkpoints")[-1]


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = make_prepared(Path(tmp) / "data")
        cases = [(*s, False) for s in SHAPES] + [(*SHAPES[0], True)]
        for i, (layers, width, context, sharded) in enumerate(cases):
            ckpt = _train(Path(tmp) / f"run{i}", data, layers, width, context, sharded)
            weights = weight_count(layers, width, context, 300)
            estimate = checkpoint_bytes(Shape(layers, width, 2, context, 300), "fp16")
            size = _size(ckpt)
            print(f"{layers} × {width}, n {context}{' sharded' if sharded else ''}: {ckpt.name} {size:,} bytes, "
                  f"12 bytes a weight {12 * weights:,}, over {size - 12 * weights:,}; estimate {estimate:,} "
                  f"({size / estimate:.2f})")


if __name__ == "__main__":
    main()
