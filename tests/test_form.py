"""The form's rules without a display: validation as the user types, Start's reasons,
continue-locking, the sizing panel and the run.json it writes."""

from __future__ import annotations

import pytest

from app.base.i18n import set_language
from app.data.prepared import Prepared
from app.form.run_form import Account, ContinueFrom, FormContext, RunForm
from app.sizing.estimate import estimate
from trainer.config.run_config import heads_that_work

pytestmark = pytest.mark.usefixtures("russian")  # conftest: the interface in Russian


@pytest.fixture
def ctx(tiny_data):
    c = FormContext()
    c.add_prepared(Prepared.read(tiny_data))
    return c


def tiny(form: RunForm) -> RunForm:
    for name, value in (("context", 32), ("width", 32), ("heads", 2), ("layers", 2), ("batch_per_card", 4)):
        form.set(name, value)
    form.set("gpu", "cpu")
    return form


def texts(form: RunForm, field: str) -> list[str]:
    return [i.text for i in form.field_issues(field)]


def test_prepared_folder_gives_constellations_with_token_counts(ctx, tiny_data):
    assert ctx.constellations == {"tiny": Prepared.read(tiny_data).tokens_by_constellation["tiny"]}
    form = RunForm(ctx)
    # One constellation on a fresh lab: ticked, so the form can start at once.
    assert form.values["constellations"] == ["tiny"]
    assert form.prepared_for_selection().dir == str(tiny_data)
    # No Kaggle account: this computer is the default machine.
    assert form.values["machine"] == "local" and form.values["gpu"] == "cpu"


def test_width_must_divide_by_heads_and_the_form_says_which_heads_work(ctx):
    form = RunForm(ctx)
    form.set_text("width", "500")
    [msg] = texts(form, "heads")
    assert "500" in msg and "1, 2, 4, 5, 10, 20, 25, 50, 100, 125" in msg
    assert not form.can_start() and msg in form.start_blockers()
    form.set_text("heads", "10")
    assert texts(form, "heads") == []
    assert heads_that_work(512)[-3:] == [32, 64, 128]


def test_ranges_and_text_that_is_not_a_number(ctx):
    form = RunForm(ctx)
    form.set_text("context", "abc")
    [msg] = texts(form, "context")
    assert "abc" in msg and "целое число" in msg and "16\u00a0384" in msg
    assert form.values["context"] is None and form.texts["context"] == "abc"
    form.set_text("context", "4")
    assert "вне диапазона" in texts(form, "context")[0]
    form.set_text("context", "1\u00a0024")  # as the form shows numbers back
    assert texts(form, "context") == [] and form.values["context"] == 1024
    form.set_text("lr", "0,0003")  # a Russian decimal comma
    assert form.values["lr"] == pytest.approx(3e-4)
    form.set("name", "  ")
    assert "название" in texts(form, "name")[0]


def test_start_says_why_it_is_disabled(ctx):
    form = RunForm(FormContext())  # nothing prepared, no constellation
    assert not form.can_start()
    assert any("созвездие" in b for b in form.start_blockers())
    form = tiny(RunForm(ctx))
    assert form.can_start(), form.start_blockers()
    form.toggle_constellation("tiny", False)
    assert form.start_blockers() == ["Отметьте хотя бы одно созвездие: без текста учиться не на чем"]


def test_kaggle_needs_an_account_and_a_limit_under_its_session(ctx):
    form = tiny(RunForm(ctx))
    form.set("gpu", "t4x2")
    assert form.values["machine"] == "auto" and form.is_kaggle()
    assert any("Нет аккаунтов Kaggle" in b for b in form.start_blockers())
    ctx.accounts = [Account("alice", 20.0), Account("bob", 5.0, valid=False)]
    assert form.can_start(), form.start_blockers()
    form.set("machine", "bob")
    assert any("bob" in b for b in form.start_blockers())
    form.set("machine", "alice")
    form.set_text("limit_min", "710")  # under the 12-hour session, but no room for the final checkpoint
    assert any("705 мин" in b for b in form.start_blockers())
    form.set_text("limit_min", "705")
    assert form.can_start(), form.start_blockers()
    form.set("machine", "local")  # back home: the GPU choice follows
    assert form.values["gpu"] == "cpu" and form.can_start()
    labels = dict(form.machine_choices())
    assert "20,0" in labels["alice"]  # hours with the Russian decimal comma


