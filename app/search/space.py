"""The fields a search varies and how: `KEY=log:LOW..HIGH` (log-uniform), `KEY=LOW..HIGH`
(uniform; whole numbers when both ends are and the field is), `KEY=V1,V2,…` (one of the
listed values). KEY is a run.json key (`training.lr`) or a form field's name (`lr`,
`warmup_steps`, `width`), which names its key. One to four fields.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from ..base.i18n import t

MAX_FIELDS = 4
LOG, RANGE, CHOICE = "log", "range", "choice"


class SpaceError(ValueError):
    """A --space that cannot be searched: the message says which and why."""


@dataclass(frozen=True)
class Dimension:
    key: str                 # run.json key
    kind: str                # log | range | choice
    low: float | None = None
    high: float | None = None
    whole: bool = False      # whole numbers (an int field with whole ends)
    choices: tuple[Any, ...] = ()

    def distribution(self) -> Any:
        import optuna.distributions as d

        if self.kind == CHOICE:
            return d.CategoricalDistribution(list(self.choices))
        if self.whole:
            return d.IntDistribution(int(self.low or 0), int(self.high or 0), log=self.kind == LOG)
        return d.FloatDistribution(float(self.low or 0), float(self.high or 0), log=self.kind == LOG)

    def as_json(self) -> list[Any]:
        spec: Any = list(self.choices) if self.kind == CHOICE else [self.low, self.high, self.whole]
        return [self.key, self.kind, spec]

    @classmethod
    def from_json(cls, row: list[Any]) -> Dimension:
        key, kind, spec = row
        if kind == CHOICE:
            return cls(key, kind, choices=tuple(spec))
        return cls(key, kind, spec[0], spec[1], bool(spec[2]))


def resolve_key(key: str) -> tuple[str, str | None]:
    """(run.json key, the form field's kind or None) for a field name or a run.json key."""
    from ..form.fields import FIELDS

    for f in FIELDS:
        if f.path and (key == f.name or key == f.path):
            return f.path, f.kind
    if "." not in key:
        raise SpaceError(t(f"--space: нет поля {key!r} (поле формы, например lr, или ключ run.json, например training.lr)",
                           f"--space: no field {key!r} (a form field such as lr, or a run.json key such as training.lr)"))
    return key, None


def _number(text: str, key: str) -> float:
    try:
        return float(text.replace("_", ""))
    except ValueError:
        raise SpaceError(t(f"--space {key}: {text!r} — не число", f"--space {key}: {text!r} is not a number")) from None


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_dimension(text: str) -> Dimension:
    key, sep, spec = text.partition("=")
    if not sep or not key.strip() or not spec.strip():
        raise SpaceError(t(f"--space {text!r}: нужно КЛЮЧ=log:НИЗ..ВЕРХ, КЛЮЧ=НИЗ..ВЕРХ или КЛЮЧ=З1,З2,…",
                           f"--space {text!r}: use KEY=log:LOW..HIGH, KEY=LOW..HIGH or KEY=V1,V2,…"))
    path, field_kind = resolve_key(key.strip())
    spec = spec.strip()
    kind = LOG if spec.startswith("log:") else RANGE
    body = spec[4:] if kind == LOG else spec
    if ".." in body:
        lo_text, _, hi_text = body.partition("..")
        low, high = _number(lo_text, key), _number(hi_text, key)
        if not low < high:
            raise SpaceError(t(f"--space {key}: низ {low:g} должен быть меньше верха {high:g}",
                               f"--space {key}: the low end {low:g} must be below the high end {high:g}"))
        if kind == LOG and low <= 0:
            raise SpaceError(t(f"--space {key}: у логарифмической шкалы низ больше нуля",
                               f"--space {key}: a log scale needs a low end above zero"))
        whole = field_kind == "int" or (field_kind is None and low.is_integer() and high.is_integer()
                                        and "." not in lo_text + hi_text and "e" not in (lo_text + hi_text).lower())
        return Dimension(path, kind, low, high, whole)
    if kind == LOG:
        raise SpaceError(t(f"--space {key}: log: нужен диапазон НИЗ..ВЕРХ", f"--space {key}: log: needs a range LOW..HIGH"))
    choices = tuple(_value(v.strip()) for v in body.split(",") if v.strip())
    if len(choices) < 2:
        raise SpaceError(t(f"--space {key}: нужно хотя бы два значения", f"--space {key}: at least two values are needed"))
    return Dimension(path, CHOICE, choices=choices)


def parse_space(texts: list[str]) -> list[Dimension]:
    dims = [parse_dimension(x) for x in texts]
    if not 1 <= len(dims) <= MAX_FIELDS:
        raise SpaceError(t(f"поиск ведётся по 1–{MAX_FIELDS} полям, а не по {len(dims)}",
                           f"a search varies 1 to {MAX_FIELDS} fields, not {len(dims)}"))
    keys = [d.key for d in dims]
    if len(set(keys)) != len(keys):
        raise SpaceError(t("--space: одно поле названо дважды", "--space: one field is named twice"))
    return dims


def with_params(config: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The run.json with the trial's values set at their keys."""
    cfg = copy.deepcopy(config)
    for key, value in params.items():
        *parents, last = key.split(".")
        node = cfg
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return cfg


def value_at(config: dict[str, Any], key: str) -> Any:
    node: Any = config
    for p in key.split("."):
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


def params_text(params: dict[str, Any]) -> str:
    """«lr=0.00123, width=256»: a trial's values as its run's name carries them."""
    def short(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    return ", ".join(f"{k.rsplit('.', 1)[-1]}={short(v)}" for k, v in params.items())
