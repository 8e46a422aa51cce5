"""The queue's scheduler and timeline (app/queue/plan.py): which machine takes which run and
when, as pure functions of the machines' state — no window, no state file, no clock."""

from __future__ import annotations

import pytest

from app.kaggle.picker import Want
from app.queue.plan import LOCAL, Account, Fit, Job, Lease, World, predict, startable

H = 3600.0
NOW = 1_000_000.0
MARGIN = 60.0


def job(i: int, target: str = "any", local: float | None = 100.0, kaggle: float | None = 400.0,
        limit_min: float = 60.0, account: str = "auto", local_fits: bool | None = True, want: Want | None = None) -> Job:
    return Job(i, target, account, None if local is None else Fit(local, local_fits, "needs 30 GB, has 8 GB"),
               None if kaggle is None else Fit(kaggle), limit_min * 60.0, want or Want())


def acct(name: str, quota_h: float, total_h: float = 30.0, sessions: int = 2, running: tuple[Lease, ...] = (),
         refresh_at: float | None = None, usable: bool = True, holds: frozenset[str] = frozenset()) -> Account:
    return Account(name, quota_h * H, total_h * H, refresh_at, sessions, running, usable, "", holds)


def world(*accounts: Account, local_free_at: float = NOW) -> World:
    return World(NOW, MARGIN, local_free_at, tuple(accounts))


def machines(slots):
    return [(s.item_id, s.machine, s.start) for s in slots]


def test_this_pc_takes_one_run_at_a_time_in_queue_order():
    slots = predict([job(1, "local"), job(2, "local"), job(3, "local")], world())
    assert machines(slots) == [(1, LOCAL, NOW), (2, LOCAL, NOW + 100), (3, LOCAL, NOW + 200)]
    assert [s.end for s in slots] == [NOW + 100, NOW + 200, NOW + 300]
    assert [s.item_id for s in startable(slots, NOW)] == [1]
    assert "занят" in slots[1].reason or "busy" in slots[1].reason


def test_any_goes_to_the_first_machine_free_now_this_pc_first():
    slots = predict([job(1), job(2), job(3)], world(acct("alice", 10, sessions=1), local_free_at=NOW + 50))
    # This PC is busy for 50 s: the first run goes to alice now; the second waits for this PC
    # (free in 50 s) rather than for alice's session (400 s).
    assert machines(slots) == [(1, "kaggle:alice", NOW), (2, LOCAL, NOW + 50), (3, LOCAL, NOW + 150)]
    free = predict([job(1), job(2)], world(acct("alice", 10)))
    assert machines(free) == [(1, LOCAL, NOW), (2, "kaggle:alice", NOW)]


def test_concurrent_session_limit_per_account():
    slots = predict([job(i, "kaggle") for i in (1, 2, 3)], world(acct("alice", 20, sessions=2)))
    assert machines(slots) == [(1, "kaggle:alice", NOW), (2, "kaggle:alice", NOW), (3, "kaggle:alice", NOW + 400)]
    assert [s.item_id for s in startable(slots, NOW)] == [1, 2]


def test_quota_left_minus_running_reservations_must_cover_the_run():
    # 3 h left, but a running leg holds 2 h 30 of it until it ends in 10 minutes: a 1 h run
    # (+ 1 min margin) waits for that leg, then fits.
    running = (Lease(NOW - 600, NOW + 600, 2.5 * H, 600),)
    slots = predict([job(1, "kaggle")], world(acct("alice", 3, running=running)))
    assert machines(slots) == [(1, "kaggle:alice", NOW + 600)]
    # Without the reservation it would start now.
    assert machines(predict([job(1, "kaggle")], world(acct("alice", 3))))[0][2] == NOW


def test_an_account_without_the_quota_takes_nothing_another_covers():
    slots = predict([job(1, "kaggle"), job(2, "kaggle")],
                    world(acct("alice", 0.5), acct("bob", 1.2, sessions=2), acct("carol", 10, sessions=1)))
    # alice's 30 min cannot cover a 60 min run; «Авто» prefers the most quota (carol), then
    # bob (1 h 12 min covers 60 min + 1 min).
    assert machines(slots) == [(1, "kaggle:carol", NOW), (2, "kaggle:bob", NOW)]
    # A third: carol's single session is taken, bob's reservation leaves 12 min: it waits.
    third = predict([job(1, "kaggle"), job(2, "kaggle"), job(3, "kaggle")],
                    world(acct("alice", 0.5), acct("bob", 1.2, sessions=2), acct("carol", 10, sessions=1)))
    assert third[2].start > NOW and third[2].machine in ("kaggle:bob", "kaggle:carol")


def test_prefers_the_account_holding_the_data():
    want = Want(data="d1")
    slots = predict([job(1, "kaggle", want=want)],
                    world(acct("alice", 20), acct("bob", 5, holds=frozenset({"d1"}))))
    assert slots[0].machine == "kaggle:bob"


def test_a_named_account_is_the_only_one():
    slots = predict([job(1, "kaggle", account="bob"), job(2, "kaggle", account="zed")],
                    world(acct("alice", 20), acct("bob", 5)))
    assert slots[0].machine == "kaggle:bob"
    assert slots[1].machine is None and not slots[1].never and "zed" in slots[1].reason


def test_nothing_starts_where_it_does_not_fit():
    slots = predict([job(1, "any", local_fits=False), job(2, "local", local_fits=False)],
                    world(acct("alice", 20)))
    assert slots[0].machine == "kaggle:alice"
    assert slots[1].machine is None and slots[1].never and "30 GB" in slots[1].reason
    # A run whose target machine is busy waits; one that cannot fit is not waiting for anything.
    assert not startable(slots[1:], NOW)


