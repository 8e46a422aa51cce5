"""`ternit run start`'s flags for the form's fields, made from the one field table
(app/form/fields.py), so the command line and the window can never offer different settings.

Every field that has a place in run.json (`FieldSpec.path`) gets a flag named after it
(`--batch-per-card`, plus the spec's shorter `flags`, `--batch`); its help is the field's
label, unit, default and run.json key. A choice whose options the form lists from the lab's
state («Видеокарта», «Машина») has its own flags instead (--gpu, --account, --target).
A flag given overrides the same key of --config; keys given nowhere take the trainer's
defaults.
"""

from __future__ import annotations

import argparse
import copy
import sys
from typing import Any

from ..base.i18n import t
from ..base.numbers import parse_number
from ..data.for_run import fill_data
from ..data.progress import progress_for_cli
from ..form import fields as F


def flag_fields() -> list[F.FieldSpec]:
    """The fields `ternit run start` takes as flags, in the form's order."""
    return [f for f in F.FIELDS if f.path and (f.kind != "choice" or f.options)]


def dest(spec: F.FieldSpec) -> str:
    return "field_" + spec.name


def add_field_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(t("поля формы (вместо run.json или поверх него)",
                                        "the form's fields (instead of a run.json, or over it)"))
    for spec in flag_fields():
        names = ["--" + spec.name.replace("_", "-"), *spec.flags]
        kwargs: dict[str, Any] = dict(dest=dest(spec), default=None, help=_help(spec))
        if spec.kind == "int":
            kwargs.update(type=_whole, metavar="N")
        elif spec.kind == "float":
            kwargs.update(type=_real, metavar="X")
        elif spec.kind == "multi":
            kwargs.update(metavar="A,B")
        elif spec.kind == "text":
            kwargs.update(metavar=t("ТЕКСТ", "TEXT"))
        elif spec.kind == "choice":
            kwargs.update(choices=list(spec.options))
        elif spec.kind == "bool":
            kwargs.update(action=argparse.BooleanOptionalAction)
        group.add_argument(*names, **kwargs)


def _whole(text: str) -> int:
    # the form's one rule (app/base/numbers.py): «20 000», "20,000" in English
    return int(parse_number(text, "int"))


def _real(text: str) -> float:
    # «0,001» in Russian, "0.001" in both
    return float(parse_number(text, "float"))


# argparse names the type in its refusal from __name__ ("invalid int value: 'x'"), which
# app/base/cli_args.py translates; a ValueError from parse_number is such a refusal.
_whole.__name__, _real.__name__ = "int", "float"


def _help(spec: F.FieldSpec) -> str:
    label, unit = spec.label_text(), spec.unit_text()
    if unit and not label.endswith(unit):  # «Лимит, мин» already says its unit
        label += f", {unit}"
    if spec.kind == "multi" or spec.default in (None, ""):
        return f"{label} (run.json: {spec.path})"
    shown = F.format_value(spec.default)
    return f"{label} (run.json: {spec.path}; " + t(f"по умолчанию {shown})", f"default {shown})")


def range_problem(spec: F.FieldSpec, value: Any) -> str | None:
    """Why a flag's number is refused (the form's own limits), or None."""
    if spec.kind not in ("int", "float"):
        return None
    flag = "--" + spec.name.replace("_", "-")
    if spec.minimum is not None and value < spec.minimum:
        return t(f"{flag}: не меньше {F.format_value(spec.minimum)}, а не {F.format_value(value)}",
                 f"{flag} must be at least {F.format_value(spec.minimum)}, not {F.format_value(value)}")
    if spec.maximum is not None and value > spec.maximum:
        return t(f"{flag}: не больше {F.format_value(spec.maximum)}, а не {F.format_value(value)}",
                 f"{flag} must be at most {F.format_value(spec.maximum)}, not {F.format_value(value)}")
    return None


def apply_flags(config: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """`config` with every field flag that was given written at its run.json key. Raises
    ValueError naming the flag when a number is out of the form's range."""
    cfg = copy.deepcopy(config)
    for spec in flag_fields():
        value = getattr(args, dest(spec), None)
        if value is None:
            continue
        problem = range_problem(spec, value)
        if problem:
            raise ValueError(problem)
        if spec.kind == "multi":
            value = [v.strip() for v in str(value).split(",") if v.strip()]
        *parents, key = str(spec.path).split(".")
        node = cfg
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = F.to_run_value(spec, value)  # as the form writes it (economical off: false)
    return cfg


def data_for_cli(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with its data found, or prepared from the constellations it names, for a
    command line (`ternit run start`, `ternit queue add`): the preparation's progress on
    stderr, and what was chosen said there."""
    bar = progress_for_cli()
    try:
        config, note = fill_data(config, progress=bar)
    finally:
        bar.close()
    if note:
        print(note, file=sys.stderr)
    return config
