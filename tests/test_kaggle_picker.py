"""«Авто»: the account rules, and the log-stream de-duplication (pure functions)."""

from __future__ import annotations

import json

from app.base.i18n import set_language
from app.kaggle.follow import RunSink, lines_from
from app.kaggle.picker import Candidate, Want, pick

H = 3600.0


def test_prefers_an_account_that_covers_the_run_and_holds_the_data():
    want = Want(data="D", code="C", checkpoint="K")
    cands = [
        Candidate("big", 40 * H),                                # covers, holds nothing
        Candidate("holder", 12 * H, holds=frozenset({"D", "K"})),  # covers, holds data + checkpoint
        Candidate("small", 2 * H, holds=frozenset({"D", "K", "C"})),  # does not cover
        Candidate("broken", 99 * H, usable=False, why_not="401"),
    ]
    p = pick(cands, limit_min=630, margin_min=15, want=want)
    assert p.username == "holder" and p.covers and p.limit_min == 630
    assert "holder" in p.reason and "broken" in p.reason  # the skip is said
    p = pick(cands, limit_min=630, margin_min=15, want=Want())
    assert p.username == "big"  # nothing held anywhere: the most quota among those that fit


def test_nobody_covers_takes_the_most_quota_and_plans_to_continue():
    set_language("en")
    try:
        cands = [Candidate("a", 5 * H), Candidate("b", 8 * H, holds=frozenset({"D"}))]
        p = pick(cands, limit_min=630, margin_min=15, want=Want(data="D"))
        assert p.username == "b" and not p.covers and p.continues_elsewhere
        assert p.limit_min == 8 * 60 - 15
        assert "continue on another account" in p.reason
        none = pick([Candidate("a", 10 * 60.0)], limit_min=630, margin_min=15)
        assert none.username is None and "margin" in none.reason
        assert pick(cands, 630, 15, exclude={"b"}).username == "a"
    finally:
        set_language(None)


def _events(text_chunks):
    return [{"stream_name": s, "time": 0, "data": d} for s, d in text_chunks]


def test_log_lines_survive_chunking_and_replay(tmp_path):
    ev1 = json.dumps({"event": "step", "time": 1.0, "step": 1, "loss": 5.0})
    ev2 = json.dumps({"event": "step", "time": 2.0, "step": 2, "loss": 4.0})
    chunks = [("stdout", ev1[:10]), ("stderr", "human line\n"), ("stdout", ev1[10:] + "\n" + ev2[:5]),
              ("stdout", ev2[5:] + "\n")]
    first = list(lines_from(_events(chunks[:3]), skip=0))
    assert [ln for _, batch in first for ln in batch] == ["human line", ev1]
    done = first[-1][0]
    again = list(lines_from(_events(chunks), skip=done))  # the stream replays from the start
    assert [ln for _, batch in again for ln in batch] == [ev2]
    # A cut line is held back unless the kernel had ended.
    assert list(lines_from(_events([("stdout", "partial")]), 0)) == []
    assert list(lines_from(_events([("stdout", "partial")]), 0, final=True)) == [(1, ["partial"])]

    sink = RunSink(tmp_path)
    assert sink.write(["human line", ev1]) == 1
    sink.close()
    again_sink = RunSink(tmp_path)
    assert again_sink.write([ev1, ev2]) == 1  # ev1 was already written before a crash
    again_sink.close()
    assert (tmp_path / "events.jsonl").read_text().splitlines() == [ev1, ev2]
    with open(tmp_path / "events.jsonl", "a") as f:  # a crash cut the next write in half
        f.write(ev2[:7])
    RunSink(tmp_path).close()
    assert (tmp_path / "events.jsonl").read_text().splitlines() == [ev1, ev2]
    assert "human line" in (tmp_path / "trainer.log").read_text()


