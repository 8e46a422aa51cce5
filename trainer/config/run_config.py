"""The run configuration (run.json): defaults, loading and validation.

The window writes run.json; the trainer reads it here. Missing keys take the defaults
below, an unknown key or a bad value is a ConfigError that names it. Only the standard
library is used, so this module can be read without torch.
"""

from __future__ import annotations

import copy
import json
import math
import unicodedata
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from trainer.config.reasons import Refusal, number_text


class ConfigError(ValueError):
    """A run.json that cannot be trained: the message says what to change. It carries the
    refusal as a code with parameters (trainer/config/reasons.py), so the lab words it in Russian
    from the same facts; a plain message is the code "invalid"."""

    def __init__(self, problem: str | Refusal) -> None:
        self.refusal = problem if isinstance(problem, Refusal) else Refusal("invalid", {"message": problem})
        super().__init__(self.refusal.text())


@dataclass
class ModelConfig:
    context: int = 1024
    width: int = 512
    heads: int = 8
    layers: int = 8
    vocab: int = 4000


@dataclass
class TrainingConfig:
    batch_per_card: int = 6
    steps_to: int = 20000
    limit_min: float = 630.0
    lr: float = 0.001
    warmup_steps: int = 200
    seed: int = 1337
    eval_every: int = 200
    eval_segments: int = 96
    checkpoint_every_min: float = 30.0
    keep_checkpoints: int = 3
    economical: bool | str = False
    # The lean training state (trainer/step/lean.py): false, true (gradients held for an exact
    # clip), "fused" (no gradients held: two backward passes) or "offload" (fused, the
    # moments in the host's memory between steps).
    lean_state: bool | str = False
    precision: str = "auto"
    # torch.compile of the model for the training step (trainer/step/compiling.py): "auto" = on
    # for a CUDA card, off on the CPU; "on", "off" (true/false read as on/off).
    compile: bool | str = "auto"
    # How two or more processes (torchrun) share the work (trainer/parallel/sharding.py): "ddp"
    # (every process holds the whole state), "fsdp" (the state sharded, FSDP2), "auto".
    sharding: str = "auto"
    deterministic: bool = False
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    # The tokens one optimizer step trains on, whatever the machine: the batch is split into
    # micro-steps whose gradients add up (accumulation = this / (cards × batch_per_card ×
    # context), a whole number). 0: one micro-step, cards × batch_per_card × context.
    tokens_per_step: int = 0
    # Samples during training (trainer.run.samples): every `sample_every` steps, 0 = with each
    # evaluation; `sample_tokens` new tokens per prompt, 0 = no samples; no prompts = the
    # first words of a few held-out documents, the same for the whole run.
    sample_every: int = 0
    sample_tokens: int = 32
    sample_prompts: list[str] = field(default_factory=list)


@dataclass
class DataConfig:
    dir: str = ""
    constellations: list[str] = field(default_factory=list)


@dataclass
class TargetConfig:
    kind: str = "local"
    gpu: str = "auto"
    account: str = "auto"