def test_no_account_no_key_waits_without_being_skipped():
    slots = predict([job(1, "kaggle")], world(acct("alice", 20, usable=False)))
    assert slots[0].machine is None and not slots[0].never


def test_weekly_refresh_gives_the_quota_back():
    refresh = NOW + 2 * H
    slots = predict([job(1, "kaggle")], world(acct("alice", 0.2, refresh_at=refresh)))
    assert machines(slots) == [(1, "kaggle:alice", refresh)]
    assert "alice" in slots[0].reason


def test_chain_rule_starts_a_run_no_account_could_cover():
    # A 12 h run: nobody has 12 h, alice and bob together do. It goes to the account with the
    # most quota, for what it holds less the margin, and continues elsewhere.
    slots = predict([job(1, "kaggle", limit_min=12 * 60, kaggle=12 * H)],
                    world(acct("alice", 5), acct("bob", 9)))
    s = slots[0]
    assert (s.machine, s.start, s.chain) == ("kaggle:bob", NOW, True)
    assert s.limit_s == pytest.approx(9 * H - MARGIN)
    # With a leg running on bob that holds 5 h of it, alice has more: the first leg goes there.
    busy = (Lease(NOW - 10, NOW + 300, 5 * H, 100.0),)
    later = predict([job(1, "kaggle", limit_min=12 * 60, kaggle=12 * H)],
                    world(acct("alice", 5), acct("bob", 9, running=busy)))
    assert (later[0].machine, later[0].start, later[0].chain) == ("kaggle:alice", NOW, True)
    # Together too little: it waits (here, for nothing within two weeks) rather than start a
    # leg that nowhere could continue.
    alone = predict([job(1, "kaggle", limit_min=12 * 60, kaggle=12 * H)], world(acct("bob", 9)))
    assert alone[0].machine is None and not alone[0].never


def test_a_later_run_does_not_take_quota_an_earlier_one_waits_for():
    # alice: 5 h left, a leg holding 2 h ends in 100 s. Run 1 (4 h) waits for it. Run 2 (1 h)
    # fits now — but then run 1 would find 1 h less at its start: run 2 waits instead (and,
    # with what run 1 will have used, finds no quota this week).
    running = (Lease(NOW - 10, NOW + 100, 2 * H, 100.0),)
    jobs = [job(1, "kaggle", limit_min=240, kaggle=4 * H), job(2, "kaggle", limit_min=60)]
    slots = predict(jobs, world(acct("alice", 5, sessions=3, running=running)))
    assert slots[0].start == NOW + 100
    assert slots[1].machine is None and not slots[1].never
    assert startable(slots, NOW) == []
    # With an hour more both fit: run 2 starts now, run 1 when the leg ends.
    roomy = predict(jobs, world(acct("alice", 6, sessions=3, running=running)))
    assert [(s.item_id, s.start) for s in roomy] == [(1, NOW + 100), (2, NOW)]


def test_the_decision_now_is_the_timeline_now():
    # Whatever the machines, what starts now is exactly the slots predicted to start now.
    w = world(acct("alice", 2, sessions=1), acct("bob", 10), local_free_at=NOW)
    jobs = [job(1), job(2, "kaggle"), job(3, "local"), job(4), job(5, "kaggle", account="alice")]
    slots = predict(jobs, w)
    now = startable(slots, NOW)
    # 1 on this PC; 2 to bob (most quota); 4 (any): this PC busy, so bob's second session;
    # 5 to alice as named; 3 waits for this PC.
    assert [(s.item_id, s.machine) for s in now] == [(1, LOCAL), (2, "kaggle:bob"), (4, "kaggle:bob"),
                                                     (5, "kaggle:alice")]
    assert all(s.start == NOW for s in now)
    # Starts are never before now and never later for an earlier run of the same target.
    assert all(s.start >= NOW for s in slots if s.start is not None)


def test_any_on_a_pc_without_a_card_goes_to_kaggle_not_the_cpu(monkeypatch):
    """A PC with no NVIDIA card: a run left to the queue («куда освободится раньше») trains on
    Kaggle, not for hours on the CPU; one that names the CPU, or is queued for this PC, stays."""
    from app.queue.estimates import job as queued
    from bench.fake_nvml import FakeCard, pc_with_cards

    config = {"name": "q", "model": {"context": 64, "width": 64, "heads": 2, "layers": 2, "vocab": 512},
              "training": {"batch_per_card": 4, "steps_to": 50, "limit_min": 60}}
    pc_with_cards(monkeypatch, [])
    anywhere = queued(1, config, "any", "auto", [])
    assert anywhere.local is not None and anywhere.local.fits is False and "NVIDIA" in anywhere.local.why
    slots = predict([anywhere], world(acct("alice", 10)))
    assert machines(slots) == [(1, "kaggle:alice", NOW)]
    # Without an account it waits (never is for what cannot fit anywhere), saying why.
    alone = predict([anywhere], world())
    assert alone[0].machine is None and not alone[0].never and "NVIDIA" in alone[0].reason
    named_cpu = queued(2, {**config, "target": {"kind": "local", "gpu": "cpu"}}, "any", "auto", [])
    here = queued(3, config, "local", "auto", [])
    assert named_cpu.local.fits is not False and here.local.fits is not False
    # With a card, «any» takes this PC first as before.
    pc_with_cards(monkeypatch, [FakeCard(name="NVIDIA GeForce RTX 3050", total_mb=8192)])
    assert machines(predict([queued(4, config, "any", "auto", [])], world(acct("alice", 10)))) == [(4, LOCAL, NOW)]
