"""run.json's one contract (trainer/config/run_config.py): the defaults, the weight count, the
width/heads rule and the economical reader that the trainer, the sizing and the form share."""

from __future__ import annotations

import pytest

from trainer.config import run_config as C


def test_default_reads_one_key_by_its_path():
    assert C.default("model.width") == 512 and C.default("name") == "run"
    assert C.default("training.economical") is False and C.default("training.limit_min") == 630.0
    assert C.default("target.gpu") == "auto"
    # A fresh copy: changing it changes no later default.
    C.default("data.constellations").append("x")
    assert C.default("data.constellations") == []
    for path in ("model", "training.nope", "nope", "model.width.x", ""):
        with pytest.raises(KeyError):
            C.default(path)


def test_weight_count_is_the_models_own():
    """The formula the sizing and the form use is the real model's parameter count."""
    torch = pytest.importorskip("torch")
    from trainer.model.gpt import GPT, count_parameters

    assert C.weight_count(8, 512, 1024, 4000) == 27_738_112
    for layers, width, heads, context, vocab in [(1, 8, 1, 4, 256), (3, 48, 6, 17, 1000), (6, 96, 3, 64, 65535)]:
        m = C.ModelConfig(context=context, width=width, heads=heads, layers=layers, vocab=vocab)
        with torch.device("meta"):
            model = GPT(m)
        assert count_parameters(model) == C.weight_count(layers, width, context, vocab) == C.parameter_count(m)


def test_the_sizing_and_the_form_count_with_the_contract():
    from app.form.run_form import RunForm
    from app.sizing.formulas import param_count

    assert param_count(3, 96, 128, 300) == C.weight_count(3, 96, 128, 300)
    form = RunForm()
    form.set("layers", 3)
    form.set("width", 96)
    form.set("heads", 4)
    form.set("context", 128)
    params = form.size_rows()[0]
    assert params.key == "params"
    assert params.value.replace("\u00a0", "").replace(",", "") == str(C.weight_count(3, 96, 128, form.vocab()))


def test_width_and_heads_one_rule():
    """The shape rules are the contract's (trainer.config.run_config.shape_problem); the sizing and the
    form ask it and say its refusal in their language, restating nothing."""
    from app.base.plan_texts import text
    from app.sizing import estimate

    assert C.heads_divide(512, 8) and not C.heads_divide(500, 8) and not C.heads_divide(8, 0)
    assert C.heads_that_work(30) == [1, 2, 3, 5, 6, 10, 15, 30]
    with pytest.raises(C.ConfigError, match="choose heads from 1, 2, 4, 5, 10"):
        C.validate(C.RunConfig(model=C.ModelConfig(width=500, heads=8)))
    refused = C.shape_problem(8, 500, 8, 1024, 4000, 6)
    assert refused.code == "heads_divide" and refused.params["choices"][:5] == [1, 2, 4, 5, 10]
    with pytest.raises(ValueError, match="choose heads from 1, 2, 4, 5, 10") as e:
        estimate(width=500, heads=8, lang="en")
    assert e.value.refusal == refused
    assert text(refused, "ru").startswith("ширина 500 не делится на число голов 8: подойдут 1, 2, 4, 5, 10")
    assert C.shape_problem(8, 512, 8, 1024, C.MAX_VOCAB, 6) is None  # uint16 ids: 65,536 tokens
    assert C.shape_problem(8, 512, 8, 1024, C.MAX_VOCAB + 1, 6).code == "vocab_over"


@pytest.mark.parametrize("value, level", [(False, "off"), (None, "off"), (True, "selective"), ("off", "off"),
                                          ("selective", "selective"), ("full", "full")])
def test_economical_has_one_reader(value, level):
    from app.base import memory_saving as MS
    from trainer.plan import memory_model as memory

    assert C.economical_level(value) == level == MS.economical_level(value)
    assert memory.economical_level is C.economical_level


@pytest.mark.parametrize("value", ["half", 1, 0, "", [], "Full"])
def test_a_value_the_trainer_refuses_fails_the_same_way_everywhere(value):
    from app.base import memory_saving as MS
    from trainer.plan.memory_model import Shape, estimate_memory

    with pytest.raises(C.ConfigError, match="training.economical must be"):
        C.economical_level(value)
    with pytest.raises(ValueError, match="training.economical must be"):
        estimate_memory(Shape(), "bf16", economical=value)
    assert MS.economical_level(value) is None  # the form keeps its level rather than guess one


@pytest.mark.parametrize("value, name", [(False, "off"), (None, "off"), (True, "on"), ("off", "off"),
                                         ("on", "on"), ("offload", "offload")])
def test_lean_state_has_one_reader(value, name):
    from app.base import memory_saving as MS

    assert C.lean_mode(value) == name == MS.lean_state_level(value)
    assert MS.LEAN_STATES == C.LEAN_MODES


@pytest.mark.parametrize("value", ["half", 1, 0, "", "Offload"])
def test_a_lean_state_the_trainer_refuses_fails_the_same_way_everywhere(value):
    from app.base import memory_saving as MS
    from app.sizing import estimate

    with pytest.raises(C.ConfigError, match="training.lean_state must be"):
        C.lean_mode(value)
    with pytest.raises(ValueError, match="training.lean_state must be"):
        estimate(lean_state=value, lang="en")
    assert MS.lean_state_level(value) is None


