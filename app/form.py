"""The «Новый прогон» form's logic, with no Qt: values, validation as the user types,
continue-locking, the live «Как выбрать размер» numbers and the run.json it produces.

The window (ui/run_form.py) only mirrors a RunForm: it passes what the user typed to
`set_text`/`set`, and shows `issues()`, `start_blockers()`, `size_rows()` and the values.
Every rule lives here so it can be tested without a display.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import fields as F
from .data.prepared import Prepared, scan_prepared  # noqa: F401 - the form's callers import them here
from .fields import format_value
from .i18n import current_language, t
from .kaggle.machine import Account, auto_explanation
from .numbers import count_text, duration_text, plural_ru
from .tokens_per_step import micro_steps
from .tokens_per_step import problem as tokens_problem

log = logging.getLogger(__name__)

DEFAULT_VOCAB = 4000  # the vocabulary `ternit data prepare` builds by default
KAGGLE_GPUS = ("t4x2",)  # Kaggle's only GPU shape now (P100 retired, no single T4)
KAGGLE_SESSION_MIN = 720  # Kaggle ends a session after 12 hours
LOCAL_MACHINE = "local"
AUTO_MACHINE = "auto"

# Labels for the GPU choices when app.sizing has none of its own.
_GPU_LABELS: dict[str, dict[str, str]] = {
    "t4x2": {"ru": "Kaggle 2×T4", "en": "Kaggle 2×T4"},
    "local": {"ru": "Карта этого компьютера", "en": "This computer's card"},
    "cpu": {"ru": "Процессор (без GPU)", "en": "CPU (no GPU)"},
    "rtx3050": {"ru": "RTX 3050 (дома)", "en": "RTX 3050 (home)"},
    "rtx5070ti": {"ru": "RTX 5070 Ti (дома)", "en": "RTX 5070 Ti (home)"},
}
GPU_CHOICES: tuple[str, ...] = ("t4x2", "local", "cpu", "rtx3050", "rtx5070ti")


@dataclass(frozen=True)
class ContinueFrom:
    """A finished run whose checkpoint a new run can start from."""

    run_id: str
    config: dict[str, Any]  # the new run.json the runs core proposes (resume_from set)
    step: int  # the checkpoint's step
    label: str = ""
    tokenizer_sha256: str = ""

    @property
    def constellations(self) -> list[str]:
        return list(self.config.get("data", {}).get("constellations") or [])

    @property
    def model(self) -> dict[str, int]:
        return dict(self.config.get("model") or {})


@dataclass(frozen=True)
class ActiveRun:
    """A run that is going (or being launched) now, as the form compares a new start with it."""

    id: str
    name: str
    local: bool
    config: dict[str, Any]

    def same_training(self, config: dict[str, Any]) -> bool:
        """Whether `config` trains what this run trains: the same model, data and the
        training values the form sets. With the same seed the two would compute the same
        numbers — a second Start pressed by mistake (a double click), not a new run."""
        def key(cfg: dict[str, Any]) -> tuple:
            training = cfg.get("training") or {}
            data = cfg.get("data") or {}
            return (json.dumps(cfg.get("model") or {}, sort_keys=True),
                    str(data.get("dir") or ""), tuple(sorted(data.get("constellations") or [])),
                    tuple(json.dumps(training.get(k)) for k in _FORM_TRAINING),
                    (cfg.get("target") or {}).get("kind", "local"))
        return key(self.config) == key(config)


# The training values the form sets (run_config); the rest keep their defaults.
_FORM_TRAINING = ("batch_per_card", "steps_to", "limit_min", "checkpoint_every_min", "lr", "economical",
                  "tokens_per_step")


@dataclass
class FormContext:
    """What the form chooses from; the window loads it from app/'s stores."""

    constellations: dict[str, int | None] = field(default_factory=dict)  # name -> tokens
    prepared: list[Prepared] = field(default_factory=list)
    accounts: list[Account] = field(default_factory=list)
    local_gpu: str | None = None  # the NVML name of this computer's card, None: no GPU
    local_card_memory_mb: float | None = None
    local_gpu_index: int = 0  # its NVML index: a local run on it names it in target.gpu
    measured: list[dict[str, Any]] = field(default_factory=list)  # for app.sizing
    active_runs: list[ActiveRun] = field(default_factory=list)  # going now (the history's)

    def add_prepared(self, prep: Prepared) -> None:
        """Know a prepared folder, and its constellations with their token counts."""
        self.prepared = [p for p in self.prepared if p.dir != prep.dir] + [prep]
        for name in prep.constellations:
            tokens = prep.tokens_by_constellation.get(name)
            if self.constellations.get(name) is None:
                self.constellations[name] = tokens


