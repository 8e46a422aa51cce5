"""One plan decides what a run executes (trainer/plan/planner.py), and everyone asks it.

Over the whole grid — economical level × lean state × compile × sharding × precision (3 ×
4 × 3 × 3 × 4 = 432 run.json settings) — on every machine `ternit estimate --gpu` knows,
at the lab's default model (27.7 M weights), 604 M (24 layers × 1440, the case the sizing
and the trainer once disagreed on) and the full model (1.67 B): the sizing offers exactly
the combinations the plan accepts, with the same sharding and step kind, refuses what it
refuses with the same refusal, and models the memory of the step the plan runs. Pure
Python (no torch): the trainer's side is tests/test_plan_trainer.py."""

from __future__ import annotations

import itertools
import json

import pytest

from app.base.plan_texts import EN_FORM, RU, RefusalError, text, value_text
from app.sizing import estimate
from app.sizing.combos import Combination, offered
from trainer.config.reasons import TEXTS
from trainer.config.run_config import (
    COMPILE_MODES,
    ECONOMICAL_LEVELS,
    LEAN_MODES,
    PRECISIONS,
    SHARDING_MODES,
    from_dict,
)
from trainer.plan.planner import (
    IN_BACKWARD_STEPS,
    KNOWN_CARDS,
    Libraries,
    Machine,
    Plan,
    Refusal,
    known_machine,
    plan,
)

ALL = Libraries(bitsandbytes=True, triton=True, compiler=True)
NONE = Libraries(bitsandbytes=False, triton=False, compiler=False)
MODELS = {
    "27.7M": {"layers": 8, "width": 512, "heads": 8, "context": 1024, "vocab": 4000, "batch": 6},
    "604M": {"layers": 24, "width": 1440, "heads": 12, "context": 1024, "vocab": 4000, "batch": 2},
    "1.67B": {"layers": 26, "width": 2304, "heads": 18, "context": 1024, "vocab": 4000, "batch": 1},
}
GRID = list(itertools.product(ECONOMICAL_LEVELS, LEAN_MODES, COMPILE_MODES, SHARDING_MODES, PRECISIONS))


def config(model: dict, level: str, lean: str, compiled: str, sharding: str, precision: str):
    shape = {k: v for k, v in model.items() if k != "batch"}
    return from_dict({"model": shape, "training": {
        "batch_per_card": model["batch"], "economical": level, "lean_state": lean, "compile": compiled,
        "sharding": sharding, "precision": precision}})


def test_the_grid_covers_what_the_issue_counts():
    assert len(GRID) == 540 and set(KNOWN_CARDS) == {"t4x2", "t4", "rtx3050", "rtx5070ti", "cpu"}


@pytest.mark.parametrize("name", sorted(KNOWN_CARDS))
@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_sizing_offers_exactly_what_the_plan_accepts(name, model):
    """`--economical auto`'s choices and the advice's: for each run.json's other keys, the
    offered combinations are the plan's accepted ones (training.sharding "auto" on several
    cards offers DDP and FSDP both: auto picks one of them and writes it)."""
    m = known_machine(name, ALL)
    for compiled, sharding, precision in itertools.product(COMPILE_MODES, SHARDING_MODES, PRECISIONS):
        base = config(MODELS[model], "off", "off", compiled, sharding, precision)
        offers = {c: p for c, p in offered(base, m)}
        asked = (sharding,) if sharding != "auto" or m.processes == 1 else ("auto", "ddp", "fsdp")
        expected: dict[Combination, Plan] = {}
        for level, lean, how in itertools.product(ECONOMICAL_LEVELS, LEAN_MODES, asked):
            p = plan(config(MODELS[model], level, lean, compiled, how, precision), m)
            if isinstance(p, Plan):
                expected.setdefault(Combination(level, lean, p.sharding.value), p)
        assert set(offers) == set(expected), (compiled, sharding, precision)
        for c, p in offers.items():
            assert p.values() == expected[c].values(), c


