"""Why a run failed, and what to do about it, for the window and the CLI.

The trainer's `error` event carries `kind` (oom, nan, data, other), its own message and
advice (English, for the log). Here it becomes a Failure with advice in the interface
language and, where a retry makes sense, the config that retries it.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from trainer.config.run_config import smaller_batch

from ..base import run_status as st
from ..base.i18n import said, t
from ..base.memory_saving import economical_level, economical_step_up
from ..base.numbers import format_value, plural_ru, sig_text
from ..base.stored_text import shown
from .events import Event

VANISHED = "vanished"  # no `end` event and no process: killed, or the PC went down
VANISHED_MESSAGE = "the trainer process disappeared"
# How the trainer says a write found no room (trainer/checkpoint.py, trainer/events.py pass
# the OS's own words on): a full disk, a quota, a file-size limit.
NO_ROOM_WORDS = ("[Errno 28]", "[Errno 27]", "[Errno 122]", "No space left", "File too large",
                 "Disk quota exceeded", "the disk holding it is full")


@dataclass
class Failure:
    kind: str                      # oom, nan, data, other, vanished
    message: str                   # what happened (the trainer's words)
    advice: str                    # what to do, in the interface language (a Said: both kept for a later reader)
    step: int | None = None
    checkpoint: str | None = None  # the newest intact checkpoint, if any
    batch: int | None = None       # the batch that failed (oom)
    suggested_batch: int | None = None
    tokens_per_step: int | None = None  # what the failed run trained per step (oom: kept)
    lr: float | None = None        # the learning rate that diverged (nan)
    suggested_lr: float | None = None
    file: str | None = None        # the data file or folder at fault (data)

    started: bool = True           # whether training had begun (a config error has not)

    @property
    def no_room(self) -> bool:
        """Whether it failed because a disk was full (room, not the run, is at fault)."""
        return any(w in self.message for w in NO_ROOM_WORDS)

    @property
    def can_retry(self) -> bool:
        """Whether running it again could help; a bad config or missing data must be fixed first."""
        if self.kind == "oom":
            return bool(self.suggested_batch)
        if self.kind == "nan":
            return bool(self.suggested_lr)
        return self.kind == VANISHED or (self.kind == "other" and self.started)

    def retry_label(self, lang: str | None = None) -> str | None:
        """The retry button's text, or None when a retry cannot help (fix the data first)."""
        if self.kind == "oom" and self.suggested_batch:
            return t(f"Повторить с батчем {self.suggested_batch}", f"Retry with batch {self.suggested_batch}", lang)
        if self.kind == "nan" and self.suggested_lr:
            return t(f"Повторить с lr {sig_text(self.suggested_lr, 2, 'ru')}",
                     f"Retry with lr {sig_text(self.suggested_lr, 2, 'en')}", lang)
        if self.can_retry:
            return t("Повторить", "Retry", lang)
        return None

    def retry_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """The failed run's run.json changed as the advice says; it continues from the
        newest intact checkpoint when there is one."""
        new = copy.deepcopy(config)
        training = new.setdefault("training", {})
        if self.kind == "oom" and self.suggested_batch:
            training["batch_per_card"] = self.suggested_batch
            # The step's tokens stay: the smaller batch makes more micro-steps (gradient
            # accumulation), so the retry optimises as the failed run did.
            if self.tokens_per_step:
                training["tokens_per_step"] = self.tokens_per_step
        elif self.kind == "nan" and self.suggested_lr:
            training["lr"] = self.suggested_lr
        if self.checkpoint:
            new["resume_from"] = self.checkpoint
        return new


def _data_file(message: str) -> str | None:
    """The file or folder a trainer data error names."""
    m = re.match(r"(\S+) lacks ", message)  # "<dir> lacks train.bin, ...": the folder
    if m:
        return m.group(1)
    m = re.search(r"data\.dir '([^']+)'", message)
    if m:
        return m.group(1)
    m = re.search(r"(\S+\.(?:bin|json))\b", message)
    return m.group(1).strip("'\"") if m else None