RUNNING = "running"  # an Issue level: these very settings train now (Start off, not an error)


@dataclass(frozen=True)
class Issue:
    """One thing the form says about a field: an error blocks Start, a warning does not;
    RUNNING (field "start") blocks Start too but is news, not a fault."""

    field: str
    level: str  # "error", "warning" or RUNNING
    text: str


@dataclass(frozen=True)
class SizeRow:
    """One line of the «Как выбрать размер» panel."""

    key: str
    label: str
    value: str
    note: str = ""
    level: str = "ok"  # ok, warning, error


def heads_that_work(width: int, limit: int = 128) -> list[int]:
    """Head counts that divide d with no remainder."""
    return [h for h in range(1, min(width, limit) + 1) if width % h == 0]


def gpu_label(key: str, lang: str | None = None) -> str:
    lang = lang or current_language()
    facts = _sizing_gpus().get(key)
    label = None
    if isinstance(facts, dict):
        label = facts.get("label")
    elif facts is not None:
        label = getattr(facts, "label", None)
    if isinstance(label, dict) and lang in label:
        return str(label[lang])
    if isinstance(label, str):
        return label
    return _GPU_LABELS.get(key, {}).get(lang, key)


def _sizing_gpus() -> dict[str, Any]:
    try:
        from .sizing import GPUS  # the sizing core may land after the form
    except ImportError:
        return {}
    return dict(GPUS)


# Advice sentences whose facts the panel already shows as rows of their own.
ROW_ADVICE_KINDS = frozenset({"speed", "time", "limit"})


def _sizing_estimate():
    try:
        from .sizing import estimate
    except ImportError:
        return None
    return estimate


def params_exact(layers: int, width: int, context: int, vocab: int) -> int:
    """12·L·d² + V·d + n·d: the trainer's own count (used only if app.sizing is absent)."""
    return 12 * layers * width**2 + vocab * width + context * width