@pytest.mark.parametrize("name", sorted(KNOWN_CARDS))
def test_every_setting_is_estimated_as_the_plan_runs_it_or_refused_as_it_refuses(name):
    """Each of the 432 settings × the three models on this machine: the estimate's plan is
    the plan (every choice), its combination has the plan's sharding, and its memory is
    the plan's step's — no gradients held in a fused step, DDP's buckets only under DDP,
    FSDP's gathered blocks only under FSDP; what the plan refuses the estimate refuses with
    the same refusal."""
    m = known_machine(name, ALL)
    seen: dict[str, object] = {}
    for model, (level, lean, compiled, sharding, precision) in itertools.product(MODELS, GRID):
        shape = MODELS[model]
        p = plan(config(shape, level, lean, compiled, sharding, precision), m)
        kw = dict(gpu=name, economical=level, lean_state=lean, compile=compiled, sharding=sharding,
                  precision=precision, libraries=ALL, measured=[], lang="en", **shape)
        setting = (model, level, lean, compiled, sharding, precision)
        if isinstance(p, Refusal):
            with pytest.raises(RefusalError) as refused:
                estimate(**kw)
            assert refused.value.refusal == p, setting
            seen.setdefault(p.code, p)
            continue
        e = estimate(**kw)
        assert e.plan.values() == p.values() and e.plan == p, setting
        assert e.combination == Combination(level, lean, p.sharding.value) and e.precision == p.precision.value
        assert (e.memory.gradients == 0) is (p.step.value in IN_BACKWARD_STEPS), setting
        assert (e.memory.ddp_buckets > 0) is (p.sharding.value == "ddp"), setting
        assert (e.memory.sharded_buffers > 0) is (p.sharding.value == "fsdp"), setting
        for choice in Plan.CHOICES:
            reason = getattr(p, choice).reason
            seen.setdefault(reason.code, reason)
    # Each reason and refusal met is said in Russian too (the lab's one table of texts).
    for reason in seen.values():
        # English is the trainer's sentence, or the form's words where it names run.json's keys
        assert "{" not in text(reason, "ru") and _english_ok(reason)


def test_a_machine_without_the_libraries_refuses_what_needs_them_and_auto_says_so():
    bare = known_machine("rtx5070ti", NONE)
    assert plan(config(MODELS["27.7M"], "off", "on", "auto", "auto", "auto"), bare).code == "lean_no_library"
    p = plan(config(MODELS["27.7M"], "off", "off", "auto", "auto", "auto"), bare)
    assert p.compile.value == "off" and p.compile.reason.code == "compile_no_triton"
    assert plan(config(MODELS["27.7M"], "off", "off", "on", "auto", "auto"), bare).code == "compile_no_compiler"
    # The sizing offers nothing of bitsandbytes' lean states there (one_pass is plain torch), and
    # the estimate says why in the user's language.
    offers = offered(config(MODELS["27.7M"], "off", "off", "auto", "auto", "auto"), bare)
    assert {c.lean_state for c, _ in offers} == {"off", "one_pass"}
    with pytest.raises(RefusalError, match="нужна библиотека bitsandbytes"):
        estimate(gpu="rtx5070ti", lean_state="on", libraries=NONE, measured=[], lang="ru")


def test_nothing_asked_is_changed_silently():
    """What the trainer used to change quietly is now refused, or said by an auto."""
    t4 = known_machine("t4", ALL)
    card = known_machine("rtx5070ti", ALL)
    small = MODELS["27.7M"]
    # "fused" under fp16 ran as true; with micro-steps it held the gradients: refused.
    assert plan(config(small, "off", "fused", "auto", "auto", "auto"), t4).code == "fused_fp16"
    with_micro = from_dict({"training": {"lean_state": "fused", "tokens_per_step": 2 * 6 * 1024}})
    assert plan(with_micro, card).code == "fused_micro_steps"
    # compile auto says why it is off; on with FSDP is refused.
    p = plan(config(small, "off", "fused", "auto", "auto", "auto"), card)
    assert p.compile.value == "off" and "gradient hook" in p.compile.reason.text()
    # samples off under FSDP are the plan's choice, with its reason (the start event shows it).
    big = plan(config(MODELS["1.67B"], "off", "off", "off", "fsdp", "auto"), known_machine("t4x2", ALL))
    assert big.samples.value == "off" and big.samples.reason.code == "samples_fsdp"
    # Every choice carries a reason in both languages.
    for name in Plan.CHOICES:
        reason = getattr(p, name).reason
        assert reason.text() and text(reason, "ru") and _english_ok(reason)


def _english_ok(reason) -> bool:  # noqa: ANN001
    """English is the trainer's sentence, or the form's words (EN_FORM, its parameters filled)
    where the trainer's names run.json's keys."""
    said = text(reason, "en")
    return bool(said) and "{" not in said if reason.code in EN_FORM else said == reason.text()


