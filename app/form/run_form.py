"""The «Новый прогон» form's logic, with no Qt: values, validation as the user types,
continue-locking, the live «Как выбрать размер» numbers and the run.json it produces.

The window (ui/form/run_form.py) only mirrors a RunForm: it passes what the user typed to
`set_text`/`set`, and shows `issues()`, `start_blockers()`, `size_rows()` and the values.
Every rule lives here so it can be tested without a display.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from trainer.config.reasons import Refusal
from trainer.config.run_config import (
    default,
    weight_count,
)

from .. import sizing
from ..base.i18n import current_language, t
from ..base.memory_saving import economical_level, lean_state_level
from ..base.numbers import (
    count_text,
    decimal_text,
    format_value,
    parse_number,
    plural_ru,
)
from ..base.plan_texts import RefusalError
from ..data.prepared import Prepared
from ..kaggle import settings as kaggle_settings
from ..kaggle.machine import Account, auto_explanation
from ..kaggle.room import OutputRoom, output_room
from ..sizing.advice import ROW_KINDS
from ..sizing.result import Estimate
from . import fields as F
from . import sizes
from .checks import AUTO_MACHINE, FormChecks, Issue, gpu_label
from .sizes import SizeRow

log = logging.getLogger(__name__)

TRAINER_EVAL_SEGMENTS = default("training.eval_segments")  # held-out segments an evaluation reads
DEFAULT_VOCAB = 4000  # the vocabulary `ternit data prepare` builds by default
KAGGLE_GPUS = ("t4x2",)  # Kaggle's only GPU shape now (P100 retired, no single T4)
LOCAL_MACHINE = "local"

GPU_CHOICES: tuple[str, ...] = ("t4x2", "local", "cpu", "rtx3050", "rtx5070ti")


def planning_only(gpu: str) -> bool:
    """A «Видеокарта» choice that only sizes a plan: a card of the catalogue, neither this
    PC's («local», the CPU) nor Kaggle's, which a run goes to."""
    return gpu not in ("local", "cpu", *KAGGLE_GPUS)


@dataclass(frozen=True)
class ContinueFrom:
    """A finished run whose checkpoint a new run can start from."""

    run_id: str
    config: dict[str, Any]  # the new run.json the runs core proposes (resume_from set)
    step: int  # the checkpoint's step
    label: str = ""
    tokenizer_sha256: str = ""
    notes: tuple[str, ...] = ()  # what the choice of its checkpoint passed over, to say at the start

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


# «Дополнительно»: the trainer's own knobs; a run.json without one of them trained with
# the trainer's default, which the form then shows (not the previous run's value).
ADVANCED_TRAINING: tuple[str, ...] = tuple(
    f.name for f in F.FIELDS if f.section == "advanced" and (f.path or "").startswith("training."))
# The training values the form sets (run_config, one per field with a training.* path);
# the rest keep their defaults.
_FORM_TRAINING = tuple(f.path.split(".", 1)[1] for f in F.FIELDS if f.path and f.path.startswith("training."))


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
    # The lab's law lines for (data_id, weights, tokens, unique tokens): app.law.advice's
    # LawAdvisor.lines, given by the window (the form does not fit laws; None: no lines).
    law_lines: Callable[[str, int, int, int], list[Any]] | None = None

    def add_prepared(self, prep: Prepared) -> None:
        """Know a prepared folder, and its constellations with their token counts."""
        self.prepared = [p for p in self.prepared if p.dir != prep.dir] + [prep]
        for name in prep.constellations:
            tokens = prep.tokens_by_constellation.get(name)
            if self.constellations.get(name) is None:
                self.constellations[name] = tokens



class RunForm(FormChecks):
    """The state of the «Новый прогон» form and every rule about it."""

    def __init__(self, ctx: FormContext | None = None) -> None:
        self.ctx = ctx or FormContext()
        self.values: dict[str, Any] = F.defaults()
        self.texts: dict[str, str] = {}  # what the user typed where it did not parse
        self.continuing: ContinueFrom | None = None
        # (the values' key, their estimate, or the plan's refusal of them on the machine)
        self._estimated: tuple[Any, Estimate | None, Refusal | None] | None = None
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
            if not spec.path:
                continue
            node: Any = cfg
            for part in spec.path.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if node is None and spec.name in ADVANCED_TRAINING:
                node = F.to_run_value(spec, spec.default)  # trained with the trainer's default
            # A value the form cannot show (an economical level the trainer would refuse)
            # leaves the field as it was rather than guess one.
            value = F.from_run_value(spec, node) if node is not None else None
            if value is None:
                continue
            self.values[spec.name] = value
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
        try:  # thousands separators and the decimal sign as the interface language writes them
            value: Any = parse_number(text, spec.kind)
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
        spec = F.spec(name)
        if spec.from_run is not None:  # «Экономный режим», its state: run.json's words read too
            shown = F.from_run_value(spec, value)
            if shown is None:
                raise ValueError(f"{name} must be one of {', '.join(spec.options)}, not {value!r}")
            self.values[name] = shown
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
        extra = [k for k in sizing.GPUS if k not in keys and k not in ("t4", "local")]
        out = []
        for k in keys + extra:
            label = gpu_label(k)
            if k == "local" and self.ctx.local_gpu:
                label = f"{label}: {self.ctx.local_gpu}"
            elif planning_only(k):  # a card of the catalogue, not this PC's: sizes a plan, never trains
                label = t(f"оценка для {label}", f"estimate for {label}")
            out.append((k, label))
        return out

    def machine_label(self, key: str) -> str:
        if key == LOCAL_MACHINE:
            return t("Этот компьютер", "This computer")
        if key == AUTO_MACHINE:
            return t("Авто (Kaggle)", "Auto (Kaggle)")
        for acc in self.ctx.accounts:
            if acc.name == key and acc.quota_hours is not None:
                return t(f"{key} — осталось {decimal_text(acc.quota_hours, 1, 'ru')} ч GPU",
                         f"{key} — {decimal_text(acc.quota_hours, 1, 'en')} GPU h left")
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

    def _data_what(self) -> str:
        """What «Данные» counts, beside the constellations' counts (all their tokens): the
        training part of the prepared data, the held-out sample left out."""
        prep = self.prepared_for_selection()
        if prep and prep.train_tokens:
            val = t(f", ещё {count_text(prep.val_tokens)} — проверочная выборка", f"; {count_text(prep.val_tokens)} more "
                    "held out for validation") if prep.val_tokens else ""
            return t(f"обучающая часть{val}; ", f"the training part{val}; ") + self._val_sample_note(prep)
        return t("всего в созвездиях (до подготовки); ", "all of the constellations (before preparing); ")

    def _val_sample_note(self, prep: Prepared) -> str:
        """A held-out sample shorter than the segments an evaluation reads, said for the
        form's own context and in the interface's language (the prepare's note was written
        once, in the context and the language of that prepare)."""
        n = self.values["context"]
        if not prep.val_tokens or not isinstance(n, int) or n <= 0:
            return ""
        base = (self.continuing.config.get("training") or {}) if self.continuing else {}
        want = int(base.get("eval_segments") or TRAINER_EVAL_SEGMENTS)
        have = prep.val_tokens // n
        if have >= want:
            return ""
        segments = plural_ru(have, "отрезок", "отрезка", "отрезков")
        tokens = plural_ru(n, "токену", "токена", "токенов")  # «по 1024 токена», «по 128 токенов»
        return t(f"в проверочной выборке {format_value(have)} {segments} по {format_value(n)} {tokens} "
                 f"(для оценки нужно {want}): валидация будет шумнее; ",
                 f"the held-out sample is {format_value(have)} segments of {format_value(n)} tokens "
                 f"(an evaluation wants {want}): validation will be noisier; ")

    def vocab(self) -> int:
        if self.continuing and self.continuing.model.get("vocab"):
            return int(self.continuing.model["vocab"])
        prep = self.prepared_for_selection()
        return prep.vocab if prep and prep.vocab else DEFAULT_VOCAB

    # -- sizing ------------------------------------------------------------------------

    def economical(self) -> str:
        """The chosen economical level: "off", "selective" or "full"."""
        return economical_level(self.values["economical"]) or "off"

    def kaggle_room(self) -> OutputRoom | None:
        """On Kaggle: one checkpoint's size against the session's outputs (app.kaggle.room)."""
        if not (self.is_kaggle() and self.model_ok()):
            return None
        v = self.values
        kept = ((self.continuing.config.get("training") or {}) if self.continuing else {}).get("keep_checkpoints", 3)
        config = {"model": {"layers": v["layers"], "width": v["width"], "heads": v["heads"], "context": v["context"],
                            "vocab": self.vocab()},
                  "training": {"lean_state": self.lean_state() != "off" and self.lean_state(), "keep_checkpoints": kept}}
        return output_room(config, kaggle_settings.load().output_bytes)

    def lean_state(self) -> str:
        """The chosen lean state: "off", "on" or "offload"."""
        return lean_state_level(self.values.get("lean_state")) or "off"

    def start_step(self) -> int:
        return self.continuing.step if self.continuing else 0

    def cards(self) -> int:
        facts = sizing.GPUS.get(self.values["gpu"])
        return facts.cards if facts is not None else 1

    def _tokens_per_step(self) -> int:
        """«Токенов за шаг» as the trainer reads it: 0 (automatic) unless a positive whole number."""
        value = self.values.get("tokens_per_step")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    def estimate(self) -> Estimate | None:
        """app.sizing's estimate for the form's values (None while the model or a training
        number is invalid). Time is for the steps this run will make."""
        if not self.model_ok():
            return None
        v = self.values
        nums = ("batch_per_card", "steps_to", "limit_min")
        if any(not isinstance(v[k], (int, float)) or isinstance(v[k], bool) or v[k] <= 0 for k in nums):
            return None
        base_training = (self.continuing.config.get("training") or {}) if self.continuing else {}
        local_memory = self.ctx.local_card_memory_mb if v["gpu"] == "local" else None
        kwargs: dict[str, Any] = dict(
            layers=v["layers"], width=v["width"], heads=v["heads"], context=v["context"],
            vocab=self.vocab(), batch=v["batch_per_card"], gpu=v["gpu"], steps_to=int(v["steps_to"]),
            start_step=self.start_step(), limit_min=v["limit_min"], data_tokens=self.data_tokens(),
            economical=self.economical(), lean_state=self.lean_state(),
            lang=current_language(), local_name=self.ctx.local_gpu, card_memory_mb=local_memory or None,
            eval_every=int(base_training.get("eval_every") or 200),
            eval_segments=int(base_training.get("eval_segments") or 96),
            tokens_per_step=self._tokens_per_step(), precision=str(v.get("precision") or "auto"),
            # A continued run keeps its parent's other training keys (the form has no field for them).
            compile=base_training.get("compile", "auto"), sharding=base_training.get("sharding", "auto"),
        )
        # Start's checks and every field's messages ask again for the same values: one
        # estimate (all the economical combinations) per set of values.
        key = (id(self.ctx.measured), len(self.ctx.measured), json.dumps(kwargs, sort_keys=True, default=str))
        if self._estimated is not None and self._estimated[0] == key:
            return self._estimated[1]
        refused = None
        try:
            result = sizing.estimate(**kwargs, measured=self.ctx.measured or None)
        except RefusalError as e:  # the trainer's rule (the contract's or the plan's): the issues say it
            result, refused = None, e.refusal
        except (ValueError, KeyError):  # a size the sizing refuses: the field issues say why
            result = None
        self._estimated = (key, result, refused)
        return result

    def plan_refusal(self) -> Refusal | None:
        """Why the trainer would refuse these settings on the chosen machine (the plan's or
        the contract's refusal, met by the last estimate), or None."""
        return self._estimated[2] if self._estimated is not None else None

    def size_rows(self) -> list[SizeRow]:
        """The «Как выбрать размер» panel, line by line."""
        v = self.values
        if not self.model_ok():
            return [SizeRow("params", t("Сколько весов", "How many weights"), "—",
                            t("исправьте поля модели", "fix the model fields"), "error")]
        est = self.estimate()
        n, d, L, V = v["context"], v["width"], v["layers"], self.vocab()
        params = est.params if est else weight_count(L, d, n, V)
        rows = [SizeRow("params", t("Сколько весов", "How many weights"), format_value(params),
                        f"≈ 12·{L}·{d}² + {V}·{d} + {n}·{d}")]
        batch_ok = isinstance(v["batch_per_card"], int) and v["batch_per_card"] > 0
        if batch_ok:
            cards = self.cards()
            per_step = est.tokens_per_step if est else (self._tokens_per_step() or v["batch_per_card"] * cards * n)
            micro = est.plan.micro_steps.value if est else 1  # the plan's micro-steps
            rows.append(SizeRow("tokens_per_step", t("Токенов за шаг", "Tokens per step"), format_value(per_step),
                                t(f"батч {v['batch_per_card']} × карт {cards} × n {n}",
                                  f"batch {v['batch_per_card']} × {cards} card(s) × n {n}")
                                + (t(f" × {micro} {plural_ru(micro, 'микрошаг', 'микрошага', 'микрошагов')}",
                                     f" × {micro} micro-steps") if micro > 1 else "")))
        rows.append(sizes.data_row(est, params, self.data_tokens(), self._data_what()))
        rows += self._law_rows(params, est)
        if est is None:
            rows.append(SizeRow("time", t("Время", "Time"), "—", t(
                "оценка недоступна: исправьте поля обучения", "no estimate: fix the training fields"), "warning"))
            return rows
        rows += [sizes.time_row(est, int(v["steps_to"])), sizes.limit_row(est, v["limit_min"]), *sizes.memory_rows(est),
                 sizes.plan_row(est)]
        room = self.kaggle_room()
        if room is not None:
            rows.append(sizes.checkpoint_row(room))
        # app.sizing's advice, less what the rows above already say (speed, time, limit).
        for i, sentence in enumerate(est.advice_texts(ROW_KINDS)):
            rows.append(SizeRow(f"advice{i}", t("Совет", "Advice") if i == 0 else "", "", sentence, "ok"))
        return rows

    def _law_rows(self, params: int, est: Estimate | None) -> list[SizeRow]:
        """The lab's law beside the guide's rules: its predicted loss for this N and D, the
        compute-optimal size, «Когда расти» (app/law/advice.py says them)."""
        prep = self.prepared_for_selection()
        steps = self.values["steps_to"]
        if self.ctx.law_lines is None or prep is None or not prep.data_id or est is None \
                or not isinstance(steps, int) or steps <= 0:
            return []
        tokens = int(est.tokens_per_step) * steps
        lines = self.ctx.law_lines(prep.data_id, params, tokens, prep.train_tokens)
        return [SizeRow(x.key, x.label, x.value, x.note, x.level) for x in lines]

    # -- the result --------------------------------------------------------------------

    def run_config(self) -> dict[str, Any]:
        """The run.json dict (DESIGN.md) for the form's values. Call only when can_start().
        Every field with a run.json path is written there (a new field needs only its
        FieldSpec and the trainer's key); the vocabulary, the data folder and the target
        come from the form's choices. A continued run keeps its parent's other training keys."""
        v = self.values
        cfg: dict[str, Any] = json.loads(json.dumps(self.continuing.config)) if self.continuing else {}
        prep = self.prepared_for_selection()
        if self.is_kaggle():
            target = {"kind": "kaggle", "gpu": "auto", "account": v["machine"]}
        else:
            target = {"kind": "local", "gpu": self._local_target_gpu(), "account": "auto"}
        cfg.update(name="", model={}, training=dict(cfg.get("training") or {}),
                   data={"dir": prep.dir if prep else ""}, target=target,
                   resume_from=cfg.get("resume_from") if self.continuing else None)
        for spec in F.FIELDS:
            if spec.path and v.get(spec.name) is not None:  # None: the trainer's default
                *parents, key = spec.path.split(".")
                node = cfg
                for part in parents:
                    node = node.setdefault(part, {})
                node[key] = F.to_run_value(spec, v[spec.name])
        cfg["model"]["vocab"] = self.vocab()
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




def names(items: Iterable[Issue]) -> list[str]:
    return [i.field for i in items]
