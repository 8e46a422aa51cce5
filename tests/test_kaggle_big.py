"""Big models on Kaggle: a checkpoint's size against the ~20 GB of a session's outputs
(refused, or fewer kept, before anything is uploaded), the kernel's clean-up of both forms
(.pt files and a sharded run's .dcp folders), and a .dcp checkpoint continued on Kaggle
from its flat dataset, through the real client against the fake server."""

from __future__ import annotations

import importlib.util
import json

import pytest

from app.base import run_status as st
from app.kaggle import runner
from app.kaggle.kernel import KernelPlan, render
from app.kaggle.room import output_room
from app.runs.manager import RunError, RunManager
from app.runs.registry import Registry
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts, tiny_config

fake = fixtures.fake  # the fake-server fixture

GB = 10**9
FULL = {"layers": 26, "width": 2304, "heads": 18, "context": 1024, "vocab": 4000}  # 1.67 B weights


def test_the_checkpoint_size_against_kaggles_outputs():
    from app.base.i18n import set_language

    set_language("en")
    try:
        full = output_room({"model": FULL}, 20 * GB)
        assert 19.9 * GB < full.checkpoint_bytes < 20.2 * GB  # fp32 weights + AdamW's two moments: 12 bytes a weight
        assert not full.fits and "20.0 GB" in full.text() and "not even two" in full.text()
        lean = output_room({"model": FULL, "training": {"lean_state": True}}, 20 * GB)
        assert 0.45 < lean.checkpoint_bytes / full.checkpoint_bytes < 0.55  # 8-bit moments: 6 bytes a weight
        assert not lean.fits  # ≈ 10 GB: two at once are just over the outputs
        mid = output_room({"model": {**FULL, "layers": 12}, "training": {"keep_checkpoints": 3}}, 20 * GB)
        assert mid.keep == 1 and "keeps 1 (not 3)" in mid.text()
        small = output_room({"model": {"layers": 8, "width": 512}}, 20 * GB)
        assert small.keep == 3 and small.fits
    finally:
        set_language(None)


def test_the_kernels_clean_up_keeps_only_the_latest_of_either_form(tmp_path):
    """A sharded run leaves step-*.dcp folders: the kernel's clean-up removed only .pt files,
    so every .dcp the trainer kept went into the outputs."""
    script = tmp_path / "kernel.py"
    script.write_text(render(KernelPlan("u", "k", {"model": {}}, "C", "D", "", "", 5.0, ())), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("ternit_kernel_under_test", script)
    kernel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernel)  # defines, does not run: main() only as a script
    folder = tmp_path / "run" / "checkpoints"
    for step in (1, 2):
        (folder / f"step-{step:08d}.dcp").mkdir(parents=True)
        (folder / f"step-{step:08d}.dcp" / "__0_0.distcp").write_bytes(b"shard")
        (folder / f"step-{step:08d}.dcp.sha256").write_text("list")
    (folder / "step-00000003.pt").write_bytes(b"old file form")
    (folder / "step-00000003.pt.sha256").write_text("x")
    (folder / "latest").write_text("step-00000002.dcp\n")
    kernel.keep_latest_checkpoint(tmp_path / "run")
    assert sorted(p.name for p in folder.iterdir()) == ["latest", "step-00000002.dcp", "step-00000002.dcp.sha256"]
    assert (folder / "step-00000002.dcp" / "__0_0.distcp").read_bytes() == b"shard"


def test_a_run_whose_checkpoints_cannot_come_back_is_refused_before_any_upload(fake, tiny_data, monkeypatch):
    # The fake's outputs hold 800 kB; the tiny model's checkpoint is ≈ 650 kB: one, and the
    # next while it is written, do not fit.
    monkeypatch.setenv("TERNIT_KAGGLE_OUTPUT_GB", "0.0008")
    fake.output_limit_bytes = 800_000
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    with pytest.raises(RunError, match="чекпоинт этой модели ≈ 647,7 КБ"):
        RunManager(Registry()).start(tiny_config(tiny_data), target="kaggle", account="auto")
    assert fake.datasets == {} and fake.pushes == []


def test_where_fewer_fit_the_kernel_keeps_fewer(fake, tiny_data, monkeypatch):
    monkeypatch.setenv("TERNIT_KAGGLE_OUTPUT_GB", "0.0015")  # two of ≈ 650 kB at once, not four
    fake.run_kernels = False  # what is pushed is the point here
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    RunManager(Registry()).start(tiny_config(tiny_data, keep_checkpoints=3), target="kaggle", account="alice")
    script = fake.pushes[-1]["text"]
    assert '"keep_checkpoints": 1' in script  # what the outputs hold, in the kernel's run.json


@pytest.mark.timeout(300)
def test_a_sharded_runs_dcp_checkpoint_continues_on_kaggle(fake, tiny_data):
    """A .dcp folder goes up as flat files with its layout in the marker; the kernel puts
    the folder back together, the trainer checks it against its SHA-256 list and resumes."""
    from tests.test_dcp_lab import STEPS, _train_sharded

    fake.add_account("bob", KEYS["bob"], quota_h=30)
    add_lab_accounts("bob")
    parent = _train_sharded(tiny_data)
    dcp = parent.path / "checkpoints" / f"step-{STEPS:08d}.dcp"
    assert dcp.is_dir()
    from app.kaggle.room import config_checkpoint_bytes

    on_disk = sum(f.stat().st_size for f in dcp.rglob("*") if f.is_file())
    estimate = config_checkpoint_bytes(json.loads((parent.path / "run.json").read_text()))
    assert 0.85 < on_disk / estimate <= 1.0, (on_disk, estimate)  # the sizing's size of a .dcp folder
    cfg = json.loads((parent.path / "run.json").read_text())
    cfg["resume_from"] = str(dcp)
    cfg["training"]["steps_to"] = STEPS + 3
    cfg["target"] = {"kind": "kaggle", "account": "auto"}
    m = RunManager(Registry())
    rec = m.start(cfg, target="kaggle", account="auto")
    done = m.wait(rec.id, timeout=180, poll_s=0.1)
    assert done.status == st.FINISHED, done.last_message
    ckpt = [d for d in fake.datasets.values() if d.slug.startswith("ternit-ckpt-")]
    assert len(ckpt) == 1 and all(name.startswith("dcp-") or name == "TERNIT_MARKER.json"
                                  for name in ckpt[0].files)
    marker = json.loads(ckpt[0].files["TERNIT_MARKER.json"])
    assert marker["dcp"]["name"] == dcp.name and ".metadata" in marker["dcp"]["files"].values()
    steps = [json.loads(ln) for ln in (done.path / "events.jsonl").read_text().splitlines()
             if '"event": "step"' in ln or '"event":"step"' in ln]
    assert [s["step"] for s in steps] == [STEPS + 1, STEPS + 2, STEPS + 3]
    assert "read whole here" in (done.path / "trainer.log").read_text()
    runner.shutdown_followers()