def test_the_russian_table_has_every_code_of_the_contract_and_renders_its_parameters():
    assert set(RU) == set(TEXTS)
    samples = {
        "tokens_per_step": {"wanted": 1000, "cards": 1, "batch": 4, "context": 32, "micro": 128,
                            "near": [896, 1024], "batches": [1, 2]},
        "fused_fp16": {"lean": "fused", "auto": True},
        "sharding_fsdp": {"state_gb": 9.7, "half_gb": 8.1, "processes": 2},
        "sharding_ddp_fits": {"state_gb": 0.4, "half_gb": 8.1, "processes": 2},
        "state_too_big": {"params": 10**12, "gib": 14901.0},
        "memory_fits": {"allocated": 9755.1, "framework": 790.2, "needed": 10545.3, "card": 16384.0},
        "does_not_fit": {"allocated": 25465.0, "framework": 1418.6, "needed": 26883.6, "card": 16384.0, "fits": True,
                         "level": "off", "lean": "on", "sharding": "none", "fit_needed": 10562.0, "arithmetic": 1.0},
        "speed_basis": {"ms": 279.2, "note_ms": 149.0, "arithmetic": 1.87, "recompute": 0.2,
                        "second_backward": 0.67, "backward_passes": 2.0},
        "out_of_range": {"key": "model.width", "low": 1, "high": 65536, "above": False, "value": 70000,
                         "reason": "one width × width matrix"},
    }
    import string

    for code, template in TEXTS.items():
        if code in samples:
            params = samples[code]
        else:  # the parameters the English sentence names, given a value
            params = {f: 7 for _, f, _, _ in string.Formatter().parse(template) if f}
        ru = text(Refusal(code, params), "ru")
        assert ru and "{" not in ru, code
        assert _english_ok(Refusal(code, params)), code


def test_ternit_estimate_and_the_trainers_check_agree_on_the_604m_case(tmp_path, capsys):
    """24 layers × 1440 (604 M weights), lean_state true, on Kaggle's 2×T4: the sizing said
    "fits" under DDP while the trainer chose FSDP and refused the lean state. Now both
    print the same plan: DDP (the lean state runs unsharded), the held step."""
    from app.cli.main import main
    from trainer.config.__main__ import main as check

    run = tmp_path / "run.json"
    run.write_text(json.dumps({"model": {"layers": 24, "width": 1440, "heads": 12},
                               "training": {"lean_state": True, "batch_per_card": 2},
                               "target": {"kind": "kaggle"}}), encoding="utf-8")
    assert check([str(run), "--machine", "t4x2", "--json"]) == 0
    trainers = json.loads(capsys.readouterr().out)["plan"]
    assert main(["estimate", "--layers", "24", "--width", "1440", "--heads", "12", "--batch", "2",
                 "--lean-state", "on", "--gpu", "t4x2", "--no-measured", "--json", "--lang", "en"]) == 0
    sizing = json.loads(capsys.readouterr().out)
    assert sizing["plan"] == trainers
    assert trainers["sharding"]["value"] == "ddp" and trainers["step"]["value"] == "held"
    assert sizing["fits"] is True and sizing["memory_mb"]["ddp_buckets"] > 0
    # The human forms say it too, each in its own words.
    assert check([str(run), "--machine", "t4x2"]) == 0
    assert "sharding     ddp" in capsys.readouterr().out
    assert main(["estimate", "--layers", "24", "--width", "1440", "--heads", "12", "--batch", "2",
                 "--lean-state", "on", "--gpu", "t4x2", "--no-measured", "--lang", "ru"]) == 0
    assert "нет, у каждой всё (DDP)  (авто: облегчённое состояние" in capsys.readouterr().out