@dataclass
class RunConfig:
    name: str = "run"
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    data: DataConfig = field(default_factory=DataConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    resume_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PRECISIONS = ("auto", "fp32", "bf16", "fp16")
ECONOMICAL_LEVELS = ("off", "selective", "full")
TARGET_KINDS = ("local", "kaggle")
# fp32 weights, their gradients and AdamW's two moments: 16 bytes a weight before any
# activation. Over 1 TiB no single machine holds it, so such a size is a typo (a width of
# 1,000,000), refused here rather than by a failed allocation at step 1.
STATE_BYTES_PER_WEIGHT = 16
MAX_STATE_BYTES = 2**40
# Token ids are stored as uint16 (the prepared data's train.bin/val.bin): ids 0…65,535, so
# a vocabulary of at most 65,536 tokens.
MAX_VOCAB = 2**16
# What one micro-step holds in any mode, on top of the state: its token ids (int64 inputs
# and targets, 16 bytes a token) and one hidden state of it in 16-bit precision (2 bytes a
# token per unit of width): even the full economical mode keeps each block's input.
BATCH_BYTES_PER_TOKEN = 16
HIDDEN_BYTES_PER_UNIT = 2
# The run history keeps steps and tokens as SQLite INTEGERs (64-bit, signed).
SQLITE_INTEGER_MAX = 2**63 - 1


@dataclass(frozen=True)
class Range:
    """The values one number of run.json may take, and why: `low` to `high`, the low end
    itself excluded where `above` (a limit of 0 minutes trains nothing)."""

    low: float
    high: float
    reason: str
    above: bool = False

    def holds(self, value: float) -> bool:
        return (value > self.low if self.above else value >= self.low) and value <= self.high

    def text(self) -> str:
        """The range as RUN_JSON.md states it: "1 … 65,536", "> 0 … 10,080"."""
        return f"{'> ' if self.above else ''}{number_text(self.low)} … {number_text(self.high)}"


BILLION = 10**9
WEEK_MIN = 7 * 24 * 60
# Every number of run.json, its range and the reason for it: one table, checked by
# `validate` (so by `python -m trainer.config`, the trainer's start and the lab's pre-check)
# and listed in docs/RUN_JSON.md (tests/test_contract.py keeps that list current). The
# rules between keys (width by heads, tokens per step, the memory no machine holds) follow
# in `validate`.
RANGES: dict[str, Range] = {
    "model.context": Range(1, 2**17, "positions are a learned table; attention over more than 131,072 "
                           "tokens costs n² per layer, beyond the machines the lab trains on"),
    "model.width": Range(1, 2**16, "one width × width matrix of 65,536 is 16 GiB in fp32 already"),
    "model.heads": Range(1, 2**16, "a head takes at least one unit of the width (heads divide it)"),
    "model.layers": Range(1, 4096, "over 40 times the depth of the largest GPTs; the 1 TiB state "
                          "check refuses most of it anyway"),
    "model.vocab": Range(1, MAX_VOCAB, "token ids are stored as uint16"),
    "training.batch_per_card": Range(1, 2**31 - 1, "a 32-bit tensor dimension; the memory check below "
                                     "refuses far less on any machine, saying the memory it would need"),
    "training.tokens_per_step": Range(0, 2**40, "0 is automatic; a trillion tokens in one step is more "
                                      "than any data the lab prepares"),
    "training.steps_to": Range(1, BILLION, "a billion steps is a week at 1,600 steps a second, and the "
                               "history counts steps × tokens per step in SQLite's 64-bit INTEGER"),
    "training.limit_min": Range(0, WEEK_MIN, "a week of minutes", above=True),
    "training.lr": Range(0, 1, "AdamW moves each weight by about lr a step: above 1 every weight "
                         "jumps by more than its own size", above=True),
    "training.warmup_steps": Range(0, BILLION, "no more steps than training.steps_to may have"),
    "training.min_lr_ratio": Range(0, 1, "the end of the cosine decay, as a fraction of lr"),
    "training.weight_decay": Range(0, 10, "decoupled: each step shrinks the weights by lr × "
                                   "weight_decay"),
    "training.grad_clip": Range(0, 1e6, "a gradient norm; 0 clips nothing"),
    "training.seed": Range(0, 2**63 - 1, "torch and numpy take a 64-bit seed"),
    "training.eval_every": Range(1, BILLION, "no more steps than training.steps_to may have"),
    "training.eval_segments": Range(1, 10**6, "segments of n tokens from val.bin, which holds fewer "
                                    "(the validation sample is a small part of the data)"),
    "training.checkpoint_every_min": Range(0, WEEK_MIN, "a week of minutes; 0 saves after every step"),
    "training.keep_checkpoints": Range(1, 1000, "each one is the whole training state on disk"),
    "training.sample_every": Range(0, BILLION, "0 samples with each evaluation"),
    "training.sample_tokens": Range(0, 100_000, "written one token at a time at every sample: "
                                    "100,000 is minutes of a card per prompt; 0 writes no samples"),
}

# Kaggle ends a GPU session after 12 hours whatever runs in it, and a leg needs time at its
# end for the final checkpoint and for Kaggle to save the outputs: a Kaggle run's
# training.limit_min may be at most the session less that margin (the lab's default quota
# margin too, app/kaggle/settings.py).
KAGGLE_SESSION_MIN = 720.0
KAGGLE_END_MARGIN_MIN = 15.0

_SECTIONS = {
    "model": ModelConfig,
    "training": TrainingConfig,
    "data": DataConfig,
    "target": TargetConfig,
}


def _coerce(where: str, value: Any, default: Any) -> Any:
    """Check one value against the type of its default; ints are accepted for floats."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if where in ("training.economical", "training.lean_state") and isinstance(value, str):
            return value
        raise ConfigError(f"{where} must be true or false, not {value!r}")
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be a whole number, not {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number, not {value!r}")
        if not math.isfinite(value):  # json reads Infinity and NaN
            raise ConfigError(f"{where} must be a finite number, not {value!r}")
        return float(value)
    if isinstance(default, str):
        if where == "training.compile" and isinstance(value, bool):  # true/false: on/off
            return value
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be text, not {value!r}")
        return value
    if isinstance(default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of names, not {value!r}")
        return list(value)
    return value


def _section(name: str, cls: type, raw: Any) -> Any:
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise ConfigError(Refusal("section_kind", {"where": "run.json", "key": name, "value": _short(raw)}))
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"unknown key {name}.{unknown[0]} (known: {', '.join(known)})")
    defaults = cls()
    values = {k: _coerce(f"{name}.{k}", v, getattr(defaults, k)) for k, v in raw.items()}
    return cls(**values)


# A run.json is a few hundred bytes; what it may hold at most (its prompts included) is far
# under this, and the lab stores it in its state database with every run and queued item.
MAX_CONFIG_BYTES = 256 * 1024
# training.sample_prompts: each prompt is written out at every sample, sample_tokens long.
MAX_SAMPLE_PROMPTS = 32
MAX_PROMPT_CHARS = 2000


def check_size(size: int, where: str | Path = "run.json") -> None:
    """A run.json of `size` characters is refused by name over MAX_CONFIG_BYTES."""
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(Refusal("file_too_big", {"path": str(where), "size": size, "most": MAX_CONFIG_BYTES}))


def _short(value: Any, most: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= most else text[: most - 1] + "…"


def check_shape(raw: Any, where: str | Path = "run.json") -> None:
    """run.json is one object, and each section it gives (model, training, data, target) an
    object or null: the first thing anyone reading one relies on, said naming the file and
    the key (the lab reads its sections before the whole check)."""
    if not isinstance(raw, dict):
        raise ConfigError(Refusal("not_an_object"))
    for name in _SECTIONS:
        value = raw.get(name)
        if value is not None and not isinstance(value, dict):
            raise ConfigError(Refusal("section_kind", {"where": str(where), "key": name, "value": _short(value)}))


def from_dict(raw: dict[str, Any]) -> RunConfig:
    """Build and validate a RunConfig from the parsed run.json."""
    check_shape(raw)
    top = {"name", "resume_from", *_SECTIONS}
    unknown = sorted(set(raw) - top)
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]} (known: {', '.join(sorted(top))})")
    cfg = RunConfig(
        name=_coerce("name", raw.get("name", "run"), "run"),
        resume_from=raw.get("resume_from"),
        **{k: _section(k, cls, raw.get(k)) for k, cls in _SECTIONS.items()},
    )
    if cfg.resume_from is not None and not isinstance(cfg.resume_from, str):
        raise ConfigError(f"resume_from must be a checkpoint path or null, not {cfg.resume_from!r}")
    validate(cfg)
    return cfg


def validate(cfg: RunConfig) -> None:
    """Rules that need no data: every number in its range (RANGES), then the rules between
    keys, the choices, and the memory no machine holds."""
    m, t = cfg.model, cfg.training
    for key, allowed in RANGES.items():
        value = _value(cfg, key)
        if not allowed.holds(value):
            raise ConfigError(Refusal("out_of_range", {"key": key, "low": allowed.low, "high": allowed.high,
                                                       "above": allowed.above, "value": value,
                                                       "reason": allowed.reason}))
    problem = shape_problem(m.layers, m.width, m.heads, m.context, m.vocab, t.batch_per_card)
    if problem:
        raise ConfigError(problem)
    for cards in target_cards(cfg):
        accumulation(cfg, cards)
        tokens = step_tokens(cfg, cards)
        if t.steps_to * tokens > SQLITE_INTEGER_MAX:
            raise ConfigError(
                f"training.steps_to {t.steps_to:,} × {tokens:,} tokens a step is over 2**63 tokens, more than "
                "the run history counts (SQLite's 64-bit INTEGER): lower training.steps_to or the tokens per step"
            )
    state = parameter_count(m) * STATE_BYTES_PER_WEIGHT
    if state > MAX_STATE_BYTES:
        raise ConfigError(Refusal("state_too_big", {"params": parameter_count(m), "gib": state / 2**30}))
    floor = step_floor_bytes(m, t.batch_per_card)
    if state + floor > MAX_STATE_BYTES:
        raise ConfigError(
            f"one micro-step of training.batch_per_card {t.batch_per_card:,} × context {m.context:,} needs at "
            f"least {_size(floor)} (its token ids and one hidden state of width {m.width:,}) besides "
            f"the training state's {_size(state)}, beyond any machine the lab trains on; lower "
            "training.batch_per_card (training.tokens_per_step keeps the step's size with micro-steps)"
        )
    if len(t.sample_prompts) > MAX_SAMPLE_PROMPTS:
        raise ConfigError(Refusal("prompts_many", {"count": len(t.sample_prompts), "most": MAX_SAMPLE_PROMPTS}))
    for i, prompt in enumerate(t.sample_prompts):
        if len(prompt) > MAX_PROMPT_CHARS:
            raise ConfigError(Refusal("prompt_long", {"index": i, "length": len(prompt), "most": MAX_PROMPT_CHARS}))
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in cfg.name):
        raise ConfigError(Refusal("name_one_line", {"name": cfg.name}))
    if t.precision not in PRECISIONS:
        raise ConfigError(f"training.precision must be one of {', '.join(PRECISIONS)}, not {t.precision!r}")
    economical_level(t.economical)
    lean_mode(t.lean_state)
    sharding_mode(t.sharding)
    compile_mode(t.compile)
    if cfg.target.kind not in TARGET_KINDS:
        raise ConfigError(Refusal("target_kind", {"kind": cfg.target.kind}))
    if cfg.target.kind == "local":
        gpu_choice(cfg.target.gpu)
    check_kaggle_limit(cfg)


def shape_problem(layers: int, width: int, heads: int, context: int, vocab: int, batch: int) -> Refusal | None:
    """Why the trainer refuses a model shape (and batch per card), or None: every size at
    least 1, the width split into equal heads, ids that fit uint16. The form and the sizing
    ask this, and word the refusal in their language."""
    for key, value in (("model.context", context), ("model.width", width), ("model.heads", heads),
                       ("model.layers", layers), ("model.vocab", vocab), ("training.batch_per_card", batch)):
        if value < 1:
            return Refusal("at_least_one", {"key": key, "value": value})
    if not heads_divide(width, heads):
        return Refusal("heads_divide", {"width": width, "heads": heads, "choices": heads_that_work(width)})
    if vocab > MAX_VOCAB:
        return Refusal("vocab_over", {"vocab": vocab, "most": MAX_VOCAB})
    return None

def gpu_choice(value: str) -> str | list[str]:
    """target.gpu read: "auto" (also empty), "cpu", or the card numbers it names ("0,1" →
    ["0", "1"]); anything else is a ConfigError naming it. The one reader: the lab starts
    the trainer on these cards (app/runs/process.py)."""
    gpu = str(value).strip().lower()
    if gpu in ("", "auto"):
        return "auto"
    if gpu == "cpu":
        return "cpu"
    ids = [x.strip() for x in gpu.split(",") if x.strip()]
    if not ids or not all(x.isdigit() for x in ids):
        raise ConfigError(Refusal("target_gpu", {"value": str(value)}))
    return ids


def _value(cfg: RunConfig, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:,.0f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.1f} MiB"


def step_floor_bytes(m: ModelConfig, batch_per_card: int) -> int:
    """The least memory one micro-step of `batch_per_card` sequences holds in any mode,
    besides the training state: its token ids and one 16-bit hidden state of them."""
    return batch_per_card * m.context * (BATCH_BYTES_PER_TOKEN + HIDDEN_BYTES_PER_UNIT * m.width)


def step_tokens(cfg: RunConfig, cards: int) -> int:
    """The tokens one optimizer step trains on with `cards` processes."""
    t = cfg.training
    return t.tokens_per_step or cards * t.batch_per_card * cfg.model.context


def kaggle_limit_max() -> float:
    """The most minutes a Kaggle leg may be given: the session less the end margin."""
    return KAGGLE_SESSION_MIN - KAGGLE_END_MARGIN_MIN


def check_kaggle_limit(cfg: RunConfig) -> None:
    """A Kaggle run's limit must leave the session room for its final checkpoint (a
    cross-field rule: the same number is fine on a local card)."""
    if cfg.target.kind == "kaggle" and cfg.training.limit_min > kaggle_limit_max():
        raise ConfigError(
            f"training.limit_min {cfg.training.limit_min:g} is over {kaggle_limit_max():g} on Kaggle: a session "
            f"ends after {KAGGLE_SESSION_MIN:g} min and the last {KAGGLE_END_MARGIN_MIN:g} are kept for the final "
            f"checkpoint and the outputs; set limit_min to {kaggle_limit_max():g} or less (the run continues "
            "in a next leg)"
        )


def target_cards(cfg: RunConfig) -> tuple[int, ...]:
    """The numbers of cards (processes) the run's target can train on, known before it
    starts: Kaggle's only GPU shape is T4 ×2 (a tokens_per_step that divides for two
    divides for one, the kernel's CPU fallback), a
    local target names its cards or "cpu"; "auto" is one process or every GPU of the PC,
    unknown here, so the trainer checks it again at its start."""
    if cfg.target.kind == "kaggle":
        return (2,)
    try:
        ids = gpu_choice(cfg.target.gpu)
    except ConfigError:  # refused by validate; here only the count matters
        return (1,)
    return (len(ids),) if isinstance(ids, list) else (1,)


def accumulation(cfg: RunConfig, cards: int) -> int:
    """Micro-steps per optimizer step on `cards` processes: training.tokens_per_step /
    (cards × batch_per_card × context), 1 when tokens_per_step is 0; a ConfigError naming
    the numbers and the nearest valid values when it does not divide."""
    t, n = cfg.training, cfg.model.context
    wanted = t.tokens_per_step
    if wanted < 0:
        raise ConfigError(Refusal("tokens_per_step_negative", {"wanted": wanted}))
    micro = cards * t.batch_per_card * n
    if wanted == 0:
        return 1
    if wanted % micro == 0:
        return wanted // micro
    near, batches = nearest_valid(wanted, cards, t.batch_per_card, n)
    raise ConfigError(Refusal("tokens_per_step", {"wanted": wanted, "cards": cards, "batch": t.batch_per_card,
                                                  "context": n, "micro": micro, "near": near, "batches": batches}))


def nearest_valid(wanted: int, cards: int, batch: int, context: int) -> tuple[list[int], list[int]]:
    """For a tokens_per_step that does not divide: the nearest values that do (below and
    above), and up to three batches per card near `batch` that would divide it."""
    micro = cards * batch * context
    below, above = wanted // micro * micro, (wanted // micro + 1) * micro
    fitting = [b for b in range(1, 2 * batch + 1) if wanted % (cards * b * context) == 0]
    return [v for v in (below, above) if v], sorted(sorted(fitting, key=lambda b: abs(b - batch))[:3])


def smaller_batch(batch: int, micro_steps: int) -> int:
    """The out-of-memory advice: the largest batch per card of at most half `batch` that
    splits the step's batch × micro_steps sequences into whole micro-steps, so the tokens
    per step stay (6 → 3 with twice the micro-steps; 5 → 1 with five times as many)."""
    whole = batch * micro_steps
    return max(d for d in range(1, max(1, batch // 2) + 1) if whole % d == 0)


def _named(key: str, value: bool | str | None, names: tuple[str, ...], true: str, said: str) -> str:
    """A switch that is true/false or one of `names`, as its name: true is `true`, false
    and None (a key not given) are "off"; anything else is a ConfigError naming the key."""
    if value is True:
        return true
    if value is False or value is None:
        return "off"
    if value in names:
        return str(value)
    raise ConfigError(f"training.{key} must be {said}, not {value!r}")


def economical_level(value: bool | str | None) -> str:
    """`economical` is true/false or a level name: off, selective or full. The one reader of
    the key, for the trainer, the sizing and the form: true (the old checkbox) is
    "selective", false and None are "off"; anything else is a ConfigError (a ValueError)."""
    return _named("economical", value, ECONOMICAL_LEVELS, "selective",
                  f"true, false or one of {', '.join(ECONOMICAL_LEVELS)}")


LEAN_MODES = ("off", "on", "fused", "offload", "one_pass")
# The lean states whose update runs inside a second backward pass (trainer/step/lean.py).
FUSED_LEAN_MODES = ("fused", "offload", "one_pass")


def lean_mode(value: bool | str | None) -> str:
    """`lean_state` is true/false or "off", "on", "fused", "offload", "one_pass";
    returns the name. The
    one reader of the key, for the trainer, the sizing and the form."""
    return _named("lean_state", value, LEAN_MODES, "on", 'true, false, "fused", "offload" or "one_pass"')


COMPILE_MODES = ("auto", "on", "off")


SHARDING_MODES = ("auto", "ddp", "fsdp")


def compile_mode(value: bool | str) -> str:
    """`compile` is "auto", "on", "off" (or true/false); returns the name."""
    return _named("compile", value, COMPILE_MODES, "on", f"one of {', '.join(COMPILE_MODES)}")


def sharding_mode(value: str) -> str:
    if value in SHARDING_MODES:
        return value
    raise ConfigError(f"training.sharding must be one of {', '.join(SHARDING_MODES)}, not {value!r}")


class DuplicateKey(ValueError):
    """A JSON object that names one key twice (json would keep the last one silently)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def parse_json(text: str, where: str | Path = "run.json") -> Any:
    """run.json's text as JSON, with a key given twice in one object refused (a ConfigError
    naming it) instead of the last one winning silently; the lab reads run.json files
    through this too. A leading UTF-8 BOM (Windows PowerShell 5 and older Notepad write
    one) is read past; a text over MAX_CONFIG_BYTES or nested past what json reads without
    running out of stack is refused by name. Other JSON errors are json.JSONDecodeError,
    as json.loads raises."""
    check_size(len(text), where)
    try:
        return json.loads(text.removeprefix("\ufeff"), object_pairs_hook=_no_duplicates)
    except DuplicateKey as e:
        raise ConfigError(Refusal("duplicate_key", {"where": str(where), "key": e.args[0]})) from None
    except RecursionError:
        raise ConfigError(Refusal("file_too_deep", {"path": str(where)})) from None
