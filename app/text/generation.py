"""Text from a run's checkpoint, and its loss on a file: what `ternit sample`, `ternit eval`
and the window's «Текст» tab share.

The work needs torch, so it runs in a child process (`python -m trainer.text.sample`, which
speaks JSON lines, see its docstring); this module finds the checkpoint and the tokenizer,
checks the numbers before anything starts, builds the child's command line, reads its lines
and says its errors in the interface language.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.text.sampling import (
    DEFAULT_NUM,
    DEFAULT_SEED,
    DEFAULT_TOKENS,
    Sampling,
    request_problem,
)

from ..base.children import child_env  # the window's QProcess starts the child with it too
from ..base.i18n import t
from ..base.numbers import decimal_text, int_text
from ..base.plan_texts import text as refusal_text
from ..runs.checkpoints import choose_checkpoint, inspect_checkpoint, is_checkpoint

EXIT_INPUT = 2


class GenerationError(Exception):
    """What the user must change (a missing checkpoint, a bad number), in the interface language."""

    def __init__(self, message: str, exit_code: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.message, self.exit_code = message, exit_code


@dataclass
class Target:
    checkpoint: Path
    tokenizer: Path | None  # None: the data folder the checkpoint names
    run_id: str | None = None
    notes: list[str] = field(default_factory=list)  # what the choice passed over or found, to say


_SAMPLING = Sampling()  # the defaults are trainer.text.sampling's, as `python -m trainer.text.sample`'s


@dataclass
class Settings:
    tokens: int = DEFAULT_TOKENS
    temperature: float = _SAMPLING.temperature
    top_k: int = _SAMPLING.top_k
    top_p: float = _SAMPLING.top_p
    seed: int = DEFAULT_SEED
    num: int = DEFAULT_NUM
    device: str = "auto"

    def check(self) -> None:
        """The child's own check (trainer.text.sampling), said before it starts."""
        problem = request_problem(Sampling(self.temperature, self.top_k, self.top_p), self.tokens, self.num)
        if problem:
            raise GenerationError(refusal_text(problem))