def test_the_check_refuses_with_exit_2_for_a_machine(tmp_path, capsys):
    from trainer.config.__main__ import main as check

    run = tmp_path / "run.json"
    run.write_text(json.dumps({"training": {"lean_state": "fused"}}), encoding="utf-8")
    assert check([str(run)]) == 0  # no machine: the run.json alone is sound
    assert check([str(run), "--machine", "t4x2", "--json"]) == 2
    out = capsys.readouterr()
    assert json.loads(out.out)["refusal"]["code"] == "lean_under_ddp"
    assert out.err.startswith('error: training.lean_state "fused" updates each weight')
    assert check([str(run), "--machine", "rtx5070ti"]) == 0  # one process, bf16: the fused step
    assert "step         fused" in capsys.readouterr().out
    assert check([str(tmp_path / "missing.json"), "--machine", "cpu"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_the_machines_are_one_catalogue():
    """The sizing's cards are the contract's (processes, memory, capability)."""
    from app.sizing.gpus import GPUS, machine_for

    for name, card in KNOWN_CARDS.items():
        assert GPUS[name].card is card
        m = machine_for(name, libraries=ALL)
        assert m == known_machine(name, ALL) and isinstance(m, Machine)
    assert machine_for("t4x2").bitsandbytes  # Kaggle's: the lab ships the wheel with a lean run


def test_a_run_the_plan_refuses_on_its_target_is_refused_before_anything_exists(tiny_data, tmp_path, capsys,
                                                                                russian):
    """`ternit run start` and the Kaggle start ask the plan for the target's machine before
    a run folder, a history row or an upload exists: a fused lean state on Kaggle's 2×T4
    (DDP would average the gradients after the update), micro-steps with the fused step
    here."""
    from app.cli.main import main
    from app.runs.manager import RunError, RunManager
    from app.runs.plan_check import check_plan, target_machine
    from app.runs.registry import Registry

    config = {"name": "p", "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
              "training": {"batch_per_card": 4, "steps_to": 2, "lean_state": "fused"},
              "data": {"dir": str(tiny_data)}, "target": {"kind": "kaggle"}}
    assert target_machine(config).name == "t4x2" and target_machine(config).processes == 2
    manager = RunManager(Registry())
    with pytest.raises(RunError, match="усреднение градиентов DDP"):
        manager.create(config)
    assert manager.registry.list_runs() == []
    local = {**config, "target": {"kind": "local", "gpu": "cpu"},
             "training": {**config["training"], "tokens_per_step": 2 * 4 * 32}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(local), encoding="utf-8")
    assert main(["run", "start", "--config", str(path)]) == 2
    assert "складывают свои до шага" in capsys.readouterr().err
    assert manager.registry.list_runs() == []
    # What it accepts, it plans as the trainer will (the CPU here: one process, fp32).
    fine = {**local, "training": {**local["training"], "lean_state": True}}
    p = check_plan(fine)
    assert (p.machine.device, p.precision.value, p.step.value, p.micro_steps.value) == ("cpu", "fp32", "held", 2)


def test_the_form_says_the_plans_refusal_on_its_field(tiny_data, russian):
    """The form asks the plan for the chosen machine (through the sizing's estimate): Start
    waits, and the refusal is on the field it is about, in the interface's language."""
    from app.data.prepared import Prepared
    from app.form.run_form import FormContext, RunForm

    ctx = FormContext()
    ctx.add_prepared(Prepared.read(tiny_data))
    form = RunForm(ctx)
    for name, value in (("context", 32), ("width", 32), ("heads", 2), ("layers", 2), ("batch_per_card", 4)):
        form.set(name, value)
    form.set("gpu", "t4")  # one T4: auto is fp16 there
    form.set("lean_state", "fused")
    [issue] = form.field_issues("lean_state")
    assert issue.level == "error" and "его выбрала для этой карты точность «авто»" in issue.text
    assert not form.can_start() and form.plan_refusal().code == "fused_fp16"
    form.set("lean_state", "on")
    assert form.field_issues("lean_state") == [] and form.plan_refusal() is None
    assert form.estimate().plan.step.value == "held"


def test_this_computers_card_is_planned_from_nvml(monkeypatch):
    """The local card's machine: NVML's memory and compute capability (also when the form
    gives the memory), so auto precision is the trainer's choice there (bf16 from 8.0)."""
    from app.sizing.gpus import local_card
    from bench.fake_nvml import FakeCard, pc_with_cards

    pc_with_cards(monkeypatch, [FakeCard(name="NVIDIA GeForce RTX 3050", total_mb=8192, capability=(8, 6))])
    cc = local_card().compute_capability
    from_nvml = estimate(gpu="local", measured=[], lang="en", libraries=ALL)
    given = estimate(gpu="local", card_memory_mb=8000, measured=[], lang="en", libraries=ALL)
    for e in (from_nvml, given):
        assert cc == (8, 6) and e.plan.machine.capability == cc and e.plan.precision.value == "bf16"
    assert given.plan.machine.card_memory_mb == 8000


def test_a_local_run_is_planned_for_the_cards_it_will_train_on(monkeypatch):
    """target.gpu names this PC's cards: the plan is for them (their number of processes,
    the named card's memory and capability), as the trainer started there will plan."""
    from app.runs.plan_check import target_machine
    from bench.fake_nvml import FakeCard, pc_with_cards

    pc_with_cards(monkeypatch, [FakeCard(name="Tesla T4", total_mb=15360, capability=(7, 5)),
                                FakeCard(name="RTX 3050", uuid="GPU-1", total_mb=8192, capability=(8, 6))])
    one = target_machine({"target": {"kind": "local", "gpu": "1"}})
    assert (one.processes, one.card_memory_mb, one.capability, one.bf16) == (1, 8192, (8, 6), True)
    both = target_machine({"target": {"kind": "local", "gpu": "auto"}})
    assert (both.processes, both.capability, both.bf16) == (2, (7, 5), False)
    assert target_machine({"target": {"kind": "local", "gpu": "cpu"}}).device == "cpu"


def test_a_run_json_the_lab_cannot_read_is_said_with_the_trainers_words(tmp_path, capsys, russian, tiny_data):
    """The file and target errors are the contract's refusals (trainer.config.run_config.read_json),
    said in Russian from the same codes: not restated by the lab."""
    from app.cli.main import main
    from trainer.config.run_config import ConfigError, read_json

    missing, broken = tmp_path / "missing.json", tmp_path / "broken.json"
    broken.write_text("{\n  \"model\": ", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        read_json(broken)
    assert e.value.refusal.code == "file_not_json" and e.value.refusal.params["line"] == 2
    assert main(["run", "start", "--config", str(missing)]) == 2
    assert f"файла {missing} нет" in capsys.readouterr().err
    assert main(["run", "start", "--config", str(broken)]) == 2
    assert f"{broken}: не JSON (строка 2:" in capsys.readouterr().err
    listed = tmp_path / "list.json"
    listed.write_text("[1]", encoding="utf-8")
    assert main(["run", "start", "--config", str(listed)]) == 2
    assert "в run.json должен быть один JSON-объект" in capsys.readouterr().err
    kind = tmp_path / "kind.json"
    kind.write_text(json.dumps({"target": {"kind": "cloud"}, "data": {"dir": str(tiny_data)}}), encoding="utf-8")
    assert main(["run", "start", "--config", str(kind)]) == 2
    assert "target.kind: local или kaggle, а не 'cloud'" in capsys.readouterr().err


def test_the_forms_panel_says_how_the_trainer_will_run_it(tiny_data, russian):
    """«Как пойдёт обучение» in the size panel is the trainer's own plan for the form's run on
    the chosen machine (precision, sharding, compilation, step), each with its reason."""
    from app.data.prepared import Prepared
    from app.form.run_form import FormContext, RunForm

    ctx = FormContext()
    ctx.add_prepared(Prepared.read(tiny_data))
    form = RunForm(ctx)
    for name, value in (("context", 32), ("width", 32), ("heads", 2), ("layers", 2), ("batch_per_card", 4)):
        form.set(name, value)
    form.values["constellations"] = ["tiny"]
    for gpu, lean in (("t4x2", "off"), ("t4", "on")):
        form.set("gpu", gpu)
        form.set("lean_state", lean)
        [row] = [r for r in form.size_rows() if r.key == "plan"]
        est = form.estimate()
        assert est.plan.machine.name == gpu
        # the trainer's plan function, on the run.json the form writes, for the machine it sized
        want = plan(from_dict(form.run_config()), est.plan.machine)
        assert isinstance(want, Plan), want
        assert row.label == "Как пойдёт обучение" and row.level == "ok"
        # In the form's words (app.base.plan_texts.value_text); one process shares nothing: no row.
        shared = ("" if want.sharding.value == "none" else
                  f" · карты делят состояние {value_text('sharding', want.sharding.value, 'ru')}")
        assert row.value == (f"точность {want.precision.value}{shared}"
                             f" · компиляция {value_text('compile', want.compile.value, 'ru')}"
                             f" · шаг {value_text('step', want.step.value, 'ru')}"), row.value
        for choice in ("precision", "compile", "step") + (("sharding",) if shared else ()):
            assert text(getattr(want, choice).reason, "ru") in row.note, (choice, row.note)
    assert "градиенты хранятся" in row.value  # one T4 with the lean state: gradients held