def test_the_form_reads_the_contract_without_torch():
    import subprocess
    import sys
    from pathlib import Path

    code = "import sys, app.form.fields, app.form.run_form, app.sizing; assert 'torch' not in sys.modules, 'torch loaded'"
    subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, check=True, timeout=60)


def test_the_data_and_the_trainer_agree_on_the_largest_vocabulary():
    """uint16 ids are 0…65,535: a vocabulary of 65,536 tokens, in one place (the contract's
    MAX_VOCAB); preparing data once stopped at 65,535 while the trainer took 65,536."""
    from app.data.prepare import PrepareError, validate_vocab

    assert C.MAX_VOCAB == 2**16
    validate_vocab(C.MAX_VOCAB)
    with pytest.raises(PrepareError, match="65536"):
        validate_vocab(C.MAX_VOCAB + 1)
# ---- the ranges of every number (issue 24, item 1) ------------------------------------------
def _leaf_keys() -> dict[str, object]:
    """Every key of run.json by its dotted path, with its default."""
    from dataclasses import fields, is_dataclass

    out: dict[str, object] = {}
    for f in fields(C.RunConfig):
        value = getattr(C.RunConfig(), f.name)
        if is_dataclass(value):
            out.update({f"{f.name}.{g.name}": getattr(value, g.name) for g in fields(value)})
        else:
            out[f.name] = value
    return out


def test_every_number_of_run_json_has_a_range_with_a_reason():
    numbers = {k for k, v in _leaf_keys().items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert numbers == set(C.RANGES)
    assert all(r.reason and r.low < r.high for r in C.RANGES.values())


@pytest.mark.parametrize("key", sorted(C.RANGES))
def test_each_range_holds_at_its_ends_and_refuses_beyond_them(key):
    """The ends themselves pass the range (another rule may still refuse them); just outside
    is refused with the key, the range and its reason."""
    r = C.RANGES[key]
    section, name = key.split(".")
    is_int = isinstance(C.default(key), int)
    step = 1 if is_int else 1e-9
    assert r.holds(r.high) and r.holds(r.low) != r.above
    for bad in (r.high + step if is_int else r.high * 1.5, r.low - step if is_int else r.low - 1.0):
        with pytest.raises(C.ConfigError, match=f"^{key} must be .*{r.reason[:20]}"):
            C.from_dict({section: {name: bad}})
    huge = 10**30 if is_int else 1e30
    with pytest.raises(C.ConfigError, match=f"^{key} must be"):
        C.from_dict({section: {name: huge}})


def test_a_step_no_machine_holds_is_refused_with_the_memory_it_needs():
    small = {"context": 64, "width": 64, "heads": 2, "layers": 2, "vocab": 300}
    with pytest.raises(C.ConfigError, match=r"batch_per_card 1,000,000,000 .* needs at least 8,583 GiB"):
        C.from_dict({"model": small, "training": {"batch_per_card": 10**9}})
    C.from_dict({"model": small, "training": {"batch_per_card": 4096}})


def test_tokens_the_history_cannot_count_are_refused():
    with pytest.raises(C.ConfigError, match="over 2\\*\\*63 tokens"):
        C.from_dict({"training": {"steps_to": 10**9, "tokens_per_step": 2**40, "batch_per_card": 1},
                     "model": {"context": 1024}})


def test_a_key_given_twice_is_refused_and_null_is_a_missing_section(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"training": {"lr": 0.001, "lr": 0.5}}', encoding="utf-8")
    with pytest.raises(C.ConfigError, match="'lr' twice"):
        C.load(path)
    path.write_text('{"training": null, "model": null}', encoding="utf-8")
    assert C.load(path) == C.RunConfig()


def test_the_forms_ranges_lie_inside_the_contracts():
    """The form never offers a value the trainer refuses."""
    from app.form import fields as F

    for spec in F.FIELDS:
        r = C.RANGES.get(spec.path or "")
        if r is None or spec.minimum is None:
            continue
        assert r.holds(spec.minimum) and r.holds(spec.maximum), spec.name


def _doc_rows() -> dict[str, list[str]]:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "RUN_JSON.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.split("## Keys", 1)[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 4:
            rows[cells[0].strip("`")] = cells
    return rows


def test_run_json_md_lists_every_key_with_its_default_and_range():
    import json

    rows = _doc_rows()
    keys = _leaf_keys()
    assert sorted(rows) == sorted(keys), set(rows) ^ set(keys)
    for key, default in keys.items():
        _, said_default, said_range, _meaning = rows[key][:4]
        assert json.loads(said_default.strip("`")) == default, key
        if key in C.RANGES:
            assert said_range == C.RANGES[key].text(), key


def test_reliability_md_states_every_range_with_its_reason():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "RELIABILITY.md").read_text(encoding="utf-8")
    for key, r in C.RANGES.items():
        assert f"| `{key}` | {r.text()} | {r.reason} |" in text, key
