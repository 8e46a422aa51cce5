"""The documented set of run statuses, what ends a run, and their labels (RU/EN); the
history's "no such run". The words app.runs (the history) and app.kaggle (which writes
Kaggle legs into it) share: a leaf module, so that neither package imports the other's
insides (app.runs reaches the Kaggle runner only lazily, by name; app/runs/kaggle_bridge.py).
`app.base.run_status` is this module."""

from __future__ import annotations

import re

from .i18n import pick, t

CREATED = "created"
STARTING = "starting"          # process launched, no `start` event yet
RUNNING = "running"
STOPPING = "stopping"          # STOP asked; the trainer is saving ("saving…")
FINISHED = "finished"          # reached «Шагов до»
STOPPED = "stopped"            # stopped by the user
TIME_LIMIT = "time_limit"      # «Лимит, мин» (or --stop-at-step) hit; a checkpoint was saved
FAILED = "failed"
UPLOADING = "uploading"        # Kaggle: data/checkpoint going up as datasets
QUEUED = "queued"              # Kaggle: kernel pushed, not running yet
RUNNING_KAGGLE = "running_kaggle"
DOWNLOADING = "downloading"    # Kaggle: fetching the outputs

STATUSES = (
    CREATED, STARTING, RUNNING, STOPPING, FINISHED, STOPPED, TIME_LIMIT, FAILED,
    UPLOADING, QUEUED, RUNNING_KAGGLE, DOWNLOADING,
)
ENDED = frozenset({FINISHED, STOPPED, TIME_LIMIT, FAILED})
LOCAL_ACTIVE = frozenset({STARTING, RUNNING, STOPPING})
KAGGLE_ACTIVE = frozenset({UPLOADING, QUEUED, RUNNING_KAGGLE, DOWNLOADING})
ACTIVE = LOCAL_ACTIVE | KAGGLE_ACTIVE

# The trainer's `end` event reason -> the run's status.
END_REASONS = {
    "steps_reached": FINISHED,
    "time_limit": TIME_LIMIT,
    "stopped": STOPPED,
    "error": FAILED,
}

LABELS = {
    CREATED: {"ru": "создан", "en": "created"},
    STARTING: {"ru": "запускается", "en": "starting"},
    RUNNING: {"ru": "идёт", "en": "running"},
    STOPPING: {"ru": "сохранение…", "en": "saving…"},
    FINISHED: {"ru": "завершён", "en": "finished"},
    STOPPED: {"ru": "остановлен", "en": "stopped"},
    TIME_LIMIT: {"ru": "остановлен по лимиту", "en": "stopped by limit"},
    FAILED: {"ru": "ошибка", "en": "failed"},
    UPLOADING: {"ru": "Kaggle: загрузка данных", "en": "Kaggle: uploading"},
    QUEUED: {"ru": "Kaggle: в очереди", "en": "Kaggle: queued"},
    RUNNING_KAGGLE: {"ru": "идёт на Kaggle", "en": "running on Kaggle"},
    DOWNLOADING: {"ru": "Kaggle: скачивание результатов", "en": "Kaggle: downloading"},
}


def end_text(event: dict, lang: str | None = None) -> str:
    """How a run ended, from the trainer's `end` event, in the interface language: «достигнут
    шаг 30» (the trainer's own line is English, «reached step 30»)."""
    reason, step, message = event.get("reason"), event.get("step"), str(event.get("message") or "")
    texts = {
        "steps_reached": (f"достигнут шаг {step}", f"reached step {step}"),
        "time_limit": (f"остановлен по лимиту времени на шаге {step}", f"stopped by the time limit at step {step}"),
        "stopped": (f"остановлен по запросу на шаге {step}"
                    + (" (в папке прогона есть файл STOP)" if "STOP exists" in message else " (сигнал)"),
                    message or f"stopped on request at step {step}"),  # the trainer's line says which request
    }
    if reason not in texts:
        return f"{reason}: {message}" if message else str(reason)
    ru, en = texts[reason]
    return pick({"ru": ru, "en": en}, lang)


# The trainer's own `end` messages (trainer/train.py, English: the trainer imports nothing of
# the lab), as a run's last message stores them: read back into the reason and its step, to
# be said in the reader's language.
_TRAINER_END = (
    (re.compile(r"^reached step (?P<step>\d+)$"), "steps_reached"),
    (re.compile(r"^stopped by the time limit at step (?P<step>\d+)$"), "time_limit"),
    (re.compile(r"^stopped on request at step (?P<step>\d+) \((?:RUN_DIR/STOP exists|a signal)\)$"), "stopped"),
)


def trainer_end_text(message: str, lang: str | None = None) -> str | None:
    """The trainer's end message in the reader's language («reached step 60» → «достигнут
    шаг 60»); None for any other text."""
    for pattern, reason in _TRAINER_END:
        m = pattern.match(message)
        if m:
            return end_text({"reason": reason, "step": int(m["step"]), "message": message}, lang)
    return None


def label(status: str, lang: str | None = None) -> str:
    """The status as the history shows it, in the interface language."""
    return pick(LABELS[status], lang) if status in LABELS else status


class RunNotFound(KeyError):
    def __str__(self) -> str:  # KeyError would quote the message
        return t(f"прогона {self.args[0]!r} нет в истории (`ternit run list` покажет прогоны)",
                 f"no run {self.args[0]!r} in the history (`ternit run list` shows the runs)")


def check(status: str) -> str:
    if status not in STATUSES:
        raise ValueError(f"unknown run status {status!r} (known: {', '.join(STATUSES)})")
    return status