def load(path: str | Path) -> RunConfig:
    """Read and validate a run.json file."""
    return from_dict(read_json(path))


def read_json(path: str | Path) -> Any:
    """A run.json file's JSON, not yet checked: a file that is missing, unreadable, not
    UTF-8 or not JSON is a ConfigError whose refusal names it (the lab reads run.json files
    through this too, and says the refusal in its language)."""
    path = Path(path)
    try:
        check_size(path.stat().st_size // 4, path)  # a file far too big is not read at all (4: UTF-8's most a character)
        return parse_json(path.read_text(encoding="utf-8-sig"), path)
    except FileNotFoundError:
        raise ConfigError(Refusal("file_missing", {"path": str(path)})) from None
    except json.JSONDecodeError as e:
        raise ConfigError(Refusal("file_not_json", {"path": str(path), "line": e.lineno, "msg": e.msg})) from None
    except UnicodeDecodeError as e:
        raise ConfigError(Refusal("file_not_utf8", {"path": str(path), "byte": e.start})) from None
    except OSError as e:
        raise ConfigError(Refusal("file_unreadable", {"path": str(path), "error": f"{type(e).__name__}: {e}"})) from None


def weight_count(layers: int, width: int, context: int, vocab: int) -> int:
    """Exact weight count of trainer/model/gpt.py's GPT: 12·L·d² (per block: fused qkv 3d²,
    projection d², MLP 4d² + 4d²; no biases, norms without weights) + V·d (the token
    embedding, tied with the output layer) + n·d (learned positions). 27,738,112 for
    8 × 512, V 4000, n 1024. The one formula: the sizing and the form use it too, and a
    test counts the real model's parameters against it."""
    return 12 * layers * width**2 + vocab * width + context * width


def parameter_count(m: ModelConfig) -> int:
    """Exact weight count of a model config (weight_count)."""
    return weight_count(m.layers, m.width, m.context, m.vocab)


def heads_divide(width: int, heads: int) -> bool:
    """Attention splits the width into equal heads: width must divide by heads."""
    return heads > 0 and width % heads == 0


def heads_that_work(width: int, limit: int = 128) -> list[int]:
    """Head counts (up to `limit`) that divide the width with no remainder."""
    return [h for h in range(1, min(width, limit) + 1) if width % h == 0]


def default(path: str) -> Any:
    """The trainer's default for one run.json key by its dotted path ("model.width",
    "training.economical", "name"), a fresh copy; KeyError for a path that is not a key of
    run.json (a section such as "model" included). The form's field table takes its
    defaults from here, so the window and the trainer cannot start from different values."""
    node: Any = RunConfig()
    for part in path.split("."):
        if not is_dataclass(node) or part not in {f.name for f in fields(node)}:
            raise KeyError(path)
        node = getattr(node, part)
    if is_dataclass(node):
        raise KeyError(path)
    return copy.deepcopy(node)
