"""The defaults of a PC without a card: a first run sized to this machine (≤ 30 minutes by
the lab's own estimate) on the first start and from «Для этого ПК», the guide's 2×T4 run one
click away («Как в гайде: 2×T4»), and `ternit run start` without a config saying what it
takes and asking for --yes when that is hours."""

from __future__ import annotations

import contextlib
import io

import pytest

from app.form import fields as F
from app.form.run_form import FormContext, RunForm
from app.sizing import estimate, param_count
from app.sizing.first_run import FIRST_RUN_MINUTES, LADDER, MIN_STEPS, first_run, local_time
from bench.fake_nvml import FakeCard, pc_with_cards

GUIDE_WEIGHTS = 27_738_112


def _form_minutes(form: RunForm) -> float:
    est = form.estimate()
    assert est is not None
    return est.seconds_to_steps / 60


def test_a_pc_without_a_card_proposes_a_first_run_of_half_an_hour():
    form = RunForm(FormContext(constellations={"demo": 113_000}))
    guide = form.estimate()
    assert guide is not None and guide.params == GUIDE_WEIGHTS and guide.seconds_to_steps > 24 * 3600  # days
    run = form.size_for_this_pc()
    assert form.values["gpu"] == "cpu" and form.values["machine"] == "local"
    assert _form_minutes(form) <= FIRST_RUN_MINUTES and form.values["limit_min"] == FIRST_RUN_MINUTES
    assert form.values["steps_to"] >= MIN_STEPS and form.values["steps_to"] % 100 == 0
    assert run.params < GUIDE_WEIGHTS
    assert not [i for name in run.values for i in form.field_issues(name) if i.level == "error"]
    assert "Размер для этого ПК" in run.why("ru") and "Sized for this PC" in run.why("en")
    form.as_in_the_guide()  # one click back to the guide's run
    est = form.estimate()
    assert est is not None and est.params == GUIDE_WEIGHTS and form.values["gpu"] == "t4x2"
    assert (form.values["steps_to"], form.values["limit_min"]) == (F.spec("steps_to").default, 630)


def test_with_the_fake_nvml_card_the_first_run_uses_the_card_and_is_larger(monkeypatch):
    pc_with_cards(monkeypatch, [FakeCard(name="NVIDIA GeForce RTX 3050", total_mb=8192)])
    cpu = first_run("cpu")
    card = first_run("local", local_name="NVIDIA GeForce RTX 3050", card_memory_mb=8192)
    assert card.params >= cpu.params and card.seconds <= FIRST_RUN_MINUTES * 60
    form = RunForm(FormContext(local_gpu="NVIDIA GeForce RTX 3050", local_card_memory_mb=8192))
    form.size_for_this_pc()
    assert form.values["gpu"] == "local" and _form_minutes(form) <= FIRST_RUN_MINUTES


def test_a_slower_measured_cpu_makes_a_smaller_first_run_while_the_form_is_untouched():
    """The CPU's table rate is optimistic on a busy machine: when the lab's measurement
    comes, the untouched first run is sized again; a form the user changed is left alone."""
    form = RunForm(FormContext())
    fast = form.size_for_this_pc()
    layers, width, heads, context, batch = LADDER[1]
    slow = estimate(layers=layers, width=width, heads=heads, context=context, batch=batch, gpu="cpu",
                    steps_to=100).tokens_per_s / 20  # this CPU is 20× slower than the table
    form.ctx.measured = [{"run": "cpu-probe", "gpu": "cpu", "probe": True, "economical": False, "lean_state": False,
                          "tokens_per_s": slow, "layers": layers, "width": width, "heads": heads,
                          "context": context, "vocab": 4000, "batch": batch, "mem_peak_mb": None,
                          "params": param_count(layers, width, 4000, context)}]
    again = form.resize_for_this_pc()
    assert again is not None and again.params <= fast.params
    assert _form_minutes(form) <= FIRST_RUN_MINUTES + 0.5
    form.set("steps_to", 5000)
    assert form.resize_for_this_pc() is None  # the user's own value stays


def _start(argv: list[str]) -> tuple[int, str]:
    from app.cli import main as cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["run", "start", *argv])
    return code, err.getvalue()


def test_run_start_without_a_config_says_what_it_takes_and_asks_for_yes_when_it_is_hours(russian):
    code, err = _start(["--constellations", "demo"])
    lines = err.strip().splitlines()
    assert code == 2, err
    assert lines[0].startswith("ternit run start: этот прогон займёт ≈ ") and "на процессоре" in lines[0]
    assert "--yes" in lines[1] and "--steps" in lines[1] and "--layers" in lines[1]


def test_the_time_of_a_run_here_follows_its_config():
    small = {"model": {"layers": 1, "width": 16, "heads": 2, "context": 16, "vocab": 300},
             "training": {"steps_to": 50, "limit_min": 5}}
    took = local_time(small)
    assert took is not None and took.gpu == "cpu" and took.runs_s < 60
    assert local_time({"model": {"heads": 7}}) is None  # the trainer refuses it: its check says why


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_the_readme_and_the_tooltips_say_why_the_two_sizes_differ(lang):
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert "Как в гайде: 2×T4" in readme and "30 minutes" in readme
    tip = " ".join(F.spec("limit_min").tooltip_text(lang, default=30).split())  # unwrapped
    assert ("«Для этого ПК»" in tip) if lang == "ru" else ("“For this PC”" in tip)
