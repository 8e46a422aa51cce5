"""run.json `training.tokens_per_step` for the lab: the micro-steps it makes on a machine
and, when it does not divide, what to say (the rule itself is the trainer's:
trainer.config.accumulation / nearest_valid, imported, not restated)."""

from __future__ import annotations

from trainer.config import nearest_valid

from ..base.i18n import t
from ..base.numbers import int_text


def micro_steps(tokens_per_step: int, cards: int, batch: int, context: int) -> int | None:
    """Micro-steps per step (1 for 0 = automatic), None when it does not divide."""
    if tokens_per_step <= 0:
        return 1
    micro = cards * batch * context
    return tokens_per_step // micro if micro > 0 and tokens_per_step % micro == 0 else None


def problem(tokens_per_step: int, cards: int, batch: int, context: int, lang: str | None = None) -> str | None:
    """Why the form's «Токенов за шаг» cannot train on `cards` cards, or None."""
    if micro_steps(tokens_per_step, cards, batch, context) is not None:
        return None
    near, batches = nearest_valid(tokens_per_step, cards, batch, context)
    micro = cards * batch * context
    ru_near = " или ".join(int_text(v, "ru") for v in near)
    en_near = " or ".join(int_text(v, "en") for v in near)
    return t(
        f"{int_text(tokens_per_step, 'ru')} токенов за шаг не делятся на микрошаги по {int_text(micro, 'ru')} "
        f"(карт {cards} × батч {batch} × n {context}): поставьте {ru_near}"
        + (f" или батч {', '.join(map(str, batches))}" if batches else "") + ", или 0 — автоматически.",
        f"{int_text(tokens_per_step, 'en')} tokens per step do not split into micro-steps of {int_text(micro, 'en')} "
        f"({cards} card(s) × batch {batch} × n {context}): set {en_near}"
        + (f", or batch {', '.join(map(str, batches))}" if batches else "") + ", or 0 for automatic.",
        lang,
    )