class RunForm:
    """The state of the «Новый прогон» form and every rule about it."""

    def __init__(self, ctx: FormContext | None = None) -> None:
        self.ctx = ctx or FormContext()
        self.values: dict[str, Any] = F.defaults()
        self.texts: dict[str, str] = {}  # what the user typed where it did not parse
        self.continuing: ContinueFrom | None = None
        self._start_defaults()

    # -- starting points ---------------------------------------------------------------

    def _start_defaults(self) -> None:
        """Kaggle 2×T4 when there is an account; otherwise this computer, so a fresh lab
        can start a run at once."""
        if self.ctx.accounts:
            self.values["machine"], self.values["gpu"] = AUTO_MACHINE, "t4x2"
        else:
            self.values["machine"] = LOCAL_MACHINE
            self.values["gpu"] = "local" if self.ctx.local_gpu else "cpu"
        if not self.values["constellations"] and len(self.ctx.constellations) == 1:
            self.values["constellations"] = list(self.ctx.constellations)

    def default_of(self, name: str) -> Any:
        """The current default of a field (what its tooltip names)."""
        if name == "gpu":
            return gpu_label("t4x2" if self.ctx.accounts else ("local" if self.ctx.local_gpu else "cpu"))
        if name == "machine":
            return self.machine_label(AUTO_MACHINE if self.ctx.accounts else LOCAL_MACHINE)
        return F.spec(name).default

    def tooltip(self, name: str, lang: str | None = None) -> str:
        return F.spec(name).tooltip_text(lang, default=self.default_of(name))

    def from_scratch(self) -> None:
        self.continuing = None
        self.values["start_from"] = "scratch"
        self.values["checkpoint"] = None

    def continue_from(self, info: ContinueFrom) -> None:
        """Fill the form from a checkpoint: model locked to its shape, data and training as
        the parent had them, «Шагов до» kept if it is still ahead of the checkpoint."""
        self.continuing = info
        self.values["start_from"] = "checkpoint"
        self.values["checkpoint"] = info.run_id
        self.load_config(info.config)
        for name in F.MODEL_FIELDS:
            if name in info.model:
                self.values[name] = int(info.model[name])
                self.texts.pop(name, None)
        if isinstance(self.values["steps_to"], int) and self.values["steps_to"] <= info.step:
            self.values["steps_to"] = info.step + max(1, int(F.spec("steps_to").default) // 10)

    def load_config(self, cfg: dict[str, Any]) -> None:
        """Take a run.json dict's values into the form (retry, continue)."""
        for spec in F.FIELDS:
            if not spec.path or spec.name in ("gpu", "machine"):
                continue
            node: Any = cfg
            for part in spec.path.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                continue
            if spec.name == "economical":
                # true (the old checkbox) shows as «Выборочный»; a value the trainer would
                # refuse leaves the form's level as it was rather than guess one.
                node = F.economical_level(node)
                if node is None:
                    continue
            self.values[spec.name] = list(node) if spec.kind == "multi" else node
            self.texts.pop(spec.name, None)
        target = cfg.get("target") or {}
        if target.get("kind") == "kaggle":
            account = target.get("account") or AUTO_MACHINE
            self.values["machine"], self.values["gpu"] = account, "t4x2"
        elif target:
            self.values["machine"] = LOCAL_MACHINE
            self.values["gpu"] = "cpu" if target.get("gpu") == "cpu" else (
                "local" if self.ctx.local_gpu else "cpu")

    # -- editing -----------------------------------------------------------------------

    def locked(self, name: str) -> bool:
        return self.continuing is not None and F.spec(name).locked_on_continue

    def set_text(self, name: str, text: str) -> None:
        """What the user typed in a number field; a text that does not parse is kept and
        reported, never silently replaced."""
        spec = F.spec(name)
        raw = text.strip().replace("\u00a0", "").replace(" ", "")
        try:
            value: Any = int(raw) if spec.kind == "int" else float(raw.replace(",", "."))
        except ValueError:
            self.texts[name] = text
            self.values[name] = None
            return
        self.texts.pop(name, None)
        self.set(name, value)

    def set(self, name: str, value: Any) -> None:
        if self.locked(name):
            return  # the checkpoint fixes it
        if name == "machine":
            self.values["machine"] = value
            if value != LOCAL_MACHINE:
                self.values["gpu"] = "t4x2"
            elif self.values["gpu"] in KAGGLE_GPUS:
                self.values["gpu"] = "local" if self.ctx.local_gpu else "cpu"
            return
        if name == "gpu":
            self.values["gpu"] = value
            if value in KAGGLE_GPUS and self.values["machine"] == LOCAL_MACHINE:
                self.values["machine"] = AUTO_MACHINE
            elif value not in KAGGLE_GPUS:
                self.values["machine"] = LOCAL_MACHINE
            return
        if name == "start_from" and value == "scratch":
            self.from_scratch()
            return
        if name == "economical":
            level = F.economical_level(value)
            if level is None:
                raise ValueError(f"economical must be one of {', '.join(F.ECONOMICAL_LEVELS)}, not {value!r}")
            self.values["economical"] = level
            return
        self.values[name] = list(value) if F.spec(name).kind == "multi" else value

    def toggle_constellation(self, name: str, on: bool) -> None:
        chosen = [c for c in self.values["constellations"] if c != name]
        if on:
            chosen.append(name)
        self.values["constellations"] = [c for c in self.ctx.constellations if c in chosen] + [
            c for c in chosen if c not in self.ctx.constellations
        ]

    def rename_constellation(self, old: str, new: str) -> None:
        """The library renamed a ticked constellation: the tick follows the new name, which
        the library knows (folders prepared before keep the old name, so data for the new
        one are prepared again)."""
        self.values["constellations"] = [new if c == old else c for c in self.values["constellations"]]

    # -- choices -----------------------------------------------------------------------

    def gpu_choices(self) -> list[tuple[str, str]]:
        keys = [k for k in GPU_CHOICES if k != "local" or self.ctx.local_gpu]
        extra = [k for k in _sizing_gpus() if k not in keys and k not in ("t4", "local")]
        out = []
        for k in keys + extra:
            label = gpu_label(k)
            if k == "local" and self.ctx.local_gpu:
                label = f"{label}: {self.ctx.local_gpu}"
            out.append((k, label))
        return out

    def machine_label(self, key: str) -> str:
        if key == LOCAL_MACHINE:
            return t("Этот компьютер", "This computer")
        if key == AUTO_MACHINE:
            return t("Авто (Kaggle)", "Auto (Kaggle)")
        for acc in self.ctx.accounts:
            if acc.name == key and acc.quota_hours is not None:
                return t(f"{key} — осталось {acc.quota_hours:.1f} ч GPU",
                         f"{key} — {acc.quota_hours:.1f} GPU h left")
        return key

    def machine_choices(self) -> list[tuple[str, str]]:
        keys = [LOCAL_MACHINE, AUTO_MACHINE] + [a.name for a in self.ctx.accounts]
        return [(k, self.machine_label(k)) for k in keys]

    def is_kaggle(self) -> bool:
        return self.values["machine"] != LOCAL_MACHINE

    def machine_note(self) -> str:
        """For «Авто»: which account it would pick now and why, in one line (app.kaggle)."""
        if not (self.is_kaggle() and self.values["machine"] == AUTO_MACHINE and self.ctx.accounts):
            return ""
        try:
            return str(auto_explanation(self.run_config()))
        except Exception:  # the form must keep working whatever the Kaggle state says
            log.warning("the «Авто» note could not be made", exc_info=True)
            return ""

    # -- data --------------------------------------------------------------------------

    def prepared_for_selection(self) -> Prepared | None:
        """The prepared folder holding exactly the ticked constellations (newest first);
        when continuing, one with the checkpoint's tokenizer."""
        want = set(self.values["constellations"])
        if not want:
            return None
        if self.continuing and set(self.continuing.constellations) == want:
            parent_dir = (self.continuing.config.get("data") or {}).get("dir")
            prep = Prepared.read(parent_dir) if parent_dir else None
            if prep:
                return prep
        tok = self.continuing.tokenizer_sha256 if self.continuing else ""
        for prep in sorted(self.ctx.prepared, key=lambda p: -p.mtime):
            if set(prep.constellations) == want and (not tok or prep.tokenizer_sha256 == tok) and prep.present():
                return prep
        return None

    def data_tokens(self) -> int | None:
        prep = self.prepared_for_selection()
        if prep and prep.train_tokens:
            return prep.train_tokens
        counts = [self.ctx.constellations.get(c) for c in self.values["constellations"]]
        if counts and all(isinstance(c, int) for c in counts):
            return int(sum(counts))  # type: ignore[arg-type]
        return None

    def vocab(self) -> int:
        if self.continuing and self.continuing.model.get("vocab"):
            return int(self.continuing.model["vocab"])
        prep = self.prepared_for_selection()
        return prep.vocab if prep and prep.vocab else DEFAULT_VOCAB

    # -- validation --------------------------------------------------------------------

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
                f"«{label}»: \"{typed}\" is not {what}; enter {what} from {lo_t} to {hi_t}"))
        if spec.kind == "int" and not isinstance(value, int):
            return Issue(name, "error", t(f"«{label}»: нужно целое число", f"«{label}»: must be a whole number"))
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            return Issue(name, "error", t(
                f"«{label}»: {format_value(value)} вне диапазона {lo_t}…{hi_t}",
                f"«{label}»: {format_value(value)} is outside {lo_t}…{hi_t}"))
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
        if isinstance(v["width"], int) and isinstance(v["heads"], int) and v["heads"] > 0 and v["width"] > 0:
            if v["width"] % v["heads"]:
                ok = ", ".join(map(str, heads_that_work(v["width"])))
                out.append(Issue("heads", "error", t(
                    f"d = {v['width']} не делится на {v['heads']} голов без остатка: подойдут головы {ok}",
                    f"d = {v['width']} does not divide by {v['heads']} heads: heads that work: {ok}")))
        name = str(v.get("name") or "").strip()
        if not name:
            out.append(Issue("name", "error", t("Дайте прогону название", "Give the run a name")))
        elif len(name) > 60:
            out.append(Issue("name", "error", t("Название длиннее 60 знаков", "The name is over 60 characters")))
        return out

    def issues(self) -> list[Issue]:
        """Everything the form says now: errors block Start, warnings do not."""
        out = self._field_issues()
        v = self.values
        # Data.
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
                        "press «Prepare data»")))
                else:
                    out.append(Issue("constellations", "error", t(
                        f"Данные для «{names}» ещё не подготовлены: нажмите «Подготовить данные»",
                        f"Data for \"{names}\" is not prepared yet: press «Prepare data»")))
            if self.continuing and set(v["constellations"]) != set(self.continuing.constellations):
                out.append(Issue("constellations", "warning", t(
                    "Созвездия изменились: новая отложенная выборка, валидация начнётся заново",
                    "The constellations changed: a new held-out sample, validation starts anew")))
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
                f"training {count_text(prep.train_tokens)} — the run would not start. Lower «Context n» or add "
                "text and prepare the data again")))
        if self.continuing and prep and prep.vocab and prep.vocab != self.vocab():
            out.append(Issue("constellations", "error", t(
                f"Словарь данных ({prep.vocab}) не совпадает со словарём чекпоинта ({self.vocab()})",
                f"The data's vocabulary ({prep.vocab}) differs from the checkpoint's ({self.vocab()})")))
        # Continue.
        if v["start_from"] == "checkpoint" and self.continuing is None:
            out.append(Issue("checkpoint", "error", t(
                "Выберите прогон, с чьего чекпоинта продолжить",
                "Pick the run whose checkpoint to continue from")))
        if self.continuing and isinstance(v["steps_to"], int) and v["steps_to"] <= self.continuing.step:
            out.append(Issue("steps_to", "error", t(
                f"«Шагов до» должно быть больше шага чекпоинта ({format_value(self.continuing.step)})",
                f"«Steps to» must be above the checkpoint's step ({format_value(self.continuing.step)})")))
        # Where it runs.
        if self.is_kaggle():
            if not self.ctx.accounts:
                out.append(Issue("machine", "error", t(
                    "Нет аккаунтов Kaggle: добавьте аккаунт (Kaggle → Аккаунты) или выберите «Этот компьютер»",
                    "No Kaggle accounts: add one (Kaggle → Accounts) or choose «This computer»")))
            elif v["machine"] != AUTO_MACHINE:
                acc = next((a for a in self.ctx.accounts if a.name == v["machine"]), None)
                if acc is None:
                    out.append(Issue("machine", "error", t(
                        f"Аккаунта {v['machine']} больше нет", f"Account {v['machine']} is gone")))
                elif not acc.valid:
                    out.append(Issue("machine", "error", t(
                        f"Ключ аккаунта {acc.name} не работает: проверьте его в «Аккаунты»",
                        f"The key of account {acc.name} does not work: check it in «Accounts»")))
            if isinstance(v["limit_min"], (int, float)) and v["limit_min"] > KAGGLE_SESSION_MIN:
                out.append(Issue("limit_min", "error", t(
                    f"Kaggle обрывает сессию через 12 ч: лимит не больше {KAGGLE_SESSION_MIN} мин (обычно 630)",
                    f"Kaggle ends a session after 12 h: the limit must be at most {KAGGLE_SESSION_MIN} min (630 is usual)")))
        if isinstance(v["batch_per_card"], int) and v["batch_per_card"] > 0 and isinstance(v["context"], int):
            why = tokens_problem(self._tokens_per_step(), self.cards(), v["batch_per_card"], v["context"])
            if why:
                out.append(Issue("tokens_per_step", "error", why))
        # Runs going now: the same one again (a double click on Start), or another on this PC.
        out += self._active_run_issues()
        # What sizing says about memory and data.
        est = self.estimate()
        if est is not None:
            if est.get("fits") is False and not self.locked("batch_per_card"):
                need = est.get("memory_mb", {}).get("total")
                have = est.get("card_memory_mb")
                best = est.get("max_batch")
                card = gpu_label(v["gpu"])
                # The economical level at which this very batch fits (None: no level does, e.g.
                # when the weights and AdamW alone overflow the card), as the panel's advice says.
                keep = est.get("economical_fits_at")
                more = F.economical_step_up(self.economical(), to=keep) if keep else ""
                if best:
                    hint = t(f"наибольший, что поместится, — {best}", f"the largest that fits is {best}")
                    hint += t(f", или {more} и оставьте батч", f", or {more} and keep the batch") if more else ""
                else:
                    hint = t("не поместится даже батч 1: уменьшите модель", "not even batch 1 fits: shrink the model")
                    hint += t(f" или {more}", f" or {more}") if more else ""
                out.append(Issue("batch_per_card", "error", t(
                    f"Батч {v['batch_per_card']} не помещается в {card} (нужно ≈{_mb(need)} из {_mb(have)} МБ): {hint}",
                    f"Batch {v['batch_per_card']} does not fit {card} (needs ≈{_mb(need)} of {_mb(have)} MB): {hint}")))
        return out

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
                f"«{same.name}» is training ({same.id}) — progress on the right. To start another, "
                "change the settings"))]
        local = [r for r in self.ctx.active_runs if r.local]
        if local and not self.is_kaggle():
            where = t("процессор", "the CPU") if self.values["gpu"] == "cpu" else t("видеокарту", "the card")
            names = ", ".join(f"«{r.name}»" for r in local)
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

    # -- sizing ------------------------------------------------------------------------

    def economical(self) -> str:
        """The chosen economical level: "off", "selective" or "full"."""
        return F.economical_level(self.values["economical"]) or "off"

    def start_step(self) -> int:
        return self.continuing.step if self.continuing else 0

    def cards(self) -> int:
        facts = _sizing_gpus().get(self.values["gpu"])
        cards = facts.get("cards") if isinstance(facts, dict) else getattr(facts, "cards", None)
        if isinstance(cards, int) and cards > 0:
            return cards
        return 2 if self.values["gpu"] == "t4x2" else 1

    def _tokens_per_step(self) -> int:
        value = self.values.get("tokens_per_step")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    def estimate(self) -> dict[str, Any] | None:
        """app.sizing's estimate for the form's values (None while the model is invalid or
        the sizing core is absent). Time is for the steps this run will make."""
        if not self.model_ok():
            return None
        v = self.values
        nums = ("batch_per_card", "steps_to", "limit_min")
        if any(not isinstance(v[k], (int, float)) or isinstance(v[k], bool) or v[k] <= 0 for k in nums):
            return None
        estimate = _sizing_estimate()
        if estimate is None:
            return None
        base_training = (self.continuing.config.get("training") or {}) if self.continuing else {}
        kwargs: dict[str, Any] = dict(
            layers=v["layers"], width=v["width"], heads=v["heads"], context=v["context"],
            vocab=self.vocab(), batch=v["batch_per_card"], gpu=v["gpu"], steps_to=int(v["steps_to"]),
            start_step=self.start_step(), limit_min=v["limit_min"], data_tokens=self.data_tokens(),
            economical=self.economical(), measured=self.ctx.measured or None, lang=current_language(),
            local_name=self.ctx.local_gpu,
            eval_every=int(base_training.get("eval_every") or 200),
            eval_segments=int(base_training.get("eval_segments") or 96),
            tokens_per_step=self._tokens_per_step(),
        )
        params = inspect.signature(estimate).parameters
        if "card_memory_mb" in params and v["gpu"] == "local" and self.ctx.local_card_memory_mb:
            kwargs["card_memory_mb"] = self.ctx.local_card_memory_mb
        kwargs = {k: val for k, val in kwargs.items() if k in params or any(
            p.kind is p.VAR_KEYWORD for p in params.values())}
        try:
            return estimate(**kwargs)
        except (ValueError, KeyError, TypeError):
            return None

    def size_rows(self) -> list[SizeRow]:
        """The «Как выбрать размер» panel, line by line."""
        v = self.values
        if not self.model_ok():
            return [SizeRow("params", t("Сколько весов", "How many weights"), "—",
                            t("исправьте поля модели", "fix the model fields"), "error")]
        est = self.estimate() or {}
        n, d, L, V = v["context"], v["width"], v["layers"], self.vocab()
        params = int(est.get("params") or params_exact(L, d, n, V))
        rows = [SizeRow("params", t("Сколько весов", "How many weights"), format_value(params),
                        f"≈ 12·{L}·{d}² + {V}·{d} + {n}·{d}")]
        batch_ok = isinstance(v["batch_per_card"], int) and v["batch_per_card"] > 0
        if batch_ok:
            cards = self.cards()
            per_step = int(est.get("tokens_per_step") or self._tokens_per_step() or v["batch_per_card"] * cards * n)
            micro = micro_steps(self._tokens_per_step(), cards, v["batch_per_card"], n) or 1
            rows.append(SizeRow("tokens_per_step", t("Токенов за шаг", "Tokens per step"), format_value(per_step),
                                t(f"батч {v['batch_per_card']} × карт {cards} × n {n}",
                                  f"batch {v['batch_per_card']} × {cards} card(s) × n {n}")
                                + (t(f" × {micro} {plural_ru(micro, 'микрошаг', 'микрошага', 'микрошагов')}",
                                       f" × {micro} micro-steps") if micro > 1 else "")))
        data = self.data_tokens()
        want = 20 * params
        if data:
            per_weight = est.get("tokens_per_weight") or data / params
            level = "ok" if per_weight >= 20 else "warning"
            pw = f"{per_weight:.1f}" if per_weight >= 1 else f"{per_weight:.2g}"
            if current_language() == "ru":
                pw = pw.replace(".", ",")
            rows.append(SizeRow("data", t("Данные", "Data"),
                                t(f"{count_text(data)} токенов", f"{count_text(data)} tokens"),
                                t(f"{pw} токена на вес (совет: ~20, то есть ≈{count_text(want, sig=2)})",
                                  f"{pw} tokens per weight (the guide: ~20, i.e. ≈{count_text(want, sig=2)})"),
                                level))
        else:
            rows.append(SizeRow("data", t("Данные", "Data"), "—",
                                t(f"нужно ≈{count_text(want, sig=2)} токенов (~20 на вес)",
                                  f"wants ≈{count_text(want, sig=2)} tokens (~20 per weight)"), "warning"))
        if not est:
            rows.append(SizeRow("time", t("Время", "Time"), "—", t(
                "оценка недоступна: исправьте поля обучения", "no estimate: fix the training fields"), "warning"))
            return rows
        steps_to = int(v["steps_to"])
        source = str(est.get("tokens_per_s_source") or "")
        speed = est.get("tokens_per_s")
        speed_t = t(f"{format_value(int(speed))} ток/с", f"{format_value(int(speed))} tok/s") if speed else ""
        seconds = est.get("seconds_to_steps")
        if seconds is not None:
            measured = (est.get("tokens_per_s_basis") or {}).get("kind") == "measured"
            note = ", ".join(x for x in (source, speed_t) if x)
            if not measured and not any(w in source.lower() for w in ("оценк", "estimat")):
                note += t(" — оценка, не замер", " — an estimate, not a measurement")
            rows.append(SizeRow("time", t(f"Время до шага {format_value(steps_to)}", f"Time to step {format_value(steps_to)}"),
                                "≈ " + duration_text(float(seconds)), note))
        stop = est.get("limit_stops_at_step")
        limit_label = t(f"Лимит {format_value(v['limit_min'])} мин", f"Limit {format_value(v['limit_min'])} min")
        if stop is None:
            rows.append(SizeRow("limit", limit_label, t("не обрежет", "will not cut it"),
                                t("прогон успеет дойти до «Шагов до»", "the run reaches «Steps to» in time")))
        else:
            at = int(stop)  # a step number on the run's own scale (a continuation's included)
            rows.append(SizeRow("limit", limit_label, t(f"остановит на шаге ≈{format_value(at)}",
                                                        f"stops it at step ≈{format_value(at)}"),
                                t("чекпоинт сохранится; продолжите одной кнопкой",
                                  "a checkpoint is saved; continue with one click"), "warning"))
        mem = est.get("memory_mb") or {}
        have = est.get("card_memory_mb")
        if mem.get("total") is not None:
            fits = est.get("fits")
            of = t(f" из {_mb(have)} МБ", f" of {_mb(have)} MB") if have else ""
            note = (t("помещается", "fits") if fits else t("не помещается", "does not fit")) if fits is not None else ""
            if est.get("max_batch"):
                note += t(f"; наибольший батч ≈{est['max_batch']}", f"; largest batch ≈{est['max_batch']}")
            rows.append(SizeRow("memory", t("Память на карту", "Memory per card"),
                                t(f"≈{_mb(mem['total'])} МБ", f"≈{_mb(mem['total'])} MB") + of,
                                note, "ok" if fits is not False else "error"))
        # app.sizing's advice, less what the rows above already say (speed, time, limit).
        advice = est.get("advice") or []
        kinds = est.get("advice_kinds") or [""] * len(advice)
        shown = [s for s, kind in zip(advice, kinds, strict=True) if kind not in ROW_ADVICE_KINDS]
        for i, sentence in enumerate(shown):
            rows.append(SizeRow(f"advice{i}", t("Совет", "Advice") if i == 0 else "", "", str(sentence), "ok"))
        return rows

    # -- the result --------------------------------------------------------------------

    def run_config(self) -> dict[str, Any]:
        """The run.json dict (DESIGN.md) for the form's values. Call only when can_start()."""
        v = self.values
        base: dict[str, Any] = json.loads(json.dumps(self.continuing.config)) if self.continuing else {}
        prep = self.prepared_for_selection()
        model = {k: int(v[k]) for k in F.MODEL_FIELDS}
        model["vocab"] = self.vocab()
        training = dict(base.get("training") or {})
        training.update(
            batch_per_card=int(v["batch_per_card"]), steps_to=int(v["steps_to"]),
            limit_min=v["limit_min"], checkpoint_every_min=v["checkpoint_every_min"], lr=float(v["lr"]),
            economical=F.economical_run_value(self.economical()))
        if isinstance(v.get("tokens_per_step"), int) and (v["tokens_per_step"] or "tokens_per_step" in training):
            training["tokens_per_step"] = int(v["tokens_per_step"])
        if self.is_kaggle():
            target = {"kind": "kaggle", "gpu": "auto", "account": v["machine"]}
        else:
            target = {"kind": "local", "gpu": self._local_target_gpu(), "account": "auto"}
        cfg = dict(base)
        cfg.update(
            name=str(v["name"]).strip(),
            model=model,
            training=training,
            data={"dir": prep.dir if prep else "", "constellations": list(v["constellations"])},
            target=target,
            resume_from=base.get("resume_from") if self.continuing else None,
        )
        return cfg

    def _local_target_gpu(self) -> str:
        """run.json's target.gpu for a run on this computer: the card the form showed (its
        name and memory sized the run) by its index, not "auto", which on a PC with two
        cards would start on both; the CPU as chosen; "auto" for a size preset."""
        gpu = self.values["gpu"]
        if gpu == "cpu":
            return "cpu"
        return str(self.ctx.local_gpu_index) if gpu == "local" and self.ctx.local_gpu else "auto"

    def data_changed(self) -> bool:
        """Continuing with other constellations: validation starts anew."""
        return bool(self.continuing) and set(self.values["constellations"]) != set(
            self.continuing.constellations)


def continue_now(ctx: FormContext, info: ContinueFrom) -> tuple[dict[str, Any] | None, list[str]]:
    """One click on «Продолжить»: the run.json that a form filled from this checkpoint
    would start (steps and all as the parent had them, «Шагов до» moved on if reached),
    or None and why not (data to prepare, …). A form of its own: what the user has in
    the window's form stays as it is."""
    form = RunForm(ctx)
    form.continue_from(info)
    blockers = form.start_blockers()
    return (None, blockers) if blockers else (form.run_config(), [])


def _mb(x: Any) -> str:
    return format_value(int(round(float(x)))) if isinstance(x, (int, float)) else "?"


def oom_batch(batch: int, advice_batch: int | None) -> int:
    """The batch to retry with after an out-of-memory crash: the core's advice, else half."""
    if advice_batch and 0 < advice_batch < batch:
        return advice_batch
    return max(1, batch // 2)


def names(items: Iterable[Issue]) -> list[str]:
    return [i.field for i in items]
