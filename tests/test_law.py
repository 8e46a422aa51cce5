"""The lab's scaling law (app/law): on runs drawn from a known law with noise the fit recovers
the exponents within its bootstrap intervals, of bounded width, and predicts the largest run
left out; too few or too noisy runs are «not enough» and the ladder is offered instead; the
runs the law takes (one data set, the end of each schedule, unique tokens, the best per size
and length); `ternit law --json`'s shape."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.base import run_status as st
from app.law.fit import ENOUGH_EXPONENT, Law, Point, assess
from app.law.ladder import SHARE, propose
from app.law.points import RunFacts, select
from app.runs import Registry
from tests.test_cli_i18n import run_cli

TRUE = Law(E=1.8, A=400.0, B=410.0, alpha=0.34, beta=0.28)  # Chinchilla's shape, the lab's scale
SIZES = (2e5, 6e5, 2e6, 6e6)
RATIOS = (5, 20, 80)  # tokens per weight


def drawn(law: Law, sigma: float, seed: int = 7, sizes=SIZES, ratios=RATIOS) -> list[Point]:
    rng = np.random.default_rng(seed)
    return [Point(n, n * r, float(law.loss(n, n * r) + rng.normal(0, sigma)), sigma, f"{n:g}x{r}")
            for n in sizes for r in ratios]


def test_the_fit_recovers_a_known_law_and_predicts_the_largest_run():
    a = assess(drawn(TRUE, 0.01))
    assert a.enough, a.why
    for name in ("alpha", "beta", "E"):
        assert a.intervals[name].holds(getattr(TRUE, name)), (name, a.intervals[name])
    assert a.intervals["alpha"].width < ENOUGH_EXPONENT and a.intervals["beta"].width < ENOUGH_EXPONENT
    h = a.holdout
    assert h is not None and h.point.n == max(SIZES) and h.point.d == max(SIZES) * max(RATIOS)
    truth = float(TRUE.loss(h.point.n, h.point.d))
    assert h.interval.holds(truth) and abs(h.error) < 0.05  # the law's own value, and the noisy one
    # The compute-optimal size for the largest run's compute, by the fit and by the true law.
    n_fit, _ = a.law.optimal(h.point.compute)
    n_true, d_true = TRUE.optimal(h.point.compute)
    assert 0.5 < n_fit / n_true < 2.0 and d_true / n_true > 0


def test_too_few_or_too_noisy_runs_are_not_enough():
    few = assess(drawn(TRUE, 0.01, sizes=SIZES[:2], ratios=RATIOS[:2]))
    assert not few.enough and few.why == "too_few"
    noisy = assess(drawn(TRUE, 0.4))
    assert not noisy.enough and noisy.why in ("wide_prediction", "wide_exponents")


def test_the_ladder_fits_the_hours_left_and_the_data():
    base = {"model": {"context": 256, "width": 256, "heads": 4, "layers": 4, "vocab": 4000},
            "training": {"batch_per_card": 8}}
    ladder = propose(base, hours_left=5.0, train_tokens=50_000_000, flops_per_s=2e12)
    assert len(ladder.rungs) == 6 and ladder.basis == "measured"
    assert ladder.hours <= 5.0 * SHARE and {r.width for r in ladder.rungs} == {128, 256, 384}
    assert max(r.tokens for r in ladder.rungs) <= 50_000_000
    assert ladder.command.count("ternit queue add") == 3 and "--width 384 --vary training.steps_to=" in ladder.command
    assert len({r.tokens for r in ladder.rungs}) == 6  # six lengths: B, β and E apart
    tight = propose(base, hours_left=500.0, train_tokens=2_000_000)  # the data, not the hours, caps it
    assert max(r.tokens for r in tight.rungs) <= 2_000_000 and tight.basis == "guide"


def facts(run_id: str, n: int, d: int, loss: float, data_id: str = "x", at_end: bool = True,
          train: int = 10**9, names=("demo",)) -> RunFacts:
    return RunFacts(run_id, data_id, names, n, d, loss, (loss - 0.02, loss + 0.02), at_end, train)


def test_the_runs_the_law_takes():
    chosen = select([
        facts("a", 1000, 20000, 3.0), facts("b", 1000, 20000, 2.9),          # one size and length: b
        facts("c", 1000, 80000, 2.7, at_end=False),                        # stopped mid-schedule
        facts("d", 2000, 2 * 10**9, 2.5),                                  # more tokens than the data
        facts("e", 4000, 20000, 2.8), facts("f", 8000, 20000, 2.6, data_id="y", names=("other",)),
    ])
    assert chosen.data_id == "x" and sorted(p.run_id for p in chosen.points) == ["b", "e"]
    assert chosen.left_out == {"a": "superseded", "c": "not_at_end", "d": "repeated"}
    assert abs(chosen.points[0].sigma - 0.02 / 1.96) < 1e-3
    other = select([facts("e", 4000, 20000, 2.8), facts("f", 8000, 20000, 2.6, data_id="y", names=("other",))],
                   ("other",))
    assert [p.run_id for p in other.points] == ["f"] and other.constellations == ("other",)


def _finished_run(reg: Registry, data_dir, n: int, d: int, loss: float, width: int = 32) -> str:
    cfg = {"name": "law", "model": {"context": 32, "width": width, "heads": 2, "layers": 2, "vocab": 300},
           "training": {"batch_per_card": 4, "steps_to": 10}, "data": {"dir": str(data_dir), "constellations": ["tiny"]}}
    rec = reg.create_run(cfg)
    events = [{"event": "start", "time": 1.0, "step": 0, "params": n},
              {"event": "step", "time": 2.0, "step": 10, "loss": loss + 0.1, "tokens_seen": d, "tokens_per_s": 5000.0},
              {"event": "eval", "time": 3.0, "step": 10, "val_loss": loss, "val_ci95": [loss - 0.01, loss + 0.01]},
              {"event": "end", "time": 4.0, "step": 10, "reason": "steps_reached"}]
    rec.events_path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    reg.update(rec.id, status=st.RUNNING)
    reg.ingest(rec.id)
    assert reg.get(rec.id).status == st.FINISHED
    return rec.id


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_the_command(tiny_data, lang):
    law = Law(E=2.0, A=60.0, B=90.0, alpha=0.4, beta=0.35)  # D within the tiny data's unique tokens
    reg = Registry()
    try:
        ids = [_finished_run(reg, tiny_data, n, d, float(law.loss(n, d)))
               for n in (1000, 3000, 8000, 20000) for d in (n // 3, n, 3 * n)]
        code, out, err = run_cli(["law", "--json", "--constellations", "tiny"], lang)
        assert code == 0, err
        r = json.loads(out)
        assert r["runs"] == 12 and r["enough"] is True and r["constellations"] == ["tiny"]
        assert set(r["fit"]) == {"E", "A", "B", "alpha", "beta"}
        low, high = r["fit"]["alpha"]["interval"]
        assert low <= 0.4 <= high and "ladder" not in r
        assert r["holdout"]["run_id"] == ids[-1] and abs(r["holdout"]["error"]) < 0.02
        code, out, _ = run_cli(["law"], lang)
        assert code == 0 and ("проверка на самом большом прогоне" if lang == "ru" else "check on the largest run") in out
        for run_id in ids[3:]:
            reg.delete(run_id)
        code, out, _ = run_cli(["law", "--json", "--hours", "3"], lang)
        r = json.loads(out)
        assert r["runs"] == 3 and r["enough"] is False and r["why"] == "too_few" and "fit" not in r
        assert len(r["ladder"]["runs"]) == 6 and r["ladder"]["speed_basis"] == "measured"
        code, out, _ = run_cli(["law", "--hours", "3"], lang)
        assert ("лестница" if lang == "ru" else "the ladder") in out and "ternit queue add" in out
    finally:
        reg.close()


def test_the_advice_lines_say_what_they_rest_on(russian):
    from app.law.advice import advice_lines

    a = assess(drawn(TRUE, 0.01))
    n, d = 600_000, 12_000_000
    loss, opt, grow = advice_lines(a, n, d)
    assert [loss.key, opt.key, grow.key] == ["law_loss", "law_optimum", "law_grow"]
    assert abs(float(loss.value.replace(",", ".")) - float(TRUE.loss(n, d))) < 0.05
    assert loss.note.startswith("по 12 прогонам лабы, ±0,0")
    assert "по справке (20 токенов на вес)" in opt.note and "по 12 прогонам лабы" in opt.note
    compute = 6.0 * n * d
    n_opt, _ = a.law.optimal(compute)
    # The same compute spent on a quarter of the optimal size, and on four times it.
    small = advice_lines(a, int(n_opt / 4), int(compute / (6 * n_opt / 4)))[2]
    big = advice_lines(a, int(n_opt * 4), int(compute / (6 * n_opt * 4)))[2]
    assert small.value == "упирается в размер" and big.value == "упирается в токены"
    assert advice_lines(a, n, d, unique_tokens=1000)[2].value == "упирается в данные"
    [few] = advice_lines(assess(drawn(TRUE, 0.01, sizes=SIZES[:2])), n, d)
    assert few.level == "warning" and "ternit law" in few.note
    [counting] = advice_lines(None, n, d)
    assert counting.value == "…"


def test_the_form_shows_the_law_beside_the_guide(tiny_data, russian):
    from app.data.prepared import Prepared
    from app.form.run_form import FormContext, RunForm
    from app.law.advice import LawAdvisor

    law = Law(E=2.0, A=60.0, B=90.0, alpha=0.4, beta=0.35)
    reg = Registry()
    try:
        for n in (1000, 3000, 8000, 20000):
            for d in (n // 3, n, 3 * n):
                _finished_run(reg, tiny_data, n, d, float(law.loss(n, d)))
        advisor = LawAdvisor(reg)
        prep = Prepared.read(tiny_data)
        assert advisor.assessment(prep.data_id, wait=True).enough
        form = RunForm(FormContext(prepared=[prep], constellations={"tiny": prep.train_tokens},
                                   law_lines=advisor.lines))
        form.values.update(constellations=["tiny"], context=32, width=32, heads=2, layers=2, batch_per_card=4,
                           steps_to=20)
        rows = {r.key: r for r in form.size_rows()}
        assert {"law_loss", "law_optimum", "law_grow"} <= set(rows), list(rows)
        assert rows["law_loss"].note.startswith("по 12 прогонам лабы")
        assert rows["data"].note.endswith(")") and "~20" in rows["data"].note  # the guide's rule stays beside it
    finally:
        reg.close()


def test_the_ladder_is_queued_as_it_is_offered(tiny_data, russian):
    """`ternit law --queue`: with too few runs, the ladder the report offers goes into the queue
    as one series a width, its runs the ones the report lists; with the law known, nothing."""
    from app.queue.store import QueueStore

    law = Law(E=2.0, A=60.0, B=90.0, alpha=0.4, beta=0.35)
    reg = Registry()
    try:
        for n in (1000, 3000, 8000):
            _finished_run(reg, tiny_data, n, n, float(law.loss(n, n)))
        code, out, err = run_cli(["law", "--json", "--hours", "3", "--queue"], "ru")
        assert code == 0, err
        offered = json.loads(out[:out.rindex("}") + 1])["ladder"]["runs"]
        assert err.count("серия") == 3 and "очередь сейчас никто не ведёт" in err
        store = QueueStore()
        try:
            items = store.items()
            queued = sorted((it.config["model"]["width"], it.config["training"]["steps_to"]) for it in items)
            assert queued == sorted((r["width"], r["steps_to"]) for r in offered) and len(queued) == 6
            assert len({it.series_id for it in items}) == 3 and all(it.target == "any" for it in items)
            assert all(it.config["data"]["dir"] == str(tiny_data) and "resume_from" not in it.config for it in items)
        finally:
            store.close()
        for n in (20000, 50000):
            for d in (n // 3, n, 3 * n):
                _finished_run(reg, tiny_data, n, d, float(law.loss(n, d)))
        for n in (1000, 3000, 8000):
            for d in (n // 3, 3 * n):
                _finished_run(reg, tiny_data, n, d, float(law.loss(n, d)))
        code, _, err = run_cli(["law", "--queue"], "ru")
        assert code == 2 and "лестница не нужна" in err
    finally:
        reg.close()


def test_the_fit_runs_on_the_lab_s_real_tiny_runs_and_reports_its_error(tiny_data):
    """Eight real trainer runs (four widths × two lengths, the lengths different at each width
    as the ladder's are, so D has eight values; tiny, CPU) of one data set: the law
    is fitted to them and checked on the largest, and the report carries that check's error
    whether or not it is enough to advise on (`fit` when enough, `tried` when not: at this size
    either may come, by the machine's arithmetic)."""
    from app.runs.manager import RunManager
    from tests.trainer_run import run_module

    m = RunManager()
    try:
        for k, width in enumerate((16, 32, 48, 64)):
            for steps in (20 + 5 * k, 60 + 15 * k):
                cfg = {"name": f"law-{width}-{steps}",
                       "model": {"context": 32, "width": width, "heads": 2, "layers": 2, "vocab": 300},
                       "training": {"batch_per_card": 4, "steps_to": steps, "eval_every": 5, "eval_segments": 4,
                                    "warmup_steps": 2, "limit_min": 3, "sample_tokens": 0},
                       "data": {"dir": str(tiny_data)}, "target": {"kind": "local", "gpu": "cpu"}}
                rec = m.create(cfg)
                log = rec.path / "trainer.log"
                done = run_module("trainer", "--run", str(rec.path), "--device", "cpu", timeout=180, output=log)
                assert done.returncode == 0, log.read_text(encoding="utf-8", errors="replace")
                m.registry.update(rec.id, status=st.RUNNING)
                m.registry.ingest(rec.id)
                assert m.registry.get(rec.id).status == st.FINISHED
    finally:
        m.registry.close()
    code, out, err = run_cli(["law", "--json", "--hours", "1"], "en")
    assert code == 0, err
    r = json.loads(out)
    assert r["runs"] == 8 and r["left_out"] == {}, r
    fitted = r["fit"] if r["enough"] else r.get("tried")
    assert fitted is not None, {k: r[k] for k in ("why", "points")}
    assert set(fitted["fit"]) == {"E", "A", "B", "alpha", "beta"}
    largest = max(r["points"], key=lambda p: p["N"] * p["D"])
    h = fitted["holdout"]
    assert h["run_id"] == largest["run_id"] and h["observed"] == largest["loss"]
    assert abs(h["error"]) == pytest.approx(abs(h["observed"] - h["predicted"]))
    assert r["enough"] or ("ladder" in r and r["why"] in ("wide_prediction", "wide_exponents", "missed"))
    code, out, _ = run_cli(["law"], "en")
    assert code == 0 and f"check on the largest run {largest['run_id']}" in out
