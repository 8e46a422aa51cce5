"""`training.tokens_per_step` in the lab: the form's field and its check, the sizing's
tokens per step, a continuation that keeps the parent's tokens per step, and the
out-of-memory retry that halves the batch but keeps the step."""

from __future__ import annotations

import json

import pytest

from app.data.prepared import Prepared
from app.form import fields as F
from app.form.run_form import FormContext, RunForm
from app.runs import Registry, RunManager
from app.runs.failure import failure_from_events
from app.sizing import estimate

CFG = {
    "name": "t4x2-run",
    "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
    "training": {"batch_per_card": 6, "steps_to": 30, "lr": 0.001},
    "data": {"dir": "/nowhere", "constellations": ["tiny"]},
    "target": {"kind": "kaggle", "gpu": "auto", "account": "auto"},
    "resume_from": None,
}


def ev(event: str, step: int, **fields) -> dict:
    return {"event": event, "time": 1.0 + step, "step": step, **fields}


def test_the_field_is_an_int_with_zero_for_automatic_and_short_tooltip_lines():
    spec = F.spec("tokens_per_step")
    assert (spec.section, spec.kind, spec.path, spec.default, spec.minimum) == (
        "advanced", "int", "training.tokens_per_step", 0, 0)  # in «Дополнительно»
    for lang in ("ru", "en"):
        lines = spec.tooltip_text(lang).splitlines()
        assert len(lines) <= 12 and max(map(len, lines)) <= 60


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_oom_retry_halves_the_batch_and_keeps_the_tokens_per_step(lang):
    from app.base.i18n import set_language

    set_language(lang)
    try:
        events = [ev("start", 0, tokens_per_step=6 * 2 * 32, accumulation=1, world_size=2),
                  ev("error", 4, kind="oom", message="out of memory at step 5", advice="", checkpoint="/c/step-3.pt",
                     suggested_batch=3, tokens_per_step=384)]
        f = failure_from_events(events, CFG)
        assert f.suggested_batch == 3 and f.tokens_per_step == 384
        retry = f.retry_config(CFG)
        assert retry["training"]["batch_per_card"] == 3 and retry["training"]["tokens_per_step"] == 384
        assert ("2 micro-steps instead of 1" if lang == "en" else "2 микрошага вместо 1") in f.advice
        # An older trainer's error without the numbers: taken from its start event.
        old = failure_from_events([events[0], ev("error", 4, kind="oom", message="oom", advice="")],
                                  {**CFG, "training": {**CFG["training"], "batch_per_card": 5}})
        assert old.suggested_batch == 1 and old.retry_config(CFG)["training"]["tokens_per_step"] == 384
    finally:
        set_language(None)


def test_a_continuation_writes_the_parents_tokens_per_step():
    import torch

    reg = Registry()
    parent = reg.create_run(CFG)
    ck = parent.checkpoints_dir / "step-00000030.pt"
    torch.save({"format": 1, "step": 30, "run_id": parent.id}, ck)  # what a payload says, without weights
    (parent.checkpoints_dir / "latest").write_text("step-00000030.pt\n")
    with open(parent.events_path, "a", encoding="utf-8") as f:
        for e in (ev("start", 0, params=1, config=CFG, tokens_per_step=384, world_size=2),
                  ev("end", 30, reason="steps_reached", message="done")):
            f.write(json.dumps(e) + "\n")
    cfg = RunManager(reg).continue_config(parent.id)
    assert cfg["training"]["tokens_per_step"] == 384  # on one card: 2 micro-steps of 6 × 32
    # One the user set stays as it was.
    mine = {**CFG, "training": {**CFG["training"], "tokens_per_step": 768}}
    other = reg.create_run(mine)
    torch.save({"format": 1, "step": 30, "run_id": other.id}, other.checkpoints_dir / "step-00000030.pt")
    (other.checkpoints_dir / "latest").write_text("step-00000030.pt\n")
    assert RunManager(reg).continue_config(other.id)["training"]["tokens_per_step"] == 768


def test_the_sizing_counts_the_tokens_per_step_and_keeps_the_micro_batch_memory():
    auto = estimate(gpu="t4x2")
    doubled = estimate(gpu="t4x2", tokens_per_step=2 * auto["tokens_per_step"])
    assert doubled["tokens_per_step"] == 24_576
    assert doubled["seconds_to_steps"] == pytest.approx(2 * auto["seconds_to_steps"], rel=0.05)
    assert doubled["memory_mb"]["total"] == auto["memory_mb"]["total"]


@pytest.mark.usefixtures("russian")
def test_the_form_checks_it_and_writes_it(tiny_data):
    ctx = FormContext()
    ctx.add_prepared(Prepared.read(tiny_data))
    form = RunForm(ctx)
    for name, value in (("context", 32), ("width", 32), ("heads", 2), ("layers", 2), ("batch_per_card", 4)):
        form.set(name, value)
    form.set("gpu", "cpu")
    assert form.run_config()["training"]["tokens_per_step"] == 0  # 0: automatic (one micro-step)
    form.set("tokens_per_step", 1000)
    [issue] = form.field_issues("tokens_per_step")
    assert "896 или 1\u00a0024" in issue.text and not form.can_start()
    form.set("tokens_per_step", 256)
    assert form.field_issues("tokens_per_step") == []
    row = next(r for r in form.size_rows() if r.key == "tokens_per_step")
    assert row.value == F.format_value(256) and "× 2 микрошага" in row.note
    assert form.run_config()["training"]["tokens_per_step"] == 256


def test_ternit_run_start_takes_it_as_a_flag():
    from app.runs.start_flags import flag_fields

    assert "tokens_per_step" in [f.name for f in flag_fields()]
