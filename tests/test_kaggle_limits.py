"""Kaggle's limits as the lab keeps them: a leg's «Лимит, мин» under the session less the
final checkpoint's margin (the run.json contract's rule: form, `ternit run start` and the
kernel's trainer), «Авто» planning on what legs in flight have not reserved yet and on
Kaggle's two GPU sessions per account, and a 412 capacity answer moved on from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.kaggle import runner
from app.runs.manager import RunError, RunManager
from app.runs.registry import Registry
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts, tiny_config
from trainer.config.run_config import ConfigError, from_dict

fake = fixtures.fake  # the fake-server fixture

ROOT = Path(__file__).resolve().parent.parent


def test_a_kaggle_limit_past_the_session_less_the_margin_is_refused_everywhere(fake, tiny_data, tmp_path):
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    with pytest.raises(RunError, match="training.limit_min 710 is over 705"):
        RunManager(Registry()).start(tiny_config(tiny_data, limit_min=710), target="kaggle", account="alice")
    assert fake.datasets == {} and fake.pushes == []
    from_dict({"training": {"limit_min": 705}, "target": {"kind": "kaggle"}})
    from_dict({"training": {"limit_min": 710}, "target": {"kind": "local"}})  # a local card has no session
    with pytest.raises(ConfigError, match="limit_min"):
        from_dict({"training": {"limit_min": 710}, "target": {"kind": "kaggle"}})
    # The kernel's own trainer reads the same rule (its run.json says target.kind kaggle).
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps({"training": {"limit_min": 711}, "target": {"kind": "kaggle"}}))
    out = subprocess.run([sys.executable, "-m", "trainer.config", str(run_json)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0 and "limit_min" in out.stdout + out.stderr


def test_auto_plans_on_what_a_leg_in_flight_has_not_reserved(fake, tiny_data):
    """Alice's 12 h cover one 600-min run; while it is in flight, a second goes to Bob."""
    fake.run_kernels = False  # both stay queued: the first holds its reservation
    fake.add_account("alice", KEYS["alice"], quota_h=12)
    fake.add_account("bob", KEYS["bob"], quota_h=11)
    add_lab_accounts("alice", "bob")
    reg = Registry()
    first, second = (reg.create_run(tiny_config(tiny_data, limit_min=600)) for _ in range(2))
    runner.start_kaggle_run(reg, first.id, account="auto")
    runner.start_kaggle_run(reg, second.id, account="auto")
    assert [p["slug"].split("/")[0] for p in fake.pushes] == ["alice", "bob"]
    assert "bob" in reg.get(second.id).target_account


def test_auto_respects_two_gpu_sessions_per_account(fake, tiny_data):
    fake.run_kernels = False
    fake.add_account("alice", KEYS["alice"], quota_h=100)
    fake.add_account("bob", KEYS["bob"], quota_h=30)
    add_lab_accounts("alice", "bob")
    reg = Registry()
    runs = [reg.create_run(tiny_config(tiny_data, limit_min=30)) for _ in range(3)]
    for rec in runs:
        runner.start_kaggle_run(reg, rec.id, account="auto")
    # The third goes to Bob at once: no push is made for Kaggle to refuse.
    assert [p["slug"].split("/")[0] for p in fake.pushes] == ["alice", "alice", "bob"]


@pytest.mark.parametrize("html", [False, True])
def test_a_412_capacity_answer_moves_auto_on(fake, tiny_data, html):
    fake.run_kernels = False
    fake.add_account("alice", KEYS["alice"], quota_h=40)
    fake.add_account("bob", KEYS["bob"], quota_h=20)
    add_lab_accounts("alice", "bob")
    fake.fail("SaveKernel", 412, html=html)
    reg = Registry()
    rec = reg.create_run(tiny_config(tiny_data, limit_min=60))
    runner.start_kaggle_run(reg, rec.id, account="auto")
    assert reg.get(rec.id).target_account == "bob"
    assert [u for m, u in fake.calls if m == "SaveKernel"] == ["alice", "bob"]
    from app.kaggle.store import KaggleStore

    assert KaggleStore(reg.state).account("alice").key_status == "ok"  # Kaggle was busy, not the key wrong
