"""The «Новый прогон» form's checks: what it says about each field, and whether Start can
go. A mixin of app.form.run_form.RunForm (its values, context and estimate), kept apart so that the
form's state and its rules each read as one screen per idea.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer.config.reasons import Refusal
from trainer.config.run_config import (
    KAGGLE_END_MARGIN_MIN,
    KAGGLE_SESSION_MIN,
    kaggle_limit_max,
    shape_problem,
)

from .. import sizing
from ..base.i18n import current_language, quoted, t
from ..base.numbers import count_text, format_value
from ..base.plan_texts import text as refusal_text
from . import fields as F
from . import sizes

AUTO_MACHINE = "auto"  # «Авто»: the lab picks the Kaggle account


RUNNING = "running"  # an Issue level: these very settings train now (Start off, not an error)


@dataclass(frozen=True)
class Issue:
    """One thing the form says about a field: an error blocks Start, a warning does not;
    RUNNING (field "start") blocks Start too but is news, not a fault."""

    field: str
    level: str  # "error", "warning" or RUNNING
    text: str




# The run.json key a refusal of the contract or the plan is about (where the form shows it);
# a refusal that names its key says so in its parameters ("key").
REFUSAL_KEYS = {
    "heads_divide": "model.heads", "vocab_over": "model.vocab", "state_too_big": "model.width",
    "tokens_per_step": "training.tokens_per_step", "tokens_per_step_negative": "training.tokens_per_step",
    "lean_under_ddp": "training.lean_state", "lean_under_fsdp": "training.lean_state",
    "lean_no_library": "training.lean_state", "fused_fp16": "training.lean_state",
    "fused_micro_steps": "training.lean_state", "does_not_fit": "training.lean_state",
}


def refusal_issue(refusal: Refusal) -> Issue:
    """A refusal as an error on the field of the key it is about (else on Start), in the
    interface's language (app.base.plan_texts: the contract's codes, not a restated rule)."""
    key = refusal.params.get("key") or REFUSAL_KEYS.get(refusal.code)
    field = next((s.name for s in F.FIELDS if key and s.path == key), "start")
    return Issue(field, "error", refusal_text(refusal))


def gpu_label(key: str, lang: str | None = None) -> str:
    """A GPU choice's label (app.sizing's facts); an unknown key as it is."""
    facts = sizing.GPUS.get(key)
    return facts.label[lang or current_language()] if facts is not None else key


class FormChecks:
    """The checks of RunForm (app/form/run_form.py), which supplies `values`, `ctx`, `continuing`,
    `texts` and the estimate."""

    values: dict[str, Any]
    ctx: Any
    continuing: Any
    texts: dict[str, str]
    kaggle_room: Any  # RunForm.kaggle_room

    def _number_issue(self, name: str) -> Issue | None:
        spec = F.spec(name)
        value = self.values.get(name)
        lo, hi = spec.minimum, spec.maximum
        lo_t, hi_t = format_value(lo if spec.kind == "float" else int(lo)), format_value(
            hi if spec.kind == "float" else int(hi))
        label = spec.label_text()
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            what = t("целое число", "a whole number") if spec.kind == "int" else t("число", "a number")
            typed = self.texts.get(name, "")
            return Issue(name, "error", t(
                f"«{label}»: «{typed}» — не {what}; введите {what} от {lo_t} до {hi_t}",
                f"“{label}”: \"{typed}\" is not {what}; enter {what} from {lo_t} to {hi_t}"))
        if spec.kind == "int" and not isinstance(value, int):
            return Issue(name, "error", t(f"«{label}»: нужно целое число", f"“{label}”: must be a whole number"))
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return Issue(name, "error", t(
                f"«{label}»: {format_value(value)} вне диапазона {lo_t}…{hi_t}",
                f"“{label}”: {format_value(value)} is outside {lo_t}…{hi_t}"))
        return None

    def model_ok(self) -> bool:
        return not any(i.level == "error" and i.field in F.MODEL_FIELDS for i in self._field_issues())

    def _field_issues(self) -> list[Issue]:
        out: list[Issue] = []
        for spec in F.FIELDS:
            if spec.kind in ("int", "float"):
                issue = self._number_issue(spec.name)
                if issue:
                    out.append(issue)
        v = self.values
        shape = [v[k] for k in ("layers", "width", "heads", "context", "batch_per_card")]
        if not out and all(isinstance(x, int) and not isinstance(x, bool) for x in shape):
            layers, width, heads, context, batch = shape
            refused = shape_problem(layers, width, heads, context, self.vocab(), batch)  # the trainer's rule
            if refused:
                out.append(refusal_issue(refused))
        name = str(v.get("name") or "").strip()
        if not name:
            out.append(Issue("name", "error", t("Дайте прогону название", "Give the run a name")))
        elif len(name) > 60:
            out.append(Issue("name", "error", t("Название длиннее 60 знаков", "The name is over 60 characters")))
        return out

    def issues(self) -> list[Issue]:
        """Everything the form says now: errors block Start, warnings do not."""
        return [*self._field_issues(), *self._data_issues(), *self._prepared_issues(),
                *self._continue_issues(), *self._machine_issues(),
                # Runs going now: the same one again (a double click on Start), or another on this PC.
                *self._plan_issues(), *self._active_run_issues(), *self._memory_issues()]

    def _data_issues(self) -> list[Issue]:
        """The constellations: ticked, known, prepared (with the checkpoint's tokenizer)."""
        out: list[Issue] = []
        v = self.values
        if not v["constellations"]:
            out.append(Issue("constellations", "error", t(
                "Отметьте хотя бы одно созвездие: без текста учиться не на чем",
                "Tick at least one constellation: there is nothing to learn from without text")))
        else:
            unknown = [c for c in v["constellations"] if c not in self.ctx.constellations]
            if unknown and not self.continuing:
                out.append(Issue("constellations", "error", t(
                    f"Нет такого созвездия: {', '.join(unknown)}",
                    f"No such constellation: {', '.join(unknown)}")))
            elif self.prepared_for_selection() is None:
                names = ", ".join(v["constellations"])
                if self.continuing:
                    out.append(Issue("constellations", "error", t(
                        f"Данные для «{names}» с токенизатором чекпоинта ещё не подготовлены: "
                        "нажмите «Подготовить данные»",
                        f"Data for \"{names}\" with the checkpoint's tokenizer is not prepared yet: "
                        "press “Prepare data”")))
                else:
                    out.append(Issue("constellations", "error", t(
                        f"Данные для «{names}» ещё не подготовлены: нажмите «Подготовить данные»",
                        f"Data for \"{names}\" is not prepared yet: press “Prepare data”")))
            if self.continuing and set(v["constellations"]) != set(self.continuing.constellations):
                out.append(Issue("constellations", "warning", t(
                    "Созвездия изменились: новая отложенная выборка, валидация начнётся заново",
                    "The constellations changed: a new held-out sample, validation starts anew")))
        return out

    def _prepared_issues(self) -> list[Issue]:
        """The prepared data against the context and the checkpoint's vocabulary."""
        out: list[Issue] = []
        v = self.values
        prep = self.prepared_for_selection()
        n = v["context"]
        if prep and prep.val_tokens and isinstance(n, int) and (prep.val_tokens < n + 1 or prep.train_tokens < n + 2):
            # The trainer refuses such data at its start (a held-out sample shorter than one
            # context): say it here, where the context can still be lowered.
            out.append(Issue("context", "error", t(
                f"Данных мало для контекста {n}: в проверочной выборке токенов {count_text(prep.val_tokens)}, "
                f"в обучающей {count_text(prep.train_tokens)} — обучение не запустится. Уменьшите «Контекст n» "
                "или добавьте текст и подготовьте данные снова",
                f"Too little data for context {n}: the held-out sample has {count_text(prep.val_tokens)} tokens, "
                f"training {count_text(prep.train_tokens)} — the run would not start. Lower “Context n” or add "
                "text and prepare the data again")))
        if self.continuing and prep and prep.vocab and prep.vocab != self.vocab():
            out.append(Issue("constellations", "error", t(
                f"Словарь данных ({prep.vocab}) не совпадает со словарём чекпоинта ({self.vocab()})",
                f"The data's vocabulary ({prep.vocab}) differs from the checkpoint's ({self.vocab()})")))
        return out

    def _continue_issues(self) -> list[Issue]:
        out: list[Issue] = []
        v = self.values
        if v["start_from"] == "checkpoint" and self.continuing is None:
            out.append(Issue("checkpoint", "error", t(
                "Выберите прогон, с чьего чекпоинта продолжить",
                "Pick the run whose checkpoint to continue from")))
        if self.continuing and isinstance(v["steps_to"], int) and v["steps_to"] <= self.continuing.step:
            out.append(Issue("steps_to", "error", t(
                f"«Шагов до» должно быть больше шага чекпоинта ({format_value(self.continuing.step)})",
                f"“Steps to” must be above the checkpoint's step ({format_value(self.continuing.step)})")))
        return out

    def _machine_issues(self) -> list[Issue]:
        """Where it runs: a Kaggle account that works, a limit inside Kaggle's session."""
        out: list[Issue] = []
        v = self.values
        if not self.is_kaggle():
            out += self._local_card_issues()
        if self.is_kaggle():
            if not self.ctx.accounts:
                out.append(Issue("machine", "error", t(
                    "Нет аккаунтов Kaggle: добавьте аккаунт (Kaggle → Аккаунты) или выберите «Этот компьютер»",
                    "No Kaggle accounts: add one (Kaggle → Accounts) or choose “This computer”")))
            elif v["machine"] != AUTO_MACHINE:
                acc = next((a for a in self.ctx.accounts if a.name == v["machine"]), None)
                if acc is None:
                    out.append(Issue("machine", "error", t(
                        f"Аккаунта {v['machine']} больше нет", f"Account {v['machine']} is gone")))
                elif not acc.valid:
                    out.append(Issue("machine", "error", t(
                        f"Ключ аккаунта {acc.name} не работает: проверьте его в «Аккаунты»",
                        f"The key of account {acc.name} does not work: check it in “Accounts”")))
            room = self.kaggle_room()
            if room is not None and not room.fits:  # its checkpoints could not come back from Kaggle
                out.append(Issue("machine", "error", room.text()))
            top = kaggle_limit_max()  # the run.json contract's rule (trainer/config/run_config.py)
            if isinstance(v["limit_min"], (int, float)) and v["limit_min"] > top:
                out.append(Issue("limit_min", "error", t(
                    f"Kaggle обрывает сессию через {format_value(KAGGLE_SESSION_MIN / 60, 'ru')} ч, а последние "
                    f"{format_value(KAGGLE_END_MARGIN_MIN, 'ru')} мин нужны на чекпоинт и результаты: лимит не больше "
                    f"{format_value(top, 'ru')} мин (обычно 630)",
                    f"Kaggle ends a session after {format_value(KAGGLE_SESSION_MIN / 60, 'en')} h and its last "
                    f"{format_value(KAGGLE_END_MARGIN_MIN, 'en')} min go to the checkpoint and the outputs: the limit must be at "
                    f"most {format_value(top, 'en')} min (630 is usual)")))
        return out

    def _local_card_issues(self) -> list[Issue]:
        """A run on this computer trains on what the form shows: one of its cards or its CPU,
        never a catalogue card it does not have (that trained on the CPU without a word)."""
        gpu, here = self.values["gpu"], self.ctx.local_gpu
        instead = (t(f"«{gpu_label('local', 'ru')}: {here}» или процессор", f"“{gpu_label('local', 'en')}: {here}” or the CPU")
                   if here else t("процессор", "the CPU"))
        if gpu == "local" and not here:
            return [Issue("gpu", "error", t(
                f"На этом компьютере нет видеокарты, которую видит драйвер NVIDIA: выберите {instead}",
                f"This computer has no card the NVIDIA driver sees: choose {instead}"))]
        if gpu not in ("local", "cpu"):
            label = gpu_label(gpu)
            return [Issue("gpu", "error", t(
                f"«{label}» — только оценка: такой карты на этом компьютере нет, и обучение на ней не "
                f"запустить. Для запуска выберите {instead} (или Kaggle 2×T4)",
                f"“{label}” is an estimate only: this computer has no such card, and a run cannot train "
                f"on it. To start, choose {instead} (or Kaggle 2×T4)"))]
        return []

    def _memory_issues(self) -> list[Issue]:
        """Batch does not fit the card in the chosen combination of «Экономный режим»."""
        est = self.estimate()
        if est is None or est.fits is not False or self.locked("batch_per_card"):
            return []
        return [Issue("batch_per_card", "error",
                      sizes.batch_issue(est, self.values["batch_per_card"], gpu_label(self.values["gpu"])))]

    def _plan_issues(self) -> list[Issue]:
        """What the plan (trainer/plan/planner.py) refuses for these settings on the chosen machine —
        «Токенов за шаг» that is no whole number of micro-steps there, a lean state the cards'
        sharing or the precision does not take, … — on the field it is about. The sizing
        asked it for the estimate (app.sizing.estimate), so the form says what the trainer
        would."""
        self.estimate()
        refused = self.plan_refusal()
        return [refusal_issue(refused)] if refused is not None else []

    def _active_run_issues(self) -> list[Issue]:
        if not self.ctx.active_runs or not self.model_ok() or self.prepared_for_selection() is None:
            return []
        try:
            config = self.run_config()
        except (TypeError, ValueError):  # a value still being typed: other issues say so
            return []
        same = next((r for r in self.ctx.active_runs if r.same_training(config)), None)
        if same is not None:
            # Almost always the run just started from this very form (or its continuation):
            # not a fault, so said as news, not in red. Start stays off all the same: a
            # second one would compute the same numbers (a double click).
            return [Issue("start", RUNNING, t(
                f"«{same.name}» обучается ({same.id}) — ход справа. Чтобы запустить ещё один, "
                "измените настройки",
                f"“{same.name}” is training ({same.id}) — progress on the right. To start another, "
                "change the settings"))]
        local = [r for r in self.ctx.active_runs if r.local]
        if local and not self.is_kaggle():
            where = t("процессор", "the CPU") if self.values["gpu"] == "cpu" else t("видеокарту", "the card")
            names = ", ".join(quoted(r.name) for r in local)
            return [Issue("gpu", "warning", t(
                f"На этом компьютере уже идёт {names}: два обучения делят {where} — и скорость, и память "
                "(оценка памяти ниже считает карту свободной)",
                f"{names} is already training on this computer: two trainings share {where} — its speed "
                "and its memory (the memory estimate below counts the card as free)"))]
        return []

    def errors(self) -> list[Issue]:
        return [i for i in self.issues() if i.level == "error"]

    def field_issues(self, name: str) -> list[Issue]:
        return [i for i in self.issues() if i.field == name]

    def start_blockers(self) -> list[str]:
        """Why Start is disabled (empty: it is enabled): the errors, then the run that
        trains these very settings already."""
        issues = self.issues()
        return [i.text for i in issues if i.level == "error"] + [i.text for i in issues if i.level == RUNNING]

    def can_start(self) -> bool:
        return not self.start_blockers()

    def can_queue(self) -> bool:
        """«В очередь»: the errors block it; a run training these settings now does not (the
        queue waits for it)."""
        return not self.errors()