def failure_from_events(events: list[Event], config: dict[str, Any] | None = None) -> Failure | None:
    """The Failure the last `error` event describes (None if the run has none)."""
    at = next((i for i in range(len(events) - 1, -1, -1) if events[i].get("event") == "error"), None)
    if at is None:
        return None
    err = events[at]
    # Which run of the trainer failed: the last `start` before the error, if any.
    started = any(e.get("event") == "start" for e in events[:at])
    training = (config or {}).get("training") or {}
    kind = str(err.get("kind") or "other")
    message = str(err.get("message") or "")
    f = Failure(kind=kind, message=message, advice="", step=err.get("step"), checkpoint=err.get("checkpoint"),
                started=started)
    if kind == "oom":
        f.batch = training.get("batch_per_card")
        start = next((e for e in reversed(events[:at]) if e.get("event") == "start"), {})
        f.tokens_per_step = err.get("tokens_per_step") or start.get("tokens_per_step") or None
        micro = int(start.get("accumulation") or 1)
        f.suggested_batch = err.get("suggested_batch") or (smaller_batch(f.batch, micro) if f.batch else None)
        kept = f.tokens_per_step and f.batch and f.suggested_batch and f.batch > f.suggested_batch
        more = f.batch * micro // f.suggested_batch if kept else None
        # The economical mode's next level, if there is one, keeps the batch (and so the
        # training's dynamics) as it is: offered beside the smaller batch.
        level = economical_level(training.get("economical")) or "off"
        level_up, level_up_en = economical_step_up(level, "ru"), economical_step_up(level, "en")
        if f.batch and f.batch > 1:
            f.advice = said(
                f"Не хватило памяти видеокарты. Уменьшите «Батч на карту» с {f.batch} до {f.suggested_batch}"
                + (f" ({more} {plural_ru(more, 'микрошаг', 'микрошага', 'микрошагов')} вместо {micro}: "
                   "токенов за шаг столько же, обучение то же)" if more else "")
                + (f" или {level_up} — батч останется прежним." if level_up else "."),
                f"The GPU ran out of memory. Lower “Batch per card” from {f.batch} to {f.suggested_batch}"
                + (f" ({more} micro-steps instead of {micro}: the same tokens per step, the same training)" if more else "")
                + (f", or {level_up_en} and keep the batch." if level_up_en else "."),
            )
        else:
            f.suggested_batch = None
            # The economical mode helps only up to its full level: the next level, or
            # nothing when the run already used the full one.
            f.advice = said(
                "Не помещается даже батч 1: уменьшите контекст или размер модели"
                + (f", или {level_up}." if level_up else "."),
                "Even batch 1 does not fit: lower the context or the model size"
                + (f", or {level_up_en}." if level_up_en else "."),
            )
    elif kind == "nan":
        f.lr = training.get("lr")
        f.suggested_lr = float(f"{f.lr / 3:.2g}") if isinstance(f.lr, (int, float)) else None
        lower_ru = f" с {format_value(f.lr, 'ru')} до {format_value(f.suggested_lr, 'ru')}" if f.suggested_lr else ""
        lower_en = f" from {format_value(f.lr, 'en')} to {format_value(f.suggested_lr, 'en')}" if f.suggested_lr else ""
        f.advice = said(
            f"Loss стал NaN: обучение разошлось. Уменьшите скорость обучения{lower_ru} и продолжите с "
            "последнего чекпоинта.",
            f"The loss became NaN: training diverged. Lower the learning rate{lower_en} and continue from the "
            "last checkpoint.",
        )
    elif kind == "data":
        f.file = _data_file(message)
        where = f.file or message
        f.advice = said(
            f"Данные не читаются: {where}. Подготовьте данные заново (панель данных или `ternit data prepare`).",
            f"The data cannot be read: {where}. Prepare the data again (the data panel or `ternit data prepare`).",
        )
    elif not started:
        f.advice = said(
            f"Обучение не началось: {message}. Исправьте настройки прогона и запустите снова.",
            f"Training did not start: {message}. Fix the run's settings and start again.",
        )
    else:
        # The trainer's own advice is English (it ships alone to Kaggle) and, for an
        # unexpected error, says only where the traceback is: the Russian text says it.
        extra = str(err.get("advice") or "").strip()
        f.advice = said(
            "Обучение остановилось с ошибкой. Подробности и трассировка — в trainer.log.",
            f"Training stopped with an error. {extra + '. ' if extra else ''}Details are in trainer.log."
            .replace("..", "."),
        )
    return f


