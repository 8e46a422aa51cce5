"""The CPU's rate measured once when nothing is known of it (app/sizing/cpu_rate.py): the
real child (`python -m trainer.run.rate`) at a tiny size, its result kept beside the state DB
and joining the measured runs, the estimate scaled by it and said to be an estimate."""

from __future__ import annotations

import logging

import pytest

from app.sizing import cpu_rate, estimate
from app.sizing.formulas import Shape
from app.sizing.history import measured_runs

TINY = Shape(1, 32, 2, 32, 64, 2)


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """One real measurement for the module (a child process with torch: a few seconds)."""
    pytest.importorskip("torch")
    path = tmp_path_factory.mktemp("rate") / cpu_rate.FILE
    entry = cpu_rate.measure(path, shape=TINY, steps=2, timeout=240)
    assert entry is not None
    return path, entry


def test_the_child_measures_a_few_real_steps(probe):
    path, entry = probe
    assert path.is_file()
    assert entry["probe"] is True and entry["gpu"] == "cpu" and entry["tokens_per_s"] > 0
    assert (entry["layers"], entry["width"], entry["context"], entry["batch"]) == (1, 32, 32, 2)
    # The trainer's own model: its weight count.
    assert entry["params"] == 12 * 32 * 32 + 64 * 32 + 32 * 32


def test_the_estimate_says_estimate_until_the_cpu_is_measured_then_scales_by_it(probe):
    _, entry = probe
    kw = dict(layers=TINY.layers, width=TINY.width, heads=TINY.heads, context=TINY.context, vocab=TINY.vocab,
              batch=TINY.batch, gpu="cpu", steps_to=100, lang="en")
    before = estimate(**kw)
    assert before.speed.kind == "cpu_rate" and "not measured on this machine yet" in before.tokens_per_s_source
    after = estimate(**kw, measured=[entry])
    assert after.speed.kind == "cpu_probe" and "short measurement of this CPU" in after.tokens_per_s_source
    # At the measured shape the rate is the measurement itself (its step time, evaluation aside).
    assert after.tokens_per_s == pytest.approx(entry["tokens_per_s"], rel=1e-9)
    assert not after.is_measurement  # other shapes are scaled from it: still an estimate
    # A bigger model is scaled by compute from the same measurement, not the table's rate.
    big = {**kw, "layers": 4, "width": 256, "heads": 4}
    ratio = estimate(**big, measured=[entry]).tokens_per_s / estimate(**big).tokens_per_s
    assert ratio == pytest.approx(after.tokens_per_s / before.tokens_per_s, rel=1e-9)
    # A real CPU run in the history outranks the probe for its shape.
    run = {**entry, "probe": False, "run": "r1", "tokens_per_s": entry["tokens_per_s"] * 2}
    assert estimate(**kw, measured=[entry, run]).speed.kind == "measured"


def test_the_form_marks_the_time_as_an_estimate(probe):
    from app.base.i18n import set_language
    from app.form.run_form import FormContext, RunForm

    set_language("en")
    try:
        for measured in ([], [probe[1]]):
            form = RunForm(FormContext(measured=measured))
            form.set("gpu", "cpu")
            row = next(r for r in form.size_rows() if r.key == "time")
            assert "estimate" in row.note, row.note
    finally:
        set_language(None)


def test_stored_joins_the_measured_runs_and_is_not_started_again(probe, tmp_path, monkeypatch):
    path, entry = probe
    monkeypatch.setattr(cpu_rate, "rate_path", lambda: path)
    got = measured_runs(tmp_path)  # an empty runs folder: the probe alone
    assert [m["run"] for m in got] == ["cpu-probe"]
    assert measured_runs(tmp_path, probe=False) == []
    monkeypatch.setenv("TERNIT_CPU_PROBE", "1")
    assert cpu_rate.ensure_started([], path) is None  # stored already
    assert cpu_rate.measured_with_probe([], path) == []  # nothing started, nothing waited for


def test_nothing_starts_when_the_cpu_is_known_or_switched_off(tmp_path, monkeypatch):
    path = tmp_path / cpu_rate.FILE
    monkeypatch.setenv("TERNIT_CPU_PROBE", "1")
    assert cpu_rate.ensure_started([{"gpu": "cpu", "run": "r1"}], path) is None  # a CPU run is known
    monkeypatch.setenv("TERNIT_CPU_PROBE", "0")
    assert cpu_rate.ensure_started([], path) is None
    assert not path.exists()


def test_a_failed_or_damaged_measurement_leaves_the_table_rate(tmp_path, caplog):
    pytest.importorskip("torch")
    path = tmp_path / cpu_rate.FILE
    with caplog.at_level(logging.WARNING, logger="app.sizing.cpu_rate"):
        # Width 30 does not divide by 4 heads: the trainer's model refuses it.
        assert cpu_rate.measure(path, shape=Shape(1, 30, 4, 8, 16, 1), steps=1, timeout=240) is None
    assert "failed" in caplog.text and not path.exists()
    path.write_text("{not json", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="app.sizing.cpu_rate"):
        assert cpu_rate.stored(path) is None
    assert "unreadable" in caplog.text
