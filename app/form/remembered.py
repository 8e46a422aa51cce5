"""What the «Новый прогон» form remembers from one start to the next (settings.json, key
"form"): the run's name, the ticked constellations, the model's shape, where it runs and
the training values — the form opens as the user left it, as the window's layout does
(app.window.layout).

Plain Python, no Qt. Two checks, like the layout's: what is read back must have the
field's shape and range (app.form.fields' table), else that one value is dropped; and what is
applied must still make sense in today's lab (a constellation, a Kaggle account or a card
that is gone is ignored, never ticked or chosen blindly). A form continuing a checkpoint is
not remembered: its values are the checkpoint's.
"""

from __future__ import annotations

import math
from typing import Any

from ..base.memory_saving import economical_level
from . import fields as F

KEY = "form"
# The fields kept: everything the user sets for a run from scratch, not how it starts.
KEPT: tuple[str, ...] = tuple(
    f.name for f in F.FIELDS if f.name not in ("start_from", "checkpoint"))
MAX_TEXT = 200
MAX_CONSTELLATIONS = 200


def snapshot(form: Any) -> dict[str, Any]:
    """The form's values worth keeping (a RunForm); {} while it continues a checkpoint."""
    if form.continuing is not None:
        return {}
    out: dict[str, Any] = {}
    for name in KEPT:
        value = _checked(name, form.values.get(name))
        if value is not None:
            out[name] = value
    return out


def from_settings(settings: Any) -> dict[str, Any]:
    """The kept values from settings.json's contents; each one of the wrong shape or out of
    its field's range left out."""
    raw = settings.get(KEY) if isinstance(settings, dict) else None
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    for name in KEPT:
        value = _checked(name, raw.get(name))
        if value is not None:
            out[name] = value
    return out


def merged(settings: Any, values: dict[str, Any]) -> dict[str, Any]:
    """settings.json's contents with these form values in them; the other keys kept."""
    out = dict(settings) if isinstance(settings, dict) else {}
    out[KEY] = dict(values)
    return out


def restore(form: Any, values: dict[str, Any]) -> list[str]:
    """Put kept values back into a fresh RunForm where today's lab still has them; returns
    the names of those ignored as stale (a constellation deleted, an account removed)."""
    stale: list[str] = []
    for name, value in values.items():
        if name in ("gpu", "machine", "constellations"):
            continue
        form.set(name, value)
    if "constellations" in values:
        known = [c for c in values["constellations"] if c in form.ctx.constellations]
        if len(known) < len(values["constellations"]):
            stale.append("constellations")
        if known:
            form.set("constellations", known)
    # «Машина» first: choosing one moves «Видеокарта» to what it can have (app.form.run_form).
    for name in ("machine", "gpu"):
        if name not in values:
            continue
        keys = [k for k, _ in (form.machine_choices() if name == "machine" else form.gpu_choices())]
        if values[name] in keys:
            form.set(name, values[name])
        else:
            stale.append(name)
    return stale


def _checked(name: str, value: Any) -> Any:
    """`value` if it fits field `name`'s kind and range, else None."""
    spec = F.spec(name)
    if spec.kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        if spec.kind == "int" and not isinstance(value, int):
            return None
        if (spec.minimum is not None and value < spec.minimum) or (
                spec.maximum is not None and value > spec.maximum):
            return None
        return value
    if spec.kind == "multi":
        if not isinstance(value, list) or len(value) > MAX_CONSTELLATIONS:
            return None
        if not all(isinstance(v, str) and 0 < len(v) <= MAX_TEXT for v in value):
            return None
        return list(dict.fromkeys(value))
    if name == "economical":
        return economical_level(value) if isinstance(value, (str, bool)) else None
    if spec.options and value not in spec.options:
        return None
    if isinstance(value, str) and 0 < len(value.strip()) <= MAX_TEXT:
        return value
    return None
