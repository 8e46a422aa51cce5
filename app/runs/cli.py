"""`ternit run`: start, list, stop and continue runs — the same app.runs calls the window makes.

Exit codes (with --wait, the run's outcome):
  0  started (without --wait), or finished at «Шагов до», or a stop was asked for
     (`stop --wait`: the run saved and ended, whatever ended it)
  1  the run failed (the reason and the advice are printed)
  2  bad arguments, config or run id
  3  the run stopped at its time limit (a checkpoint is saved: `ternit run continue ID`)
  4  the run was stopped by request
  130  Ctrl+C while following: the training itself goes on (143: SIGTERM, the same)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sqlite3
import sys
import time
from typing import Any

from ..base import paths
from ..base import run_status as st
from ..base.cli_args import Parser
from ..base.i18n import t
from ..base.numbers import count_text, int_text, loss_text
from ..base.state import StateError, unavailable
from ..data.library import LibraryError
from . import status_echo
from .continuing import ContinueError
from .events import Event
from .live import LiveFollower, LiveProgress
from .manager import RunManager
from .precheck import RunError, load_config, normalize_config
from .registry import RunNotFound, RunRecord
from .start_flags import add_field_flags, apply_flags, data_for_cli

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIME_LIMIT, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_TERMINATED = 143  # SIGTERM while following (128 + 15): the training goes on
OUTCOME_CODES = {st.FINISHED: EXIT_OK, st.FAILED: EXIT_FAILED, st.TIME_LIMIT: EXIT_TIME_LIMIT, st.STOPPED: EXIT_STOPPED}


DESCRIPTION_RU = """\
`ternit run`: запуск, список, остановка и продолжение прогонов — то же, что делает окно.

Коды выхода (с --wait — итог прогона):
  0  запущен (без --wait), дошёл до «Шагов до» или остановка запрошена
     (`stop --wait`: прогон сохранился и завершился, чем бы он ни закончился)
  1  прогон упал (причина и совет напечатаны)
  2  неверные аргументы, конфиг или ID прогона
  3  прогон остановлен по лимиту времени (чекпоинт сохранён: `ternit run continue ID`)
  4  прогон остановлен по запросу
  130  Ctrl+C во время слежения: само обучение продолжается (143 — SIGTERM, то же)
"""

DESCRIPTION_EN = """\
`ternit run`: start, list, stop and continue runs — the same calls the window makes.

