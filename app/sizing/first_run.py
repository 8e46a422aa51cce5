"""A first run sized to this machine: one that finishes in FIRST_RUN_MINUTES by the lab's
own estimate, where the guide's defaults (27.7 M weights, 20,000 steps, 630 min on Kaggle's
2×T4) would take days on a PC without a card.

The speed is the lab's: this card's from the catalogue, or the CPU's rate the lab measures
once (app/sizing/cpu_rate.py; until then the table's, which is optimistic on a busy CPU, so
the window sizes again when the measurement comes). The model is the largest of a short
ladder, from the guide's shape down, whose steps in the budget are enough to show a
falling curve (MIN_STEPS); steps are whole hundreds. The data is the form's: the prepared
set of the constellations ticked (the built-in «demo» on a fresh lab) with the vocabulary it
was prepared with, 4000 by default; a different vocabulary changes V·d, so a run with it
cannot continue one trained with another.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..base.i18n import t
from ..base.numbers import counted, duration_text
from .estimate import estimate

FIRST_RUN_MINUTES = 30
MIN_STEPS = 600
MAX_STEPS = 20_000  # the guide's «Шагов до»: never past it
# (layers, width, heads, context, batch per card), the guide's shape last.
LADDER: tuple[tuple[int, int, int, int, int], ...] = (
    (2, 128, 4, 128, 8),
    (4, 192, 4, 256, 8),
    (4, 256, 4, 256, 8),
    (6, 384, 6, 512, 6),
    (8, 512, 8, 1024, 6),
)
# `ternit run start` without a config asks for --yes above this (a few hours).
ASK_ABOVE_S = 3 * 3600


def at_first_start() -> bool:
    """Whether the window sizes its first form to this PC (no remembered form, no Kaggle
    account). TERNIT_FIRST_RUN=0 keeps the fields' own defaults: the test suite does, as
    its windows are all first starts and most tests begin from those defaults."""
    return os.environ.get("TERNIT_FIRST_RUN", "1") != "0"


@dataclass(frozen=True)
class FirstRun:
    values: dict[str, Any]  # the form's fields: layers, width, heads, context, batch_per_card, steps_to, limit_min
    seconds: float          # the estimate of its training time
    params: int
    measured: bool          # the speed is a measurement (not the table's estimate)

    def why(self, lang: str | None = None) -> str:
        """One line for the form and the README's promise: what was sized, and to what."""
        how = t("по замеру", "measured", lang) if self.measured else t("по оценке", "estimated", lang)
        weights = ("вес", "веса", "весов"), ("weight", "weights")
        steps = ("шаг", "шага", "шагов"), ("step", "steps")
        return t(f"Размер для этого ПК: {counted(self.params, *weights, 'ru', sig=3)}, "
                 f"{counted(self.values['steps_to'], *steps, 'ru')} ≈ {duration_text(self.seconds, 'ru')} ({how}); "
                 "«Как в гайде: 2×T4» — размер гайда для Kaggle",
                 f"Sized for this PC: {counted(self.params, *weights, 'en', sig=3)}, "
                 f"{counted(self.values['steps_to'], *steps, 'en')} ≈ {duration_text(self.seconds, 'en')} ({how}); "
                 "“As in the guide: 2×T4” is the guide's size for Kaggle", lang)


def first_run(gpu: str, *, measured: Iterable[dict[str, Any]] | None = None, vocab: int = 4000,
              local_name: str | None = None, card_memory_mb: float | None = None,
              minutes: float = FIRST_RUN_MINUTES) -> FirstRun:
    """The largest shape of LADDER whose steps in `minutes` (training and its evaluations,
    by the lab's estimate on `gpu`) reach MIN_STEPS and whose memory fits; the smallest
    when none does."""
    measured = list(measured or [])
    budget = minutes * 60
    chosen: FirstRun | None = None
    for layers, width, heads, context, batch in LADDER:
        est = estimate(layers=layers, width=width, heads=heads, context=context, vocab=vocab, batch=batch,
                       gpu=gpu, steps_to=1000, measured=measured or None, local_name=local_name,
                       card_memory_mb=card_memory_mb)
        per_step = est.seconds_to_steps / 1000
        steps = min(MAX_STEPS, int(budget / per_step) // 100 * 100)
        fits = est.fits is not False
        run = FirstRun({"layers": layers, "width": width, "heads": heads, "context": context,
                        "batch_per_card": batch, "steps_to": max(100, steps),
                        "limit_min": int(minutes)},
                       per_step * max(100, steps), est.params, est.is_measurement)
        if chosen is None or (steps >= MIN_STEPS and fits):
            chosen = run  # the smallest as the fallback, then each larger one that does
        if steps < MIN_STEPS or not fits:
            break
    assert chosen is not None
    return chosen


@dataclass(frozen=True)
class LocalTime:
    """What a run started here takes: to «Шагов до», and what its limit lets it run."""

    seconds: float        # to steps_to, by the estimate
    limit_s: float        # «Лимит, мин»
    gpu: str              # the sizing's name: "cpu" or "local"
    measured: bool

    @property
    def runs_s(self) -> float:
        return min(self.seconds, self.limit_s)

    def line(self, lang: str | None = None) -> str:
        where = t("на процессоре", "on the CPU", lang) if self.gpu == "cpu" else t("на карте", "on the card", lang)
        how = "" if self.measured else t(" (оценка)", " (an estimate)", lang)
        cut = "" if self.seconds <= self.limit_s else t(
            f"; «Лимит, мин» остановит его через {duration_text(self.limit_s, 'ru')}",
            f"; “Limit, min” stops it after {duration_text(self.limit_s, 'en')}", lang)
        return t(f"этот прогон займёт ≈ {duration_text(self.seconds, 'ru')} {where}{how}{cut}",
                 f"this run takes ≈ {duration_text(self.seconds, 'en')} {where}{how}{cut}", lang)


def local_time(config: dict[str, Any], measured: Iterable[dict[str, Any]] | None = None) -> LocalTime | None:
    """The estimate for run.json `config` started on this PC (its card, or the CPU when it
    has none or run.json names it); None when the trainer would refuse the config (its own
    check says why) or the sizing cannot size it."""
    from trainer.config.run_config import ConfigError, from_dict

    from .gpus import local_card

    try:
        cfg = from_dict(config)
    except ConfigError:
        return None
    card = None if str(cfg.target.gpu).lower() == "cpu" else local_card()
    m, tr = cfg.model, cfg.training
    try:
        est = estimate(layers=m.layers, width=m.width, heads=m.heads, context=m.context, vocab=m.vocab,
                       batch=tr.batch_per_card, gpu="local" if card else "cpu", steps_to=tr.steps_to,
                       economical=tr.economical, lean_state=tr.lean_state, precision=tr.precision,
                       eval_every=tr.eval_every, eval_segments=tr.eval_segments,
                       tokens_per_step=tr.tokens_per_step, measured=list(measured or []) or None,
                       local_name=card.name if card else None, card_memory_mb=card.memory_mb if card else None)
    except (ValueError, KeyError):
        return None
    return LocalTime(est.seconds_to_steps, float(tr.limit_min) * 60, "local" if card else "cpu", est.is_measurement)


def first_run_flags(run: FirstRun) -> str:
    """`ternit run start`'s flags for a first run (what the refusal of a long one proposes)."""
    v = run.values
    return (f"--layers {v['layers']} --width {v['width']} --heads {v['heads']} --context {v['context']} "
            f"--batch {v['batch_per_card']} --steps {v['steps_to']} --limit-min {int(v['limit_min'])}")