def test_kaggle_says_the_checkpoint_size_and_refuses_one_its_outputs_cannot_hold(ctx):
    form = tiny(RunForm(ctx))
    ctx.accounts = [Account("alice", 20.0)]
    form.set("gpu", "t4x2")
    row = next(r for r in form.size_rows() if r.key == "checkpoint")
    assert row.value.startswith("≈ ") and row.level == "ok" and "3 помещаются в 20,0 ГБ" in row.note
    for name, value in (("layers", "26"), ("width", "2304"), ("heads", "18"), ("context", "1024")):
        form.set_text(name, value)  # the lab's 1.67 B-weight model
    row = next(r for r in form.size_rows() if r.key == "checkpoint")
    assert row.level == "error" and row.value == "≈ 19,9 ГБ"  # the tiny data's vocabulary of 300
    assert any("не помещаются даже два" in b for b in form.start_blockers())
    form.set("machine", "local")  # on this PC nothing is said of Kaggle's outputs
    assert not any(r.key == "checkpoint" for r in form.size_rows())


def test_run_config_is_a_valid_run_json(ctx, tiny_data):
    from trainer.config.run_config import from_dict, parameter_count

    form = tiny(RunForm(ctx))
    form.set("name", "tiny-run")
    form.set("economical", True)  # what the old checkbox meant: the selective level
    form.set_text("checkpoint_every_min", "5")
    cfg = form.run_config()
    parsed = from_dict(cfg)  # the trainer's own validation accepts it
    assert parsed.training.checkpoint_every_min == 5  # «Чекпоинт каждые» reaches the trainer
    assert parsed.model.vocab == Prepared.read(tiny_data).vocab
    assert cfg["data"] == {"dir": str(tiny_data), "constellations": ["tiny"]}
    assert cfg["target"] == {"kind": "local", "gpu": "cpu", "account": "auto"}
    assert cfg["resume_from"] is None and cfg["training"]["economical"] == "selective"
    rows = {r.key: r for r in form.size_rows()}
    assert rows["params"].value.replace("\u00a0", "") == str(parameter_count(parsed.model))
    assert rows["tokens_per_step"].value == "128"  # batch 4 × 1 card × n 32


def test_every_field_with_a_run_json_key_is_written_there_and_read_back(ctx):
    """run_config writes each field through its FieldSpec path, load_config reads it back:
    a new field needs only its FieldSpec and the trainer's key."""
    from app.form import fields as F
    from trainer.config.run_config import from_dict

    form = tiny(RunForm(ctx))
    changed = {"name": "other", "steps_to": 123, "limit_min": 45, "checkpoint_every_min": 7, "lr": 0.002,
               "batch_per_card": 3, "economical": "full", "context": 64, "layers": 3}
    for name, value in changed.items():
        form.set(name, value)
    cfg = form.run_config()
    from_dict(cfg)
    back = RunForm(ctx)
    back.load_config(cfg)
    for spec in F.FIELDS:
        if spec.path:
            node = cfg
            for part in spec.path.split("."):
                node = node[part]
            assert node == F.to_run_value(spec, form.values[spec.name]), spec.name
            assert back.values[spec.name] == form.values[spec.name], spec.name
    assert {k: form.values[k] for k in changed} == changed


def test_sizing_panel_shows_the_guides_numbers(ctx):
    form = RunForm(FormContext())  # the default model and vocabulary (4000)
    rows = {r.key: r for r in form.size_rows()}
    assert rows["params"].value == "27\u00a0738\u00a0112"
    # ~20 tokens per weight: the guide's «550 M», as the advice below it says (not 555).
    assert "≈550 млн" in rows["data"].note, rows["data"].note
    form = RunForm(ctx)
    form.set("gpu", "t4x2")
    rows = {r.key: r for r in form.size_rows()}
    assert rows["tokens_per_step"].value == "12\u00a0288"
    # Far fewer than 20 tokens per weight in the tiny data: flagged.
    assert rows["data"].level == "warning" and "~20" in rows["data"].note


def test_advice_does_not_repeat_the_rows_above_it(ctx):
    form = RunForm(ctx)
    form.set("gpu", "t4x2")
    form.set("limit_min", 30)  # far too short for 20,000 steps: the limit row says where it stops
    rows = form.size_rows()
    limit = next(r for r in rows if r.key == "limit")
    assert "остановит на шаге" in limit.value
    advice = [r.note for r in rows if r.key.startswith("advice")]
    assert advice  # the data and memory advice still come through
    assert not any("Лимит" in a or "лимит" in a for a in advice)
    assert not any("ток/с" in a for a in advice)


def _continue_info(cfg: dict, step: int = 40) -> ContinueFrom:
    cfg = dict(cfg, resume_from="/runs/parent/checkpoints/step-00000040.pt")
    return ContinueFrom(run_id="parent", config=cfg, step=step, label="parent · 40")


