"""The «Текст» tab's samples: what the trainer wrote as `sample` events, for a run and the
runs it continues, as one list, newest first.

Which events make the list follows the loss plot's rule (app/runs/series.py): the chain is
read oldest first, and a `start` event at step S (a leg resumed from S, or a run resumed in
place) drops what came after S, since the training from there was done again. A sample of
one step and prompt seen twice keeps the later one. The tab polls `SampleFeed.poll()` from
a timer: each file is followed by an EventTail, so a poll costs only the new bytes, and
only `sample` and `start` lines are parsed (a long run's file is mostly `step` lines).
A Kaggle run's events reach its folder's events.jsonl through app/kaggle/follow.py (its
`sample` lines as the kernel echoed them), so they come here the same way.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.config.run_config import TrainingConfig

from ..base.i18n import t
from ..base.numbers import int_text, plural_ru
from ..runs.events import EventTail, parse_lines
from ..window.colors import colors as colour_table

CHUNK = 1 << 22
_WANTED = (b'"event":"sample"', b'"event": "sample"', b'"event":"start"', b'"event": "start"')


@dataclass(frozen=True)
class Sample:
    run_id: str
    step: int
    index: int  # which prompt of the run's list
    prompt: str
    text: str
    tokens: int | None = None
    tokens_per_s: float | None = None


def sample_from(run_id: str, ev: dict[str, Any]) -> Sample | None:
    """A `sample` event as a Sample (None when a field is missing or of the wrong type)."""
    step, index = ev.get("step"), ev.get("index", 0)
    prompt, text = ev.get("prompt"), ev.get("text")
    if not (isinstance(step, int) and isinstance(index, int) and isinstance(prompt, str) and isinstance(text, str)):
        return None
    tokens, speed = ev.get("tokens"), ev.get("tokens_per_s")
    return Sample(run_id, step, index, prompt, text,
                  tokens if isinstance(tokens, int) else None,
                  float(speed) if isinstance(speed, (int, float)) else None)


def fold(chain_events: list[tuple[str, list[dict[str, Any]]]]) -> list[Sample]:
    """The chain's samples (runs oldest first), redone training dropped, newest first;
    within one step in prompt order."""
    kept: dict[tuple[int, int], Sample] = {}
    for run_id, events in chain_events:
        for ev in events:
            kind, step = ev.get("event"), ev.get("step")
            if not isinstance(step, int):
                continue
            if kind == "start":
                kept = {k: s for k, s in kept.items() if s.step <= step}
            elif kind == "sample":
                s = sample_from(run_id, ev)
                if s is not None:
                    kept[(s.step, s.index)] = s
    return sorted(kept.values(), key=lambda s: (-s.step, s.index))


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class SampleFeed:
    """Follows the samples of one chain (run ids and their events.jsonl, oldest first)."""

    def __init__(self, chain: list[tuple[str, Path]]) -> None:
        self.chain = list(chain)
        self._tails = [EventTail(path) for _, path in self.chain]
        self._events: list[list[dict[str, Any]]] = [[] for _ in self.chain]
        self.samples: list[Sample] = []

    @property
    def run_id(self) -> str | None:
        """The chain's newest run (the one selected)."""
        return self.chain[-1][0] if self.chain else None

    def poll(self) -> bool:
        """Read what the files gained; True when the list changed."""
        grew = False
        for tail, events in zip(self._tails, self._events, strict=True):
            if _size(tail.path) < tail.offset:  # the file was replaced: read anew from its top
                events.clear()
            while True:  # in chunks: a long run's first read holds no whole file in memory
                raw = tail.read_lines(CHUNK)
                if not raw:
                    break
                new, _bad = parse_lines([ln for ln in raw if any(m in ln for m in _WANTED)])
                if new:
                    events.extend(new)
                    grew = True
        if not grew:
            return False
        samples = fold([(run_id, evs) for (run_id, _), evs in zip(self.chain, self._events, strict=True)])
        changed = samples != self.samples
        self.samples = samples
        return changed