def vanished(last_step: int | None, checkpoint: str | None, log_line: str | None = None) -> Failure:
    """A run whose process is gone without an `end` event. `log_line`: the last line the
    trainer wrote for humans (its events are not news), shown as the message."""
    return Failure(
        kind=VANISHED,
        message=t(f"Последняя строка trainer.log: {log_line}", f"The last line of trainer.log: {log_line}")
        if log_line else "",
        advice=said(
            "Процесс обучения пропал (его завершили или компьютер выключился). "
            + ("Продолжите с последнего чекпоинта." if checkpoint else "Чекпоинта нет: запустите заново."),
            "The trainer process disappeared (it was killed, or the computer went down). "
            + ("Continue from the last checkpoint." if checkpoint else "There is no checkpoint: start again."),
        ),
        step=last_step,
        checkpoint=checkpoint,
    )


def kaggle_failed(last_step: int | None, checkpoint: str | None, message: str, pushed: bool) -> Failure:
    """A Kaggle run that failed with no trainer `error` event: the lab could not start it
    (no quota, a refused key or push: the message says which), or its kernel ended
    without the trainer's result (the message carries the kernel log's last lines)."""
    if not pushed:
        advice = said("Прогон не дошёл до Kaggle: устраните причину выше (аккаунт, квота, сеть) и нажмите «Повторить».",
                   "The run did not reach Kaggle: deal with the reason above (account, quota, network) and press Retry.")
    else:
        advice = said(
            "Ядро Kaggle завершилось без итога обучения; его журнал — в trainer.log прогона. "
            + ("Продолжите с последнего чекпоинта." if checkpoint else "Чекпоинта нет: запустите заново."),
            "The Kaggle kernel ended without the trainer's result; its log is in the run's trainer.log. "
            + ("Continue from the last checkpoint." if checkpoint else "There is no checkpoint: start again."),
        )
    return Failure(kind=VANISHED, message=message, advice=advice, step=last_step, checkpoint=checkpoint)


_VANISHED_FORMS = re.compile(
    r"^" + re.escape(VANISHED_MESSAGE) + r"(?: \((?:last line of trainer\.log: (?P<line>.*)|(?P<adopted>found again in the run folders))\))?$",
    re.DOTALL,
)


def shown_message(message: str | None, lang: str | None = None) -> str | None:
    """A run's stored last message as the history shows it: the lab's own English record
    of a vanished trainer, and the trainer's end messages («reached step 60»), in the
    interface language; anything else (the trainer's error text) as it is."""
    message = shown(message, lang) if message else message  # stored in both languages, counters live
    m = _VANISHED_FORMS.match(message or "")
    if m is None:
        return st.trainer_end_text(message or "", lang) or message
    text = t("Процесс обучения пропал", "The trainer process disappeared", lang)
    if m.group("line"):
        text += t(f" (последняя строка trainer.log: {m.group('line')})",
                  f" (the last line of trainer.log: {m.group('line')})", lang)
    elif m.group("adopted"):
        text += t(" (найден снова в папках прогонов)", " (found again in the run folders)", lang)
    return text