def test_continue_locks_the_model_and_takes_step_from_the_checkpoint(ctx):
    parent = tiny(RunForm(ctx)).run_config()
    parent["training"]["steps_to"] = 40
    form = RunForm(ctx)
    form.continue_from(_continue_info(parent))
    assert [form.values[k] for k in ("context", "width", "heads", "layers")] == [32, 32, 2, 2]
    assert all(form.locked(k) for k in ("context", "width", "heads", "layers"))
    assert not form.locked("batch_per_card")
    form.set("width", 64)  # ignored: the checkpoint fixes the shape
    assert form.values["width"] == 32
    # «Шагов до» must move past the checkpoint's step.
    assert form.values["steps_to"] > 40
    form.set_text("steps_to", "40")
    assert any("шага чекпоинта (40)" in b for b in form.start_blockers())
    form.set_text("steps_to", "80")
    assert form.can_start(), form.start_blockers()
    cfg = form.run_config()
    assert cfg["resume_from"].endswith("step-00000040.pt") and cfg["model"] == parent["model"]
    # From scratch again: unlocked.
    form.from_scratch()
    assert not form.locked("width")


def test_changing_constellations_on_continue_warns_that_validation_starts_anew(ctx, tiny_data):
    parent = tiny(RunForm(ctx)).run_config()
    form = RunForm(ctx)
    form.continue_from(_continue_info(parent))
    assert not form.data_changed()
    form.ctx.constellations["other"] = 1000
    form.toggle_constellation("other", True)
    assert form.data_changed()
    warnings = [i for i in form.issues() if i.level == "warning"]
    assert any("валидация начнётся заново" in w.text for w in warnings)


def test_english_texts(ctx):
    set_language("en")
    form = RunForm(ctx)
    form.set_text("width", "500")
    assert "choose heads from 1, 2, 4, 5" in texts(form, "heads")[0]
    form.set_text("width", "512")
    assert {r.label for r in form.size_rows()} >= {"How many weights", "Tokens per step", "Data"}


def test_a_batch_that_cannot_fit_the_card_blocks_start_and_says_what_fits(ctx):
    form = RunForm(ctx)
    form.set("gpu", "rtx3050")
    form.set_text("batch_per_card", "512")
    [msg] = texts(form, "batch_per_card")
    assert "не помещается" in msg and "RTX 3050" in msg and "наибольший, что поместится" in msg
    best = form.estimate()["max_batch"]
    assert str(best) in msg and 1 <= best < 512
    form.set_text("batch_per_card", str(best))
    # It fits; what blocks Start now is only that this PC has no RTX 3050 (an estimate).
    assert texts(form, "batch_per_card") == []
    assert [b[:29] for b in form.start_blockers()] == ["«RTX 3050 (8 ГБ)» — только оц"]


def test_continuing_estimates_time_from_the_checkpoints_step(ctx):
    form = RunForm(FormContext())
    parent = {"model": {"context": 1024, "width": 512, "heads": 8, "layers": 8, "vocab": 4000},
              "training": {"steps_to": 20000}, "data": {"constellations": []}}
    form.continue_from(ContinueFrom("p", parent, step=15000))
    form.set("gpu", "t4x2")
    form.set_text("limit_min", "5")
    rows = {r.key: r for r in form.size_rows()}
    # 5,000 steps of 12,288 tokens at the 2×T4 reference (102,000 tokens/s): about 10 minutes.
    assert rows["time"].value == "≈ 10 мин" and "2×T4" in rows["time"].note
    # The limit's stop is a step on the run's own scale, after the checkpoint's 15,000.
    stop = int(rows["limit"].value.split("≈")[1].replace("\u00a0", ""))
    assert 15000 < stop < 20000


# -- the economical level (issue 8) -------------------------------------------------------


@pytest.mark.parametrize(("level", "written"), [("off", False), ("selective", "selective"), ("full", "full")])
def test_each_economical_level_goes_to_run_json_and_comes_back(ctx, level, written):
    from trainer.config.run_config import economical_level, from_dict

    form = tiny(RunForm(ctx))
    form.set("economical", level)
    cfg = form.run_config()
    # false for off (older readers know only true/false), the level's name otherwise
    assert cfg["training"]["economical"] == written and type(cfg["training"]["economical"]) is type(written)
    assert economical_level(from_dict(cfg).training.economical) == level  # the trainer reads the same level
    back = RunForm(ctx)
    back.set("economical", "full" if level == "off" else "off")  # not what the file says
    back.load_config(cfg)
    assert back.values["economical"] == level and back.economical() == level


