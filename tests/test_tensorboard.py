"""TensorBoard event files written by the lab from a run's events.jsonl: read back with
tensorboard's own reader they hold metrics.csv's values (as TensorBoard keeps a scalar: a
32-bit float); the lab writes them when it settles a run that ended, and `ternit run
tensorboard RUN|all [DIR]` writes them for runs made before. Writing them loads no torch."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator

from app.base import run_status as st
from app.runs import Registry, RunManager
from app.runs.metrics import run_metrics, to_csv
from app.runs.tensorboard import BPB_TAG, FOLDER, TAGS
from tests.test_cli_i18n import run_cli
from tests.test_run_metrics import CFG, ev, steps, write


def trained(reg: Registry, data_dir: str = "/nowhere", status: str = st.RUNNING):
    """A run whose trainer wrote a whole life: start, steps, evaluations, the end."""
    rec = reg.create_run({**CFG, "data": {"dir": data_dir, "constellations": ["t"]}})
    evs = [ev("start", 0, params=35200), *steps(1, 10), ev("eval", 10, val_loss=4.5, val_ci95=[4.4, 4.6]),
           *steps(11, 20), ev("eval", 20, val_loss=4.25, val_ci95=[4.125, 4.375]),
           ev("end", 20, reason="steps_reached", message="reached step 20")]
    for e in evs:
        if e["event"] == "step":
            e.update(mem_alloc_mb=12.5 + e["step"], mem_peak_mb=20.0, lr=1e-3 * (1 - e["step"] / 40))
    write(rec.path / "events.jsonl", evs)
    return reg.update(rec.id, status=status)


def read_back(folder) -> dict[str, list[tuple[int, float]]]:
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(s.step, s.value) for s in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def as_csv(reg: Registry, run_id: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(to_csv(run_metrics(reg, run_id, with_parents=False)))))


def test_the_files_read_back_equal_metrics_csv(tiny_data):
    reg = Registry()
    try:
        rec = trained(reg, str(tiny_data))
        m = RunManager(reg)  # it settles the run that ended while nobody watched: writes the files
        assert reg.get(rec.id).status == st.FINISHED
        scalars = read_back(rec.path / FOLDER)
        table = as_csv(reg, rec.id)
        for column, tag in TAGS.items():
            want = [(int(r["step"]), np.float32(float(r[column]))) for r in table if r[column] != ""]
            assert scalars[tag] == want, tag
        assert len(scalars["val/loss"]) == 2 and len(scalars["train/loss"]) == 20
        bpb = scalars[BPB_TAG]  # the same evaluations, in bits over the held-out set's bytes per token
        assert [s for s, _ in bpb] == [10, 20] and 0 < bpb[0][1] < scalars["val/loss"][0][1] / math.log(2)
        m.poll()  # nothing new: the files stay as they are
        assert read_back(rec.path / FOLDER) == scalars
    finally:
        reg.close()


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_the_command_writes_earlier_runs(tmp_path, lang):
    reg = Registry()
    try:
        a = trained(reg, status=st.FINISHED)  # ended before the lab wrote such files
        b = trained(reg, status=st.FINISHED)
    finally:
        reg.close()
    assert not (a.path / FOLDER).exists()
    code, out, err = run_cli(["run", "tensorboard", a.id], lang)
    assert code == 0, err
    assert out.split() == [str(a.path / FOLDER)] and "tensorboard --logdir" in err
    assert read_back(a.path / FOLDER)["train/loss"][0] == (1, np.float32(4.99))
    code, out, err = run_cli(["run", "tensorboard", "all", str(tmp_path / "tb")], lang)
    assert code == 0, err
    assert sorted(out.split()) == sorted(str(tmp_path / "tb" / r.id) for r in (a, b))
    assert read_back(tmp_path / "tb" / b.id)["val/loss"] == [(10, np.float32(4.5)), (20, np.float32(4.25))]
    code, _, err = run_cli(["run", "tensorboard", "nope"], lang)
    assert code == 2 and "nope" in err


def test_writing_them_loads_no_torch(tmp_path):
    """The lab's processes never import torch; tensorboardX would, were it not hidden."""
    code = (
        "import sys, json\n"
        "from app.runs import Registry\n"
        "from app.runs.tensorboard import write_runs\n"
        "reg = Registry()\n"
        "print(json.dumps([str(p) for p in write_runs(reg, None)]), 'torch' in sys.modules)\n"
    )
    reg = Registry()
    try:
        trained(reg, status=st.FINISHED)
    finally:
        reg.close()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    written, torch_loaded = out.stdout.rsplit(" ", 1)
    assert len(json.loads(written)) == 1 and torch_loaded.strip() == "False"
