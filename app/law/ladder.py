"""The ladder the lab offers when its law is not yet known well enough: a series (`ternit queue
add --vary`) of sizes × lengths that would measure it, sized to the GPU time left.

Sizes: three widths around the data set's newest run (half, the same, one and a half times),
its depth kept, so N spans about a factor of five; lengths: at every size two, at a number of
tokens per weight and at four times it, so the six runs have six different D and separate
A/N^α from B/D^β (a ladder whose lengths are the same steps at every size has two values of D,
and B, β and E cannot be told apart from two). The tokens per weight are the most that let
the whole ladder fit in the time given, never past the data's unique tokens at the largest
size (the law counts unique ones). One series per width (`--width W --vary
training.steps_to=…`): a series is a product of its values, and the lengths differ by width. Its hours come from the
lab's own measured speed in FLOPs per second where it has one (`flops_per_s`), else from the
guide's 2×T4 figure (102 000 tokens/s for the default 27.7 M model).
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..sizing.formulas import flops_per_token, param_count

WIDTH_FACTORS = (0.5, 1.0, 1.5)
LENGTH_FACTOR = 4
MIN_STEPS = 200
GUIDE_FLOPS_PER_S = flops_per_token(8, 512, 1024, 4000) * 102_000.0  # 2×T4, the default model
SHARE = 0.8   # of the hours left: a margin for the estimate's error


@dataclass(frozen=True)
class Rung:
    width: int
    heads: int
    layers: int
    params: int
    steps_to: int
    tokens: int
    hours: float


@dataclass(frozen=True)
class Ladder:
    rungs: list[Rung]
    hours: float            # all of it
    hours_left: float       # what it was sized to
    basis: str              # measured | guide
    command: str            # the series that queues it
    base: dict[str, Any] = field(default_factory=dict, compare=False)  # the run.json it varies

    def series(self) -> list[tuple[dict[str, Any], list[tuple[str, list[Any]]]]]:
        """The ladder as the queue takes it (`ternit law --queue`, the same as its `command`):
        one series a width, its run.json the base's at that width, its lengths varied."""
        out = []
        for w in dict.fromkeys(r.width for r in self.rungs):
            cfg = json.loads(series_config(self.base))
            cfg.setdefault("model", {})["width"] = w
            cfg["name"] = f"ladder-{w}"  # the series adds its lengths to the name
            out.append((cfg, [("training.steps_to", [r.steps_to for r in self.rungs if r.width == w])]))
        return out

    def as_json(self) -> dict[str, Any]:
        return {"runs": [asdict(r) for r in self.rungs], "hours": self.hours, "hours_left": self.hours_left,
                "speed_basis": self.basis, "command": self.command}


def _widths(base: int, heads: int) -> list[int]:
    """Three different widths near base × WIDTH_FACTORS that the heads divide into, per head a
    multiple of 8 (a small base's neighbours would round onto it: then the next multiple)."""
    step = heads * 8
    ks: list[int] = []
    for f in WIDTH_FACTORS:
        k = max(1, round(base * f / step))
        ks.append(k if not ks or k > ks[-1] else ks[-1] + 1)
    return [k * step for k in ks]


def propose(base: dict[str, Any], hours_left: float, train_tokens: int = 0,
            flops_per_s: float | None = None) -> Ladder:
    """The ladder from a base run.json (model, training: batch, tokens per step)."""
    m, tr = base.get("model") or {}, base.get("training") or {}
    layers, heads = int(m.get("layers", 8)), int(m.get("heads", 8))
    context, vocab, width = int(m.get("context", 1024)), int(m.get("vocab", 4000)), int(m.get("width", 512))
    per_step = int(tr.get("tokens_per_step") or 0) or int(tr.get("batch_per_card", 6)) * context
    speed = flops_per_s or GUIDE_FLOPS_PER_S
    widths = _widths(width, heads)
    weights = {w: param_count(layers, w, context, vocab) for w in widths}
    # Tokens per weight of the long runs, so that every width at it and at a quarter of it
    # fits the budget; the data's unique tokens cap it at the largest width.
    flops_per_ratio = sum(flops_per_token(layers, w, context, vocab) * weights[w] for w in widths) \
        * (1 + 1 / LENGTH_FACTOR)
    ratio = max(0.0, hours_left) * 3600.0 * SHARE * speed / flops_per_ratio
    if train_tokens:
        ratio = min(ratio, train_tokens / weights[widths[-1]])
    rungs, commands = [], []
    for w in widths:
        long = max(int(ratio * weights[w] / per_step), MIN_STEPS * LENGTH_FACTOR)
        lengths = [long // LENGTH_FACTOR, long]
        for steps in lengths:
            tokens = steps * per_step
            secs = flops_per_token(layers, w, context, vocab) * tokens / speed
            rungs.append(Rung(w, heads, layers, weights[w], steps, tokens, secs / 3600))
        commands.append(f"ternit queue add --config RUN.json --target any --width {w}"
                        f" --vary training.steps_to={lengths[0]},{lengths[1]}")
    return Ladder(rungs, sum(r.hours for r in rungs), hours_left, "measured" if flops_per_s else "guide",
                  " ; ".join(commands), base)


def series_config(base: dict[str, Any]) -> str:
    """The base run.json for the ladder's series (the command's RUN.json): a fresh run, no
    name of its own (the series names each run by its values)."""
    cfg = copy.deepcopy(base)
    cfg.pop("resume_from", None)
    cfg["name"] = "ladder"
    return json.dumps(cfg, ensure_ascii=False, indent=2)