def test_an_old_run_json_with_true_shows_as_selective_and_a_bad_value_changes_nothing(ctx):
    form = RunForm(ctx)
    form.load_config({"training": {"economical": True}})
    assert form.values["economical"] == "selective"
    form.load_config({"training": {"economical": False}})
    assert form.values["economical"] == "off"
    form.set("economical", "full")
    form.load_config({"training": {"economical": "half"}})
    assert form.values["economical"] == "full"
    with pytest.raises(ValueError):
        form.set("economical", "half")


def test_the_sizing_gets_the_chosen_level_and_full_needs_less_memory(ctx, monkeypatch):
    import app.sizing as sizing

    seen: list = []
    real = sizing.estimate

    def spy(**kwargs):
        seen.append(kwargs["economical"])
        return real(**kwargs)

    monkeypatch.setattr(sizing, "estimate", spy)
    form = RunForm(ctx)
    form.set("gpu", "t4x2")  # the default model on a card: activations matter
    totals = {}
    for level in ("off", "selective", "full"):
        form.set("economical", level)
        seen.clear()
        est = form.estimate()
        form.start_blockers()  # Start's checks ask the sizing too
        assert seen and set(seen) == {level}
        assert est.combination.level == level and est.combination.lean_state == "off"
        totals[level] = est.memory.total
    assert totals["full"] < totals["selective"] < totals["off"]


def _advice_at(form: RunForm) -> str:
    return " ".join(r.note for r in form.size_rows() if r.key.startswith("advice"))


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_memory_advice_names_the_next_level_then_the_lean_state(ctx, lang):
    set_language(lang)
    form = RunForm(ctx)
    form.set("gpu", "t4x2")
    turn_on = "включите пересчёт активаций" if lang == "ru" else "turn on activation recompute"
    go_full = "выберите полный пересчёт" if lang == "ru" else "choose the full activation recompute"
    lean = "выберите облегчённое состояние «8 бит»" if lang == "ru" else "choose the lean state “8-bit”"
    for level, want in (("off", turn_on), ("selective", go_full), ("full", lean)):
        form.set("economical", level)
        form.set("batch_per_card", 6)
        form.set("batch_per_card", form.estimate().max_batch + 1)  # just too big at this level
        est = form.estimate()
        assert est.fits is False
        advice = _advice_at(form)
        assert want in advice, (level, advice)
        for other in {turn_on, go_full, lean} - {want}:
            assert other not in advice
        # Taking the advice: the same batch fits in the combination it names.
        assert est.fits_with is not None and est.fits_with.level in ("selective", "full")
        form.set("economical", est.fits_with.level)
        form.set("lean_state", est.fits_with.lean_state)
        assert form.estimate().fits is True
        form.set("lean_state", "off")


def batch_1_on_t4x2(ctx, lang: str, width: str, layers: str) -> RunForm:
    """A model at batch 1 on Kaggle's 2×T4, the form in `lang`."""
    set_language(lang)
    form = RunForm(ctx)
    form.set("gpu", "t4x2")
    form.set("batch_per_card", 1)
    form.set_text("width", width)
    form.set_text("layers", layers)
    return form


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_not_even_batch_1_fits_says_what_the_level_can_still_give(ctx, lang):
    # Batch 1 needs the full level here: long context, so activations are what overflow.
    form = batch_1_on_t4x2(ctx, lang, "1536", "16")
    form.set_text("context", "16384")
    texts_by_level = {}
    for level in ("off", "selective", "full"):
        form.set("economical", level)
        texts_by_level[level] = " ".join(i.text for i in form.field_issues("batch_per_card"))
    ru = lang == "ru"
    assert ("или включите пересчёт активаций" if ru else "or turn on activation recompute") in texts_by_level["off"]
    assert ("или выберите полный пересчёт активаций" if ru else "or choose the full activation recompute") in (
        texts_by_level["selective"])
    assert ("«Полный»" if ru else "“Full”") in texts_by_level["off"]  # selective would not do
    assert texts_by_level["full"] == ""  # the level the advice named: batch 1 fits


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_no_economical_advice_when_the_weights_alone_overflow_the_card(ctx, lang):
    # 51 B weights: weights, gradients and AdamW alone are ~800 GB, which no level saves;
    # Start used to say "or turn on activation recompute" where the panel's advice did not.
    form = batch_1_on_t4x2(ctx, lang, "8192", "64")
    for level in ("off", "selective"):
        form.set("economical", level)
        [text] = [i.text for i in form.field_issues("batch_per_card")]
        assert form.estimate()["economical_fits_at"] is None
        assert "пересчёт" not in text and "recompute" not in text, text


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_a_batch_too_big_names_the_batch_that_fits_and_the_level_that_keeps_it(ctx, lang):
    set_language(lang)
    form = RunForm(ctx)
    form.set("gpu", "t4x2")
    form.set("batch_per_card", form.estimate()["max_batch"] + 1)  # just too big with the mode off
    est = form.estimate()
    assert est["fits"] is False and est["economical_fits_at"] == "selective"
    [text] = [i.text for i in form.field_issues("batch_per_card")]
    assert str(est["max_batch"]) in text and text in form.start_blockers()
    keep = (", или включите пересчёт активаций и оставьте батч" if lang == "ru"
            else ", or turn on activation recompute and keep the batch")
    assert keep in text, text
    form.set("economical", "selective")  # taking the advice: the same batch now starts
    assert form.field_issues("batch_per_card") == []