def test_downloaded_checkpoint_is_hash_checked(tmp_path):
    import hashlib

    from app.kaggle.runner import take_checkpoint

    run_dir, out = tmp_path / "run", tmp_path / "run" / "outputs"
    (out / "run" / "checkpoints").mkdir(parents=True)
    good = b"weights" * 1000
    (out / "run" / "checkpoints" / "step-00000010.pt").write_bytes(good[:-1] + b"X")  # damaged
    events = [{"event": "checkpoint", "step": 10, "path": "/kaggle/working/run/checkpoints/step-00000010.pt",
               "sha256": hashlib.sha256(good).hexdigest()}]
    message, path, sha = take_checkpoint(run_dir, out, events)
    assert path is None and "SHA-256" in message and not (run_dir / "checkpoints" / "latest").exists()
    (out / "run" / "checkpoints" / "step-00000010.pt").write_bytes(good)
    message, path, sha = take_checkpoint(run_dir, out, events)
    assert message == "" and sha == events[0]["sha256"]
    assert (run_dir / "checkpoints" / "step-00000010.pt").read_bytes() == good
    assert (run_dir / "checkpoints" / "latest").read_text().strip() == "step-00000010.pt"


def _view(name: str, hours_left: float, checked_at: float = 1000.0, status: str = "ok"):
    from app.kaggle.accounts import AccountView
    from app.kaggle.quota import Quota

    return AccountView(name, status, None, Quota(30 * H, 30 * H - hours_left * H, 0.0, None, checked_at))


def test_capacity_subtracts_what_legs_in_flight_will_spend_and_counts_sessions():
    """Two runs on one account must not both plan on its whole quota, and Kaggle runs two
    GPU sessions per account at most: the capacity every «Авто» pick and the queue ask."""
    from app.kaggle.picker import capacities

    views = [_view("alice", 20), _view("bob", 12)]
    legs = [  # alice: one 600-min leg pushed 100 s before the quota check, one still uploading
        {"run_id": "r1", "account": "alice", "state": "running", "limit_min": 600, "pushed_at": 900.0},
        {"run_id": "r2", "account": "alice", "state": "uploading", "limit_min": 60, "pushed_at": None},
        {"run_id": "r0", "account": "bob", "state": "done", "limit_min": 600, "pushed_at": 0.0},  # ended
    ]
    caps = {c.username: c for c in capacities(views, legs, margin_min=15)}
    alice, bob = caps["alice"], caps["bob"]
    assert alice.reserved_s == (615 * 60 - 100) + 75 * 60
    assert alice.free_s == 20 * H - alice.reserved_s and alice.free_sessions == 0
    assert alice.leg_min(630, 15) == 0  # no session left, whatever the quota
    assert "r1" in alice.why_not and "r2" in alice.why_not
    assert bob.reserved_s == 0 and bob.free_sessions == 2 and bob.leg_min(630, 15) == 630
    # Alice has more quota left per Kaggle, but both her sessions are the lab's: bob.
    p = pick(caps.values(), limit_min=630, margin_min=15)
    assert p.username == "bob" and "alice" in p.reason
    # One leg in flight: a session is free, and the quota it will spend is not.
    caps = {c.username: c for c in capacities(views, legs[:1], margin_min=15)}
    assert caps["alice"].free_sessions == 1
    assert caps["alice"].leg_min(630, 15) == (20 * H - (615 * 60 - 100)) / 60 - 15


def test_capacity_reads_the_labs_state(isolated_home):
    from app.kaggle.picker import capacity
    from app.kaggle.quota import Quota
    from app.kaggle.store import KaggleStore

    store = KaggleStore()
    store.set_quota("alice", Quota(30 * H, 10 * H, 0.0, None, 1000.0))
    store.add_leg(run_id="r1", run_dir="/x", account="alice", kernel_slug="k", state="pushed",
                  limit_min=120.0, pushed_at=1000.0)
    (alice,) = capacity(store, margin_min=15)
    store.close()
    assert alice.remaining_s == 20 * H and alice.reserved_s == 135 * 60 and alice.sessions == 1
