"""FSDP2 under the economical levels holds one block's gathered weights at a time, not the
whole model's: the peak of live storages of a training step (trainer.step.memory.StoragePeak,
told of FSDP's storage resizes) on two gloo processes, against app.sizing's estimate of
the sharded step and against the whole model sharded as one unit (how the levels ran
before each block's own forward pass ran its level, which FSDP's per-block hooks gather
around). One two-process run."""

from __future__ import annotations

import json

import pytest

from tests import forked
from tests.trainer_run import trainer_env

torch = pytest.importorskip("torch")

LEVELS = ("selective", "full", "off")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp-memory")
    # The two ranks forked as tests/forked.py does (torchrun itself where they cannot be).
    p = forked.run_ranks("tests.fsdp_memory_child", [str(out), "fp16", *LEVELS], trainer_env())
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text(encoding="utf-8")) for r in (0, 1)]


def _estimate(shape: dict, level: str) -> int:
    from app.sizing.formulas import Shape
    from trainer.plan.memory_model import estimate_memory

    s = Shape(shape["layers"], shape["width"], shape["heads"], shape["context"], shape["vocab"], shape["batch"])
    return estimate_memory(s, "fp16", cards=2, economical=level, sharding="fsdp", device="cpu").peak


@pytest.mark.parametrize("level", LEVELS)
def test_a_sharded_step_peaks_where_the_estimate_says(measured, level):
    for rank in measured:
        got = rank["per_block"][level]
        assert got["has_state"]  # the steady step: the optimizer's moments exist
        want = _estimate(rank["shape"], level)
        assert got["peak_bytes"] == pytest.approx(want, rel=0.10), (got, want)


def test_a_level_gathers_one_block_at_a_time_not_the_whole_model(measured):
    for rank in measured:
        d, layers = rank["shape"]["width"], rank["shape"]["layers"]
        block_16bit = 2 * 12 * d * d  # one block's weights gathered in fp16
        per_block, whole = rank["per_block"]["selective"]["peak_bytes"], rank["whole"]["peak_bytes"]
        # The whole model as one unit holds every block's gathered weights (and their
        # gradients before the reduce-scatter) at once; per block, one and the next.
        assert whole - per_block >= (layers - 2) * block_16bit, (per_block, whole)
