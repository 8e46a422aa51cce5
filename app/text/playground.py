"""The «Текст» tab's playground and evaluation: what to start, and what its lines mean.

The model runs in the child `python -m trainer.text.sample` (app.text.generation builds its command
line and reads its JSON lines; the window never imports torch). This module decides which
checkpoint a chain of runs offers, checks the user's numbers, gives the argv and the
prompt for the child, and turns the bytes the child writes into the text shown so far and
a status line (where it runs, how fast, how it ended). The window's view only starts the
process, feeds `Session.feed()` and shows `text` and `status`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.i18n import t
from ..base.numbers import int_text
from . import generation as gen
from .generation import GenerationError, Settings, Target

# The playground's controls: (lowest, highest, default). Length up to what one click
# sensibly waits for on a CPU; temperature to 2 (beyond, text is noise); top-k 0 = all.
TOKENS = (1, 2000, 200)
TEMPERATURE = (0.0, 2.0, 0.8)
TOP_K = (0, 1000, 40)
DEVICES = ("auto", "cpu", "cuda")


def device_label(device: str) -> str:
    return {"auto": t("авто", "auto"), "cpu": t("процессор", "CPU"), "cuda": t("видеокарта", "GPU")}[device]


def temperature_tip() -> str:
    return t(
        "Температура — насколько смело модель выбирает\n"
        "следующий токен.\n"
        "0 — всегда самый вероятный: текст ровный,\n"
        "но быстро повторяется по кругу.\n"
        "0,7–1 — обычно: живо и ещё связно.\n"
        "Выше 1 — неожиданнее, но больше бессмыслицы.\n"
        "То же зерно и те же настройки — тот же текст.",
        "Temperature: how boldly the model picks the\n"
        "next token.\n"
        "0 always takes the likeliest one: even text\n"
        "that soon repeats itself in circles.\n"
        "0.7–1 is usual: lively and still coherent.\n"
        "Above 1: more surprising, but more nonsense.\n"
        "The same seed and settings give the same text.")


def top_k_tip() -> str:
    return t(
        "Top-k — из скольких самых вероятных токенов\n"
        "выбирается следующий.\n"
        "40 — обычно: редкие, случайные слова отсечены.\n"
        "1 — всегда самый вероятный (как температура 0).\n"
        "0 — без ограничения: любой токен, даже редкий.\n"
        "Меньше — осторожнее, больше — разнообразнее.",
        "Top-k: among how many of the likeliest tokens\n"
        "the next one is chosen.\n"
        "40 is usual: rare, random words are cut off.\n"
        "1 always takes the likeliest (as temperature 0).\n"
        "0: no limit, any token, even a rare one.\n"
        "Lower is more careful, higher more varied.")


def tokens_tip() -> str:
    return t("Сколько токенов дописать (токен — слово или его часть).\n"
             "Текст может кончиться раньше, на конце документа.",
             "How many tokens to write (a token: a word or its part).\n"
             "The text may end sooner, at the end of a document.")


def chain_target(chain: list[Any]) -> Target:
    """The newest usable checkpoint of a chain (RunRecords, oldest first): the selected
    run's own, else the one it continues from (a continuation that has not saved yet)."""
    if not chain:
        raise GenerationError(t("Выберите прогон во вкладке «История».", "Select a run in the «History» tab."))
    first: GenerationError | None = None
    for rec in reversed(chain):
        try:
            return gen.run_target(Path(rec.folder), rec.id)
        except GenerationError as e:
            first = first or e
    assert first is not None
    raise first


@dataclass
class Request:
    prompt: str
    tokens: int = TOKENS[2]
    temperature: float = TEMPERATURE[2]
    top_k: int = TOP_K[2]
    device: str = "auto"
    seed: int | None = None  # None: a new one per click (said in the status)


def sample_command(target: Target, req: Request) -> tuple[list[str], str, int]:
    """(argv, the prompt for the child's stdin, the seed) for one continuation; a refused
    number raises GenerationError in the interface language."""
    seed = req.seed if req.seed is not None else random.randrange(1 << 31)
    s = Settings(tokens=req.tokens, temperature=req.temperature, top_k=req.top_k, seed=seed, num=1,
                 device=req.device if req.device in DEVICES else "auto")
    s.check()
    return gen.sample_argv(target, s), req.prompt, seed


def eval_command(target: Target, file: Path, device: str = "auto") -> list[str]:
    if not Path(file).is_file():
        raise GenerationError(t(f"нет файла {file}: выберите текстовый файл", f"no file {file}: choose a text file"))
    return gen.eval_argv(target, Path(file), device if device in DEVICES else "auto")


class Session:
    """One child's output as it comes: `feed(bytes)` → `text` (the continuation so far),
    `status` (one line), `result` (evaluation's text), `error`; `finish(code, stderr)`
    once it exited; `cancel()` when the user pressed «Стоп»."""

    def __init__(self, kind: str, seed: int | None = None, notes: list[str] | None = None) -> None:
        self.kind = kind  # "sample" or "eval"
        self.seed = seed
        self.notes = list(notes or [])  # what the choice of the checkpoint passed over (Target.notes)
        self.text = ""
        self.result = ""
        self.error = ""
        self.where = ""
        self.status = t("Запуск… (модель загружается в отдельном процессе)",
                        "Starting… (the model loads in a process of its own)")
        self.ended = False
        self._buffer = b""
        self._outcome = False  # a done/eval/error line arrived

    def feed(self, data: bytes) -> bool:
        """Take a chunk of the child's stdout; True when something shown changed."""
        self._buffer += data
        *complete, self._buffer = self._buffer.split(b"\n")
        changed = False
        for line in complete:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "kind" in record:
                changed = self._take(record) or changed
        return changed

    def _take(self, r: dict[str, Any]) -> bool:
        kind = r["kind"]
        if kind == "start":
            self.where = "; ".join([gen.start_text(r), *self.notes])
            self.status = self.where + (t(f"; зерно {self.seed}", f"; seed {self.seed}") if self.seed is not None else "")
            if self.kind == "eval":
                self.status = t("Оценка на файле… ", "Evaluating on the file… ") + self.status
        elif kind == "text":
            self.text += str(r.get("text", ""))
        elif kind == "done":
            self._outcome = True
            self.text = str(r.get("text", self.text))
            speed = r.get("tokens_per_s")
            how = t("дописан до конца документа", "ended at a document's end") if r.get("stopped") == "eot" else ""
            done = t(f"готово: {int_text(int(r.get('tokens') or 0))} ток.", f"done: {int_text(int(r.get('tokens') or 0))} tokens")
            if isinstance(speed, (int, float)):
                done += t(f", {int_text(round(speed))} ток/с", f", {int_text(round(speed))} tokens/s")
            self.status = "; ".join(x for x in (self.where, done, how) if x)
        elif kind == "eval":
            self._outcome = True
            self.result = gen.eval_text(r)
            self.status = self.where or t("оценка готова", "evaluation done")
        elif kind == "error":
            self._outcome = True
            self.error = gen.error_text(r)
            self.status = self.error
        else:
            return False
        return True

    def finish(self, code: int, stderr: str) -> None:
        """The child exited (not by «Стоп»): a crash without an error line is said too."""
        if self.ended:
            return
        self.ended = True
        if code != 0 and not self._outcome:
            self.error = gen.failure_text(code, stderr)
            self.status = self.error

    def cancel(self) -> None:
        if self.ended:
            return
        self.ended = True
        self.status = t("Остановлено: процесс генерации завершён.", "Stopped: the generation process has ended.")
        if self.where:
            self.status = self.where + "; " + self.status