Exit codes (with --wait, the run's outcome):
  0  started (without --wait), or finished at «Steps to», or a stop was asked for
     (`stop --wait`: the run saved and ended, whatever ended it)
  1  the run failed (the reason and the advice are printed)
  2  bad arguments, config or run id
  3  the run stopped at its time limit (a checkpoint is saved: `ternit run continue ID`)
  4  the run was stopped by request
  130  Ctrl+C while following: the training itself goes on (143: SIGTERM, the same)
"""


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit run", description=t(DESCRIPTION_RU, DESCRIPTION_EN),
               formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, title=t("команды", "commands"))
    run_id = t("ID прогона из `ternit run list` (или его уникальная часть)",
               "a run id from `ternit run list` (or a unique part of it)")
    wait = t("следить за прогоном до конца, печатая ход", "follow the run until it ends, printing progress")
    as_json = t("печатать события строками JSON", "print events as JSON lines")
    stop_at = t("остановиться на этом шаге, как по лимиту времени", "stop at this step as if the time limit hit")
    s = sub.add_parser("start", help=t("запустить прогон по run.json или по полям формы",
                                        "start a run from a run.json or from the form's fields"),
                       description=t(
                           "Без --config нужен хотя бы --constellations: например, `ternit run start "
                           "--constellations demo --layers 4 --width 256 --steps 2000`. Подготовленные "
                           "данные созвездий находятся сами (или готовятся с прогрессом).",
                           "Without --config at least --constellations is needed: e.g. `ternit run start "
                           "--constellations demo --layers 4 --width 256 --steps 2000`. The constellations' "
                           "prepared data is found (or prepared, with progress) by itself."))
    s.add_argument("--config", metavar="RUN.json",
                   help=t("run.json, который обучать (ключи: docs/RUN_JSON.md); флаги полей его дополняют",
                          "the run.json to train (its keys: docs/RUN_JSON.md); field flags override it"))
    s.add_argument("--target", choices=["local", "kaggle"],
                   help=t("где обучать (по умолчанию target.kind из конфига)",
                          "where (default: the config's target.kind)"))
    s.add_argument("--account", metavar=t("ИМЯ", "NAME"),
                   help=t("аккаунт Kaggle: ИМЯ или auto", "Kaggle account NAME or auto"))
    s.add_argument("--gpu", metavar="GPU",
                   help=t("своя видеокарта: auto, cpu или номера, например 0 или 0,1 (по умолчанию из конфига)",
                          "local GPU: auto, cpu or indices such as 0 or 0,1 (default: the config's)"))
    s.add_argument("--stop-at-step", type=int, metavar=t("ШАГ", "STEP"), help=stop_at)
    s.add_argument("--wait", action="store_true", help=wait)
    s.add_argument("--json", action="store_true", help=as_json)
    add_field_flags(s)
    ls = sub.add_parser("list", help=t("история прогонов, новые сверху", "the run history, newest first"))
    ls.add_argument("--limit", type=int, metavar="N", help=t("показать не больше N прогонов", "show at most N runs"))
    ls.add_argument("--json", action="store_true", help=t("вывести список в JSON", "print the list as JSON"))
    sp = sub.add_parser("stop", help=t("попросить прогон сохраниться и остановиться", "ask a run to save and stop"))
    sp.add_argument("id", metavar="ID", help=run_id)
    sp.add_argument("--wait", action="store_true",
                    help=t("дождаться, пока сохранится и завершится", "wait until it has saved and ended"))
    c = sub.add_parser("continue", help=t("продолжить прогон с последнего чекпоинта новым прогоном",
                                          "continue a run from its latest checkpoint as a new run"))
    c.add_argument("id", metavar="ID", help=run_id)
    c.add_argument("--steps-to", type=int, metavar="N",
                   help=t("новое «Шагов до» (по умолчанию как у родителя, или вдвое больше, если он его достиг)",
                          "the new «Steps to» (default: the parent's, or twice it if reached)"))
    c.add_argument("--stop-at-step", type=int, metavar=t("ШАГ", "STEP"), help=stop_at)
    c.add_argument("--from-step", type=int, metavar=t("ШАГ", "STEP"),
                   help=t("продолжить с чекпоинта этого шага, а не с последнего (если тот повреждён)",
                          "continue from this step's checkpoint instead of the newest (when that one is damaged)"))
    c.add_argument("--wait", action="store_true", help=wait)
    c.add_argument("--json", action="store_true", help=as_json)
    w = sub.add_parser("wait", help=t("следить за прогоном до конца (например, после перезапуска лаборатории)",
                                      "follow a run (e.g. after the lab restarted) until it ends"))
    w.add_argument("id", metavar="ID", help=run_id)
    w.add_argument("--json", action="store_true", help=as_json)
    r = sub.add_parser("retry", help=t("повторить упавший прогон, как советует его ошибка (например, с меньшим батчем)",
                                       "retry a failed run as its advice says (e.g. a smaller batch)"))
    r.add_argument("id", metavar="ID", help=run_id)
    r.add_argument("--wait", action="store_true", help=wait)
    r.add_argument("--json", action="store_true", help=as_json)
    sh = sub.add_parser("show", help=t("строка прогона в истории и причина, если он упал",
                                       "one run's row, and why it failed if it did"))
    sh.add_argument("id", metavar="ID", help=run_id)
    _metrics_parser(sub, run_id)
    tb = sub.add_parser("tensorboard", help=t(
        "записать метрики прогонов файлами TensorBoard (для `tensorboard --logdir`)",
        "write runs' metrics as TensorBoard event files (for `tensorboard --logdir`)"))
    tb.add_argument("id", metavar="RUN|all", help=t("ID прогона или all — все прогоны истории",
                                                    "a run id, or all: every run in the history"))
    tb.add_argument("dir", metavar=t("ПАПКА", "DIR"), nargs="?",
                    help=t("записать в ПАПКА/<ID прогона>/, а не в папку tensorboard/ каждого прогона",
                           "write into DIR/<run id>/ instead of each run folder's tensorboard/"))
    return p


def _metrics_parser(sub: Any, run_id: str) -> None:
    mt = sub.add_parser("metrics", help=t("метрики прогона таблицей CSV: шаг, время, loss, lr, токены, валидация",
                                          "a run's metrics as a CSV table: step, time, loss, lr, tokens, validation"))
    mt.add_argument("id", metavar="ID", help=run_id)
    mt.add_argument("--csv", action="store_true",
                    help=t("в формате CSV (он и по умолчанию): строка на шаг, валидация в строке своего шага",
                           "as CSV (the default too): a row per step, validation in its step's row"))
    mt.add_argument("--out", metavar=t("ФАЙЛ", "FILE"),
                    help=t("записать в ФАЙЛ, а не в стандартный вывод", "write to FILE instead of standard output"))
    mt.add_argument("--only-this", action="store_true",
                    help=t("только этот прогон, без прогонов, которые он продолжает",
                           "this run alone, without the runs it continues"))


class Progress:
    """Prints the events of a followed run: steps at most about once a second."""

    def __init__(self, as_json: bool = False, every_s: float = 1.0, out: Any = None) -> None:
        self.as_json = as_json
        self.every_s = every_s
        self.out = out or sys.stdout
        self._last = 0.0
        self._pending: Event | None = None
        self.steps_to: int | None = None
        self.live = LiveProgress()  # speed and time left, as the window's banner says them

    def _print_step(self, ev: Event) -> None:
        self._pending = None
        of = f"/{self.steps_to}" if self.steps_to else ""
        print(
            t("шаг", "step") + f" {ev.get('step')}{of}  loss {_num(ev.get('loss'))}  "
            + f"{_rate(ev.get('tokens_per_s'))} " + t("ток/с", "tok/s")
            + f"  {count_text(ev.get('tokens_seen'))} " + t("токенов", "tokens"),
            file=self.out, flush=True,
        )
        live = self.live.text()
        if live:
            print("  " + live, file=self.out, flush=True)

    def __call__(self, ev: Event) -> None:
        if self.as_json:
            print(json.dumps(ev, ensure_ascii=False), file=self.out, flush=True)
            return
        kind, step = ev.get("event"), ev.get("step")
        self.live.feed(ev)
        if kind != "step" and self._pending is not None:
            self._print_step(self._pending)
        if kind == "start":
            cfg = ev.get("config") or {}
            self.steps_to = (cfg.get("training") or {}).get("steps_to")
            resumed = ev.get("resumed_from")
            print(
                t("старт", "start") + f": {int_text(int(ev.get('params') or 0))} " + t("весов", "weights")
                + f", {ev.get('device')} × {ev.get('world_size')}, {ev.get('precision')}, "
                + f"{ev.get('tokens_per_step')} " + t("токенов/шаг", "tokens/step")
                + (t(f", продолжение с шага {step}", f", resumed at step {step}") if resumed else ""),
                file=self.out, flush=True,
            )
        elif kind == "step":
            now = time.monotonic()
            if now - self._last < self.every_s and step != self.steps_to:
                self._pending = ev  # printed before the next eval/checkpoint/end line
                return
            self._last = now
            self._print_step(ev)
        elif kind == "eval":
            ci = ev.get("val_ci95") or [None, None]
            print(f"  val loss {_num(ev.get('val_loss'))}  (95%: {_num(ci[0])}…{_num(ci[1])})", file=self.out, flush=True)
        elif kind == "checkpoint":
            print(t("  чекпоинт", "  checkpoint") + f": {ev.get('path')}", file=self.out, flush=True)
        elif kind == "pause":
            print(t(f"  пауза {ev.get('seconds')} с", f"  paused {ev.get('seconds')} s"), file=self.out, flush=True)
        elif kind == "warning":
            print(t("предупреждение", "warning") + f": {ev.get('message')}", file=self.out, flush=True)
        elif kind == "error":
            print(t("ошибка", "error") + f" ({ev.get('kind')}): {ev.get('message')}", file=self.out, flush=True)
        elif kind == "end":
            print(t("конец", "end") + ": " + st.end_text(ev), file=self.out, flush=True)


def _num(v: Any) -> str:
    return loss_text(v) if isinstance(v, (int, float)) else str(v)


def _rate(v: Any) -> str:
    return int_text(round(v)) if isinstance(v, (int, float)) else "—"


def _follow(m: RunManager, rec: RunRecord, as_json: bool) -> int:
    print(t(f"следим за {rec.id} (Ctrl+C — перестать следить; обучение продолжится)",
            f"following {rec.id} (Ctrl+C stops following; training goes on)"), file=sys.stderr, flush=True)
    progress = Progress(as_json)
    progress.steps_to = rec.steps_to
    progress.live = LiveFollower.progress_of(rec)
    troubles: set[str] = set()

    def trouble(message: str) -> None:  # said once, not at every poll
        if message not in troubles:
            troubles.add(message)
            print(message, file=sys.stderr, flush=True)

    previous = _leave_on_sigterm()
    try:
        final = m.wait(rec.id, on_event=progress, on_trouble=trouble, on_status=status_echo.StatusLines())
    except (KeyboardInterrupt, _Terminated) as e:
        print(t(f"\nобучение продолжается; остановить: ternit run stop {rec.id}",
                f"\ntraining goes on; to stop it: ternit run stop {rec.id}"), file=sys.stderr)
        return EXIT_TERMINATED if isinstance(e, _Terminated) else EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return _outcome(m, final)


class _Terminated(Exception):
    """SIGTERM while following: only the following ends, as with Ctrl+C."""


def _leave_on_sigterm() -> Any:
    """SIGTERM (a closed session, `kill`) stops the following with the same line as Ctrl+C
    instead of a silent exit; returns the handler to put back (None off the main thread)."""
    def leave(signum: int, frame: Any) -> None:
        raise _Terminated

    try:
        return signal.signal(signal.SIGTERM, leave)
    except ValueError:  # not the main thread (a test's helper thread): leave it as it is
        return None


def _outcome(m: RunManager, rec: RunRecord) -> int:
    steps = f"{rec.last_step or 0}/{rec.steps_to}" if rec.steps_to else str(rec.last_step or 0)
    best = f", val loss {loss_text(rec.best_val_loss)}" if rec.best_val_loss is not None else ""
    print(f"{rec.id}: {st.label(rec.status)} — " + t("шаг", "step") + f" {steps}{best}", flush=True)
    if rec.status == st.FAILED and rec.last_message:
        print(rec.last_message, file=sys.stderr)
    if rec.status == st.FAILED:
        f = m.failure(rec.id)
        if f is not None:
            print(f.advice, file=sys.stderr)
            label = f.retry_label()
            if label:
                print(f"{label}: ternit run retry {rec.id}", file=sys.stderr)
    elif rec.status == st.TIME_LIMIT:
        print(t(f"продолжить: ternit run continue {rec.id}", f"to continue: ternit run continue {rec.id}"))
    return OUTCOME_CODES.get(rec.status, EXIT_OK)


def _started(rec: RunRecord, waiting: bool = False) -> None:
    print(f"{rec.id}\t{st.label(rec.status)}\t{rec.folder}", flush=True)
    if not waiting:
        print(t(f"следить: ternit run wait {rec.id}; остановить: ternit run stop {rec.id}",
                f"follow: ternit run wait {rec.id}; stop: ternit run stop {rec.id}"), file=sys.stderr)


def _list_line(run: str, status: str, where: str, steps: str, val: str, tokens: str, weights: str) -> str:
    """One line of `ternit run list`, the header's columns included."""
    return (f"{run:<32} {status:<22} {where:<22} {steps:>15}  {val:<8}  {tokens:>7}  {weights:>7}").rstrip()


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        m = RunManager()
    except sqlite3.Error as e:  # the state file failed under it (a full disk, a lock): one line
        log.warning("ternit run: the lab's state could not be read", exc_info=True)
        print(f"ternit run: {unavailable(paths.state_db_path(), e)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # the state cannot be opened: say why (StateError says what to do)
        log.warning("ternit run: the lab's state could not be opened", exc_info=True)
        print(f"ternit run: {e}", file=sys.stderr)
        return EXIT_USAGE
    for name, why in sorted(m.registry.troubles.items()):  # one bad run folder: named, the rest listed
        print(t(f"ternit run: папка прогона {name}: {why}", f"ternit run: run folder {name}: {why}"), file=sys.stderr)
    try:
        return _dispatch(m, args)
    except (RunError, ContinueError, RunNotFound, LookupError, ValueError, StateError) as e:
        print(f"ternit run {args.cmd}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except sqlite3.Error as e:  # a write of the history failed (a full disk, a lock): one line
        log.warning("ternit run %s: the lab's state failed", args.cmd, exc_info=True)
        print(f"ternit run {args.cmd}: {unavailable(m.registry.state.path, e)}", file=sys.stderr)
        return EXIT_USAGE
    except LibraryError as e:  # the constellations' data could not be prepared: its own code
        print(f"ternit run {args.cmd}: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # `ternit run list | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        m.registry.close()


def _start_config(args: argparse.Namespace) -> dict[str, Any]:
    """run.json from --config and the field flags over it, with its data found or prepared
    when only constellations are named."""
    raw, base = load_config(args.config) if args.config else ({}, None)
    cfg = normalize_config(apply_flags(raw, args), base)
    cfg = data_for_cli(cfg)
    return cfg


def _metrics(m: RunManager, args: argparse.Namespace) -> int:
    from .metrics import run_metrics, save_metrics, to_csv

    rec = m.registry.find(args.id)
    if not args.out:
        sys.stdout.write(to_csv(run_metrics(m.registry, rec.id, with_parents=not args.only_this)))
        return EXIT_OK
    ok, line = save_metrics(m.registry, rec.id, args.out, with_parents=not args.only_this)
    print(f"ternit run metrics: {line}", file=sys.stderr)
    return EXIT_OK if ok else EXIT_USAGE


def _tensorboard(m: RunManager, args: argparse.Namespace) -> int:
    from pathlib import Path

    from .tensorboard import write_runs

    try:
        written = write_runs(m.registry, None if args.id == "all" else [args.id], Path(args.dir) if args.dir else None)
    except OSError as e:
        print(t(f"ternit run tensorboard: не удалось записать ({e.strerror or e})",
                f"ternit run tensorboard: could not write ({e.strerror or e})"), file=sys.stderr)
        return EXIT_USAGE
    for folder in written:
        print(folder)
    top = Path(args.dir) if args.dir else m.registry.runs_root
    print(t(f"открыть: tensorboard --logdir {top}", f"to view: tensorboard --logdir {top}"), file=sys.stderr)
    return EXIT_OK


def _dispatch(m: RunManager, args: argparse.Namespace) -> int:
    if args.cmd == "start":
        rec = m.create(_start_config(args), target=args.target, account=args.account, gpu=args.gpu)
        with status_echo.echoed(rec.id) if rec.target_kind == "kaggle" else contextlib.nullcontext():
            rec = m.launch(rec.id, stop_at_step=args.stop_at_step)
        _started(rec, args.wait)
        return _follow(m, rec, args.json) if args.wait else EXIT_OK
    if args.cmd == "list":
        rows = m.history(args.limit)
        if args.json:
            from dataclasses import asdict

            print(json.dumps([asdict(r) for r in rows], ensure_ascii=False, indent=1))
            return EXIT_OK
        if not rows:
            print(t("прогонов пока нет", "no runs yet"))
            return EXIT_OK
        print(_list_line(t("прогон", "run"), t("состояние", "status"), t("где", "where"), t("шаги", "steps"),
                         "val loss", t("токены", "tokens"), t("веса", "weights")))
        for r in rows:
            best = loss_text(r.best_val_loss)
            print(_list_line(r.id, r.status_label, r.where, r.steps, best,
                             count_text(r.tokens_seen), count_text(r.params)))
        return EXIT_OK
    if args.cmd == "stop":
        rec = m.stop(m.registry.find(args.id).id)
        print(f"{rec.id}: {st.label(rec.status)}")
        if rec.target_kind == "kaggle" and rec.last_message:  # no save on request: what happens instead
            print(rec.last_message)
        if not (args.wait and rec.active):
            return EXIT_OK
        # What the user asked for happened when the run saved and ended: a stop, or the
        # steps or the time limit reached first. Only a failure is not a success here.
        code = _follow(m, rec, False)
        return EXIT_OK if code in (EXIT_STOPPED, EXIT_TIME_LIMIT) else code
    if args.cmd == "continue":
        parent = m.registry.find(args.id)
        notes: list[str] = []
        rec = m.start_continue(parent.id, steps_to=args.steps_to, stop_at_step=args.stop_at_step,
                               from_step=args.from_step, notes=notes)
        for note in notes:
            print(note, file=sys.stderr)
        _started(rec, args.wait)
        return _follow(m, rec, args.json) if args.wait else EXIT_OK
    if args.cmd == "wait":
        rec = m.registry.find(args.id)
        return _follow(m, rec, args.json) if rec.active else _outcome(m, rec)
    if args.cmd == "retry":
        rec = m.retry(m.registry.find(args.id).id)
        _started(rec, args.wait)
        return _follow(m, rec, args.json) if args.wait else EXIT_OK
    if args.cmd == "metrics":
        return _metrics(m, args)
    if args.cmd == "tensorboard":
        return _tensorboard(m, args)
    if args.cmd == "show":
        from dataclasses import asdict

        rec = m.registry.find(args.id)
        print(json.dumps(asdict(rec), ensure_ascii=False, indent=1))
        f = m.failure(rec.id)
        if f is not None:
            print(json.dumps({"failure": asdict(f)}, ensure_ascii=False, indent=1))
        return EXIT_OK
    return EXIT_USAGE