def _run_tokenizer(run_dir: Path) -> Path | None:
    try:
        cfg = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        data_dir = cfg["data"]["dir"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Path(data_dir) / "tokenizer.json" if data_dir else None


def run_target(run_dir: Path, run_id: str | None = None) -> Target:
    """A run folder's checkpoint (`choose_checkpoint`, the one choice every command makes)
    and its data's tokenizer."""
    choice = choose_checkpoint(run_dir)
    if choice.path is None and choice.passed_over:
        raise GenerationError(t(
            f"у прогона {run_id or run_dir} нет целого чекпоинта ({'; '.join(choice.passed_over)})",
            f"run {run_id or run_dir} has no intact checkpoint ({'; '.join(choice.passed_over)})"))
    if choice.path is None:
        raise GenerationError(t(
            f"у прогона {run_id or run_dir} ещё нет чекпоинта: подождите первого сохранения или продолжите прогон",
            f"run {run_id or run_dir} has no checkpoint yet: wait for its first save or continue the run"))
    tokenizer = _run_tokenizer(run_dir)
    if tokenizer is not None and not tokenizer.is_file():
        raise GenerationError(t(
            f"нет токенизатора прогона {tokenizer}: подготовьте данные прогона заново (ternit data prepare)",
            f"the run's tokenizer {tokenizer} is missing: prepare the run's data again (ternit data prepare)"))
    return Target(choice.path, tokenizer, run_id, choice.said())


def target_help() -> str:
    """What `ternit sample` and `ternit eval` take as their first argument (resolve's input)."""
    return t("ID прогона (его последний чекпоинт) или чекпоинт: файл .pt либо папка .dcp сегментированного прогона",
             "a run id (its latest checkpoint) or a checkpoint: a .pt file or a sharded run's .dcp folder")


def resolve(spec: str) -> Target:
    """RUN_ID (or a unique part of one) → its latest checkpoint; else a checkpoint (a file,
    or a sharded run's folder)."""
    path = Path(spec)
    if is_checkpoint(path):  # a step-*.pt file or a sharded run's step-*.dcp folder
        seen = inspect_checkpoint(path)
        if seen.path is None:
            raise GenerationError("; ".join(seen.passed_over))
        return Target(path, None, notes=seen.said())
    from ..runs import Registry, RunNotFound

    reg = Registry()
    try:
        rec = reg.find(spec)
    except (RunNotFound, LookupError) as e:
        detail = f" ({e.args[0]})" if isinstance(e, LookupError) and not isinstance(e, RunNotFound) else ""
        raise GenerationError(t(
            f"{spec} — не файл чекпоинта и не прогон{detail}: укажите ID из `ternit run list` или путь к чекпоинту (.pt или .dcp)",
            f"{spec} is neither a checkpoint file nor a run{detail}: give an id from `ternit run list` or a checkpoint path (.pt or .dcp)")) from None
    finally:
        reg.close()
    return run_target(Path(rec.folder), rec.id)


def _base(target: Target, command: str, device: str, *positional: str) -> list[str]:
    argv = [sys.executable, "-m", "trainer.text.sample", command, str(target.checkpoint), *positional, "--device", device]
    if target.tokenizer is not None:
        argv += ["--tokenizer", str(target.tokenizer)]
    return argv


def sample_argv(target: Target, s: Settings) -> list[str]:
    return _base(target, "sample", s.device) + [
        "--tokens", str(s.tokens), "--temperature", repr(s.temperature), "--top-k", str(s.top_k),
        "--top-p", repr(s.top_p), "--seed", str(s.seed), "--num", str(s.num)]


def eval_argv(target: Target, file: Path, device: str = "auto") -> list[str]:
    return _base(target, "eval", device, str(file))


def start(argv: list[str], prompt: str = "") -> subprocess.Popen:
    """The child, its prompt already on its stdin; stdout read line by line as it comes."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(), text=True, encoding="utf-8", bufsize=1,
                            creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    assert proc.stdin is not None
    try:
        proc.stdin.write(prompt)
        proc.stdin.close()
    except OSError:  # the child died at once; its exit code says why
        pass
    return proc


def lines(proc: subprocess.Popen) -> Iterator[dict[str, Any]]:
    """The child's records as they come (anything else on stdout is skipped)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "kind" in record:
            yield record


def stop(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """End the child now (terminate, then kill) and reap it: no process is left behind."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


_WHAT = {
    "checkpoint": ("Чекпоинт не читается", "The checkpoint cannot be used",
                   "выберите другой чекпоинт", "choose another checkpoint"),
    "tokenizer": ("Токенизатор не подходит", "The tokenizer does not fit",
                  "подготовьте данные прогона заново или укажите токенизатор, с которым он обучен",
                  "prepare the run's data again or point to the tokenizer it was trained with"),
    "file": ("Файл не подходит", "The file cannot be used", "выберите текстовый файл в UTF-8",
             "choose a UTF-8 text file"),
    "value": ("Значение не подходит", "A value is refused", "исправьте его", "correct it"),
    # The trainer's line (in brackets) says what to install for the card (trainer/plan/cuda_build.py).
    "device": ("Видеокарта недоступна", "The GPU cannot be used",
               "установите сборку torch, названную в скобках, или выберите устройство cpu",
               "install the torch build named in brackets, or choose the cpu device"),
}


def error_text(record: dict[str, Any]) -> str:
    """A child's error record in the interface language; its own (English) line follows as detail."""
    ru, en, do_ru, do_en = _WHAT.get(str(record.get("what")), _WHAT["value"])
    return t(f"{ru}: {do_ru}. ({record.get('message')})", f"{en}: {do_en}. ({record.get('message')})")


def failure_text(code: int, stderr: str) -> str:
    """A child that ended without an error record (a crash, out of memory)."""
    last = next((x for x in reversed(stderr.strip().splitlines()) if x.strip()), "")
    return t(f"генерация прервалась (код {code}): {last or 'без сообщения'}",
             f"generation failed (exit {code}): {last or 'no message'}")


def start_text(record: dict[str, Any]) -> str:
    """The child's first line: where it runs, from which step, and a cropped prompt's notice."""
    where = t("видеокарта", "GPU") if record.get("device") == "cuda" else t("процессор", "CPU")
    text = t(f"устройство: {where}, чекпоинт шага {int_text(int(record.get('step', 0)))}",
             f"device: {where}, checkpoint of step {int_text(int(record.get('step', 0)))}")
    if record.get("cpu_because"):  # a card is there, but this torch cannot drive it
        text += t(f"; на процессоре, а не на видеокарте: {record['cpu_because']}",
                  f"; on the CPU, not the GPU: {record['cpu_because']}")
    dropped = int(record.get("dropped") or 0)
    if dropped:
        text += t(f"; затравка длиннее контекста: первые {int_text(dropped)} токенов отброшены",
                  f"; the prompt is longer than the context: its first {int_text(dropped)} tokens were dropped")
    return text


def _fmt(x: float, digits: int = 3) -> str:
    return decimal_text(x, digits)


def eval_text(r: dict[str, Any]) -> str:
    """`ternit eval`'s result in words."""
    lo, hi = r["loss_ci95"]
    blo, bhi = r["bpb_ci95"]

    def ci(a: float, b: float) -> str:  # one segment has no interval
        return f" (95 %: {_fmt(a)}…{_fmt(b)})" if math.isfinite(a) else ""

    return "\n".join([
        t("потери на токен:  ", "loss per token:   ") + _fmt(r["loss"]) + ci(lo, hi),
        t("перплексия:       ", "perplexity:       ") + _fmt(r["perplexity"], 2),
        t("бит на байт:      ", "bits per byte:    ") + _fmt(r["bits_per_byte"]) + ci(blo, bhi),
        t(f"токенов {int_text(r['tokens'])}, байт {int_text(r['bytes'])}, отрезков {r['segments']}",
          f"{int_text(r['tokens'])} tokens, {int_text(r['bytes'])} bytes, {r['segments']} segments"),
    ])
