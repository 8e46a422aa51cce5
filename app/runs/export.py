"""Exporting a checkpoint's weights as safetensors (the history's «Экспорт весов»), or as a
Hugging Face folder (`fmt="hf"`: GPT2LMHeadModel with its tokenizer).

The export loads the checkpoint with torch, so it runs as its own process:
`python -m trainer.model.export CKPT OUT [--format hf --tokenizer TOKENIZER.json]`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..base.children import child_env
from ..base.i18n import t
from ..base.numbers import int_text
from .checkpoints import is_checkpoint


@dataclass
class ExportResult:
    ok: bool
    checkpoint: str
    out: str
    message: str  # the exporter's own output, or why it failed
    code: int = 0  # the exporter's exit code (EXIT_CHECKPOINT: the checkpoint could not be read)


EXIT_CHECKPOINT = 2  # trainer/model/export.py's code for a checkpoint it cannot load


def export_checkpoint(checkpoint: Path | str, out: Path | str, timeout: float | None = None,
                      fmt: str = "safetensors", tokenizer: Path | str | None = None) -> ExportResult:
    """Run the exporter and wait for it; the file (or, for "hf", the folder) appears at
    `out` only when complete. `tokenizer`: the prepared data's tokenizer.json for "hf"
    (else the exporter looks in the checkpoint's data folder)."""
    checkpoint, out = Path(checkpoint).resolve(), Path(out).resolve()
    if not is_checkpoint(checkpoint):  # a step-*.pt file or a sharded run's step-*.dcp folder
        return ExportResult(False, str(checkpoint), str(out), t(f"Чекпоинта {checkpoint} нет.", f"Checkpoint {checkpoint} does not exist."),
                            EXIT_CHECKPOINT)
    argv = [sys.executable, "-m", "trainer.model.export", str(checkpoint), str(out)]
    if fmt == "hf":
        argv += ["--format", "hf"] + (["--tokenizer", str(tokenizer)] if tokenizer else [])
    try:
        done = subprocess.run(
            argv,
            capture_output=True, encoding="utf-8", errors="replace", env=child_env(), timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return ExportResult(False, str(checkpoint), str(out), t("Экспорт не уложился во время.", "The export timed out."))
    text = (done.stdout + done.stderr).strip()
    ok = done.returncode == 0 and (out / "config.json" if fmt == "hf" else out).is_file()
    if ok and fmt == "hf":
        meta = _metadata(out / "model.safetensors")
        params, step = meta.get("ternit_params", "?"), meta.get("ternit_step", "?")
        params = f"{int(params):,}" if params.isdigit() else params
        text = t(f"папка Hugging Face записана: {out} ({params.replace(',', ' ')} весов, шаг {step}; "
                 "загружается как GPT2LMHeadModel)",
                 f"Hugging Face folder written: {out} ({params} weights, step {step}; loads as GPT2LMHeadModel)")
    elif ok:
        # The exporter (trainer/, which cannot use the lab's texts) says it in English; the
        # same facts from the file itself, in the interface language.
        meta = _metadata(out)
        params, step = meta.get("params", "?"), meta.get("step", "?")
        ru, en = (int_text(int(params), "ru"), int_text(int(params), "en")) if params.isdigit() else (params, params)
        text = t(f"веса записаны: {out} ({ru} весов, шаг {step})",
                 f"weights written: {out} ({en} weights, step {step})")
    elif done.returncode in FAILURES:
        # The exporter's line is English (trainer/ has no interface texts): the lab says
        # what happened and what to do in the interface language, the line follows as detail.
        text = FAILURES[done.returncode](checkpoint, out) + "\n" + text
    return ExportResult(ok, str(checkpoint), str(out), text, done.returncode)


# The exporter's exit codes (trainer/model/export.py: EXIT_CHECKPOINT, EXIT_WRITE) → what to tell the user.
FAILURES = {
    EXIT_CHECKPOINT: lambda ckpt, out: t(
        f"Чекпоинт {ckpt} не читается: он повреждён или это не чекпоинт Ternit Lab. Выберите другой чекпоинт.",
        f"Checkpoint {ckpt} cannot be read: it is damaged or not a Ternit Lab checkpoint. Choose another checkpoint."),
    4: lambda ckpt, out: t(
        f"Не удалось записать {out}: папка только для чтения, диск полон или на пути вместо папки лежит файл. "
        "Выберите другое место.",
        f"Could not write {out}: the folder is read-only, the disk is full or a file stands where a folder "
        "should be. Choose another place."),
    5: lambda ckpt, out: t(
        f"Нет токенизатора чекпоинта {ckpt} (данные готовили в другом месте, например на Kaggle) или указан "
        "другой. Укажите --tokenizer с tokenizer.json подготовленных данных прогона.",
        f"The tokenizer of checkpoint {ckpt} is not there (the data was prepared elsewhere, e.g. on Kaggle) or "
        "another one was given. Pass --tokenizer with the tokenizer.json of the run's prepared data."),
}


def _metadata(path: Path) -> dict[str, str]:
    """The __metadata__ of a .safetensors file: an 8-byte little-endian header length, then
    that much JSON (read without torch, which the lab's core never imports)."""
    import json
    import struct

    try:
        with open(path, "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(min(size, 100_000_000)))
        meta = header.get("__metadata__") if isinstance(header, dict) else None
        return {} if not isinstance(meta, dict) else {str(k): str(v) for k, v in meta.items()}
    except (OSError, ValueError, struct.error):
        return {}


def run_tokenizer(config: dict) -> Path | None:
    """The tokenizer.json of a run's prepared data on this computer (run.json data.dir),
    if it is there: a Kaggle checkpoint names the kernel's folder instead."""
    folder = (config.get("data") or {}).get("dir") if isinstance(config, dict) else None
    path = Path(folder) / "tokenizer.json" if folder else None
    return path if path is not None and path.is_file() else None