def test_continuing_keeps_the_level_editable(ctx, tiny_data):
    parent = tiny(RunForm(ctx))
    parent.set("economical", True)
    parent_cfg = parent.run_config()
    form = RunForm(ctx)
    form.continue_from(_continue_info(parent_cfg))
    assert form.values["economical"] == "selective" and not form.locked("economical")
    form.set("economical", "full")  # a checkpoint from one level continues in another
    assert form.run_config()["training"]["economical"] == "full"
    form.set("economical", "off")
    assert form.run_config()["training"]["economical"] is False


def test_advanced_values_go_to_run_json_and_come_back():
    """«Дополнительно» (issue 16): warm-up, minimum rate, weight decay, clipping, precision."""
    form = RunForm(FormContext())
    cfg = form.run_config()["training"]
    assert (cfg["warmup_steps"], cfg["min_lr_ratio"], cfg["weight_decay"], cfg["grad_clip"], cfg["precision"]) == (
        200, 0.1, 0.1, 1.0, "auto")
    form.set_text("warmup_steps", "1 000")
    form.set("precision", "bf16")
    form.set_text("min_lr_ratio", "2")
    assert [i.field for i in form.errors()].count("min_lr_ratio") == 1  # 0…1, as the trainer says
    form.set_text("min_lr_ratio", "0")
    cfg = form.run_config()["training"]
    assert cfg["warmup_steps"] == 1000 and cfg["precision"] == "bf16" and cfg["min_lr_ratio"] == 0.0
    # A run.json without the keys (a retry, a continue) trained with the trainer's defaults.
    form.load_config({"training": {"lr": 0.002}})
    assert form.values["precision"] == "auto" and form.values["warmup_steps"] == 200


def test_a_continued_run_keeps_its_tokens_per_step_on_two_cards_by_a_smaller_batch(ctx):
    """«Продолжить» on 2×T4 refused over «Токенов за шаг» 384 (the parent's one card ×
    batch 6 × n 64): the batch comes down to 3, the plan takes it, and a refusal of values
    no longer there does not stay behind."""
    parent = {"name": "p", "model": {"context": 64, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
              "training": {"batch_per_card": 6, "steps_to": 100, "limit_min": 30, "tokens_per_step": 384},
              "data": {"constellations": ["tiny"]}, "target": {"kind": "local", "gpu": "cpu"}}
    form = RunForm(ctx)
    form.continue_from(_continue_info(parent))
    assert form.values["batch_per_card"] == 6  # the CPU: 6 × 64 = 384 as before
    form.set("gpu", "t4x2")
    assert form.values["batch_per_card"] == 3 and form.estimate() is not None
    assert form.plan_refusal() is None
    assert not [i for i in form.issues() if "Токенов за шаг" in i.text]
    form.set_text("steps_to", "")  # an empty field: no estimate, and no old refusal kept
    form.estimate()
    assert form.plan_refusal() is None


def test_the_memory_line_says_counted_where_a_count_stands_behind_it():
    """«подсчитано» on the machines and shardings the count holds within 5 %
    (trainer.plan.memory_model.COUNTED, proven by tests/test_sizing_count.py); an estimate
    elsewhere: a card it was not checked on, the CPU, and FSDP, which the counter refuses."""
    def memory_note(gpu: str) -> str:
        form = RunForm(FormContext())
        form.set("gpu", gpu)
        return next(r for r in form.size_rows() if r.key == "memory").note

    assert memory_note("rtx5070ti").startswith("подсчитано")
    assert memory_note("t4x2").startswith("подсчитано")  # DDP, the plan's sharding here
    assert memory_note("t4").startswith("оценка") and memory_note("cpu").startswith("оценка")
    assert not estimate(gpu="t4x2", sharding="fsdp").memory_counted
    assert estimate(gpu="t4x2", sharding="ddp").memory_counted
