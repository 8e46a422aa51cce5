"""What a Kaggle leg's outputs can hold: its checkpoints against /kaggle/working.

A kernel leaves its checkpoints in /kaggle/working, which Kaggle saves as the session's
outputs and which holds about 20 GB (settings.DEFAULT_OUTPUT_GB; docs/KAGGLE.md). While the
trainer writes a checkpoint, the ones it keeps are still there (it prunes after the new one
is whole), so `keep` checkpoints need room for keep + 1 at once. The rule, before anything
is uploaded:
- keep + 1 fit: the run's training.keep_checkpoints as it is;
- fewer fit, at least two: the kernel keeps as many as fit (down to one) — said;
- not even one with the next being written: the run is refused, with the checkpoint's size
  (a sharded 1.67 B-weight run writes ≈ 20 GB .dcp folders: it cannot train on Kaggle).
The same size bounds a checkpoint's dataset when a leg continues on another account:
Kaggle's datasets take far more than one session's outputs, so no split is ever needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer.config.run_config import lean_mode
from trainer.plan.planner import precision_choice
from trainer.plan.state_bytes import checkpoint_bytes

from ..base.i18n import t
from ..base.numbers import bytes_decimal_text
from ..sizing.formulas import Shape
from ..sizing.gpus import machine_for

# Left in /kaggle/working for the rest of a leg's outputs (events.jsonl, trainer.log,
# run.json): a 12-hour run's logs are some tens of MB.
RESERVE_FRACTION = 0.01


@dataclass(frozen=True)
class OutputRoom:
    checkpoint_bytes: int
    output_bytes: int
    wanted: int    # training.keep_checkpoints
    keep: int      # what the kernel keeps (0: refused)

    @property
    def fits(self) -> bool:
        return self.keep >= 1

    @property
    def room_bytes(self) -> int:
        return int(self.output_bytes * (1 - RESERVE_FRACTION))

    def text(self) -> str:
        """One line: the checkpoint's size against the outputs, and what is done about it."""
        size, whole = bytes_decimal_text(self.checkpoint_bytes), bytes_decimal_text(self.output_bytes)
        if not self.fits:
            return t(
                f"чекпоинт этой модели ≈ {size}, а результаты сессии Kaggle вмещают {whole}: не помещаются даже "
                "два (последний и следующий, пока он пишется) — уменьшите модель (слои, ширину) или обучайте "
                "на своей видеокарте",
                f"this model's checkpoint is ≈ {size} and a Kaggle session's outputs hold {whole}: not even two "
                "fit (the last one and the next while it is written) — make the model smaller (layers, width) "
                "or train on your own card")
        if self.keep < self.wanted:
            return t(f"чекпоинт ≈ {size}; в {whole} результатов Kaggle помещается {self.keep + 1}: ядро хранит "
                     f"{self.keep} (а не {self.wanted})",
                     f"checkpoint ≈ {size}; Kaggle's {whole} of outputs hold {self.keep + 1}: the kernel keeps "
                     f"{self.keep} (not {self.wanted})")
        return t(f"чекпоинт ≈ {size}; {self.keep} помещаются в {whole} результатов Kaggle",
                 f"checkpoint ≈ {size}; {self.keep} fit in Kaggle's {whole} of outputs")


def config_checkpoint_bytes(config: dict[str, Any]) -> int:
    """One checkpoint's size for a run.json on Kaggle's T4s, in the precision the plan gives
    it there (trainer.plan.planner.precision_choice: auto is fp16 on a T4)."""
    m, tr = config.get("model") or {}, config.get("training") or {}
    shape = Shape(int(m.get("layers", 8)), int(m.get("width", 512)), int(m.get("heads", 8)),
                  int(m.get("context", 1024)), int(m.get("vocab", 4000)))
    precision = precision_choice(str(tr.get("precision", "auto")), machine_for("t4x2")).value
    return checkpoint_bytes(shape, precision, lean_mode(tr.get("lean_state", False)))


def output_room(config: dict[str, Any], output_bytes: int) -> OutputRoom:
    """How many checkpoints a leg of this run keeps in `output_bytes` of outputs (0: none fit)."""
    size = config_checkpoint_bytes(config)
    wanted = int((config.get("training") or {}).get("keep_checkpoints", 3))
    at_once = int(output_bytes * (1 - RESERVE_FRACTION)) // max(1, size)
    return OutputRoom(size, output_bytes, wanted, max(0, min(wanted, at_once - 1)))