def chain_of(registry: Any, run_id: str) -> list[tuple[str, Path]]:
    """The run and the runs it continues, oldest first, as (id, events.jsonl); [] for a
    run no longer in the history."""
    try:
        return [(r.id, r.events_path) for r in registry.lineage(run_id)]
    except KeyError:
        return []


# ---- the list as the tab shows it -----------------------------------------------------

def prompt_style(colors: dict) -> str:
    """A prompt's tint in `colors` (app.window.colors' table for the window's palette)."""
    return f"background-color:{colors['prompt_bg']}; color:{colors['prompt_fg']};"


def _speed(s: Sample) -> str:
    if s.tokens_per_s is None:
        return ""
    return t(f" · {int_text(round(s.tokens_per_s))} ток/с", f" · {int_text(round(s.tokens_per_s))} tokens/s")


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def samples_html(samples: list[Sample], run_names: dict[str, str] | None = None,
                 colors: dict | None = None) -> str:
    """The list as rich text: a heading per step (newest first), each prompt on a tinted
    ground followed by the model's continuation, spaces and line breaks kept; in `colors`
    (app.window.colors' table; the light one by default)."""
    names = run_names or {}
    colors = colors or colour_table(False)
    head, prompt = f"color:{colors['muted']}; margin-top:8px;", prompt_style(colors)
    several = len({s.run_id for s in samples}) > 1
    parts: list[str] = []
    step = None
    for s in samples:
        if s.step != step:
            step = s.step
            where = f" · {_escape(names.get(s.run_id, s.run_id))}" if several else ""
            parts.append(f'<p style="{head}"><b>{t("Шаг", "Step")} {int_text(s.step)}</b>{where}{_speed(s)}</p>')
        parts.append(f'<p style="white-space:pre-wrap; margin:2px 0 6px 0;">'
                     f'<span style="{prompt}">{_escape(s.prompt)}</span>{_escape(s.text)}</p>')
    return "".join(parts)


def continuation_html(prompt: str, text: str, colors: dict | None = None) -> str:
    """The playground's text: the user's prompt tinted, the model's continuation after it."""
    style = prompt_style(colors or colour_table(False))
    return (f'<p style="white-space:pre-wrap;"><span style="{style}">{_escape(prompt)}</span>'
            f"{_escape(text)}</p>")


def empty_text(config: dict[str, Any] | None) -> str:
    """What the list says when it has nothing to show: `config` is the selected run's
    run.json (None: no run selected). In words a newcomer has, not run.json's keys."""
    if config is None:
        return t("Выберите прогон во вкладке «История»: здесь будут его образцы текста.",
                 "Select a run in the «History» tab: its text samples appear here.")
    defaults = TrainingConfig()
    training = config.get("training") or {}
    if not _whole(training.get("sample_tokens"), defaults.sample_tokens):
        return t("Этот прогон образцов текста не пишет (их длина в его настройках — 0). Как пишет "
                 "модель, покажет «Написать» справа.",
                 "This run writes no text samples (their length is 0 in its settings). «Write» on the "
                 "right shows how the model writes.")
    every = _whole(training.get("sample_every"), defaults.sample_every) or _whole(
        training.get("eval_every"), defaults.eval_every)
    return t(f"Образцов текста пока нет. Обучение пишет их каждые {int_text(every)} "
             f"{plural_ru(every, 'шаг', 'шага', 'шагов')} и в конце: модель продолжает начала нескольких "
             "текстов из отложенной выборки.",
             f"No text samples yet. Training writes them every {int_text(every)} step(s) and at the end: "
             "the model continues the openings of a few held-out texts.")


def _whole(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def summary_text(samples: list[Sample]) -> str:
    """One line over the list: how many steps, the newest."""
    if not samples:
        return ""
    steps = len({s.step for s in samples})
    return t(f"Образцы {int_text(steps)} {plural_ru(steps, 'шага', 'шагов', 'шагов')}, последний — шаг "
             f"{int_text(samples[0].step)}; сверху новые. "
             "Затравка выделена цветом, дальше — текст модели.",
             f"Samples: {int_text(steps)} step(s), the newest at step {int_text(samples[0].step)}; newest on top. "
             "The prompt is tinted, the model's text follows.")
