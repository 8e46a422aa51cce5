"""How text is sampled from a checkpoint (`python -m trainer.text.sample`, the lab's «Текст» tab
and `ternit sample`): the next-token choice and a request's length and count, their
defaults and their one check. Standard library only, so the lab reads it without torch; a
value refused is a Refusal (trainer/config/reasons.py), which the lab says in Russian."""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainer.config.reasons import Refusal

TOKENS_RANGE = (1, 100_000)  # new tokens a sample: at most minutes of a card for one prompt
NUM_RANGE = (1, 100)  # samples a request
TEMPERATURE_MAX = 10.0  # above it every token is about as likely as any other
DEFAULT_TOKENS, DEFAULT_SEED, DEFAULT_NUM = 200, 1337, 1


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: temperature 0 = always the likeliest (greedy)."""

    temperature: float = 0.8
    top_k: int = 40  # 0: no limit
    top_p: float = 1.0  # 1: no limit

    def problem(self) -> Refusal | None:
        if not (math.isfinite(self.temperature) and 0 <= self.temperature <= TEMPERATURE_MAX):
            return Refusal("temperature", {"value": self.temperature, "most": TEMPERATURE_MAX})
        if self.top_k < 0:
            return Refusal("top_k", {"value": self.top_k})
        if not 0 < self.top_p <= 1:
            return Refusal("top_p", {"value": self.top_p})
        return None

    def check(self) -> None:
        """ValueError with the English sentence of the problem, if any."""
        problem = self.problem()
        if problem:
            raise ValueError(problem.text())


def request_problem(sampling: Sampling, tokens: int, num: int) -> Refusal | None:
    """Why a sampling request (new tokens per sample, samples) is refused, or None."""
    if not TOKENS_RANGE[0] <= tokens <= TOKENS_RANGE[1]:
        return Refusal("sample_tokens", {"value": tokens, "least": TOKENS_RANGE[0], "most": TOKENS_RANGE[1]})
    if not NUM_RANGE[0] <= num <= NUM_RANGE[1]:
        return Refusal("sample_num", {"value": num, "least": NUM_RANGE[0], "most": NUM_RANGE[1]})
    return sampling.problem()
