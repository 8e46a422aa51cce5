"""`ternit queue`: the run queue without the window — the same app.queue calls it makes.

Exit codes: 0 done; 1 `run --wait`: a queued run failed and was skipped; 2 bad arguments,
config or id, or the queue is driven by another runner (the line names it); 130/143 Ctrl+C
or SIGTERM while driving (the runs go on; the next runner carries on).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from datetime import datetime
from typing import Any

from trainer.run.awake import Hold, hold

from ..base import settings
from ..base.cli_args import Parser, add_out, print_to
from ..base.i18n import t
from ..base.numbers import plural_ru
from ..runs import kaggle_bridge
from ..runs.command import on_registry
from ..runs.manager import RunManager
from ..runs.precheck import load_config
from ..runs.registry import Registry
from ..runs.start_flags import add_field_flags, apply_flags, data_for_cli
from . import autostart, detach, lock
from .adding import add_runs
from .runner import QueueEvent, QueueRunner
from .series import parse_vary, results, values_text
from .store import TARGETS, QueueError, QueueStore
from .world import Planner, Timeline, machine_label

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit queue", description=t(
        "Очередь прогонов: этот ПК и все аккаунты Kaggle по очереди, пока вы спите.",
        "The run queue: this PC and every Kaggle account, one run after another, while you sleep."))
    sub = p.add_subparsers(dest="cmd", required=True, title=t("команды", "commands"))
    item = t("номер прогона в очереди (`ternit queue list`)", "a queued run's number (`ternit queue list`)")
    a = sub.add_parser("add", help=t("поставить прогон (или серию) в очередь", "queue a run (or a series)"))
    a.add_argument("--config", metavar="RUN.json", help=t("run.json прогона; флаги полей его дополняют",
                                                           "the run's run.json; field flags override it"))
    a.add_argument("--target", choices=list(TARGETS), default="any",
                   help=t("где обучать: local — этот ПК, kaggle, any — что освободится раньше (по умолчанию)",
                          "where: local (this PC), kaggle, or any — whichever frees first (the default)"))
    a.add_argument("--account", metavar=t("ИМЯ", "NAME"), help=t("аккаунт Kaggle: ИМЯ или auto (по умолчанию)",
                                                                 "Kaggle account NAME or auto (the default)"))
    a.add_argument("--gpu", metavar="GPU", help=t("своя видеокарта: auto, cpu или номера", "local GPU: auto, cpu or indices"))
    a.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2",
                   help=t("серия: поле run.json и его значения, например training.lr=0.001,0.0003; "
                          "два --vary — все сочетания", "a series: a run.json key and its values, e.g. "
                          "training.lr=0.001,0.0003; two --vary make every combination"))
    add_field_flags(a)
    ls = sub.add_parser("list", help=t("очередь: порядок, где и когда пойдёт каждый прогон, состояние",
                                       "the queue: the order, where and when each run goes, its state"))
    ls.add_argument("--json", action="store_true", help=t("вывести в JSON", "print as JSON"))
    add_out(ls)
    r = sub.add_parser("run", help=t("вести очередь (в фоне; с --wait — здесь, пока не опустеет)",
                                     "drive the queue (in the background; with --wait here, until it is empty)"))
    r.add_argument("--wait", action="store_true", help=t(
        "вести здесь, пока очередь не опустеет: код 0, или 1 если какой-то прогон упал и пропущен",
        "drive it here until it is empty: exit 0, or 1 if a run failed and was skipped"))
    rm = sub.add_parser("remove", help=t("убрать прогон из очереди", "take a run out of the queue"))
    rm.add_argument("id", metavar="ID", type=int, help=item)
    mv = sub.add_parser("move", help=t("переставить ждущий прогон", "move a waiting run"))
    mv.add_argument("id", metavar="ID", type=int, help=item)
    mv.add_argument("--to", type=int, required=True, metavar="N",
                    help=t("новое место среди ждущих (1 — следующий)", "its new place among the waiting (1 = next)"))
    h = sub.add_parser("hold", help=t("отложить прогон: очередь обходит его", "hold a run back: the queue passes it by"))
    h.add_argument("id", metavar="ID", type=int, help=item)
    h.add_argument("--off", action="store_true", help=t("вернуть в очередь", "put it back in line"))
    sub.add_parser("pause", help=t("приостановить: новые прогоны не начинаются", "pause: no new run starts"))
    sub.add_parser("resume", help=t("продолжить очередь", "resume the queue"))
    au = sub.add_parser("autostart", help=t("продолжать очередь после перезагрузки (при входе в систему)",
                                            "carry the queue on after a reboot (at logon)"))
    au.add_argument("what", choices=["on", "off", "status"], help=t(
        "on — запись автозапуска для этого пользователя, off — убрать её, status — есть ли она и годна ли",
        "on: a logon entry for this user; off: remove it; status: whether there is one and whether it fits"))
    s = sub.add_parser("series", help=t("таблица серии: итоговая val loss, бит на байт, победитель",
                                        "a series' table: final val loss, bits per byte, the winner"))
    s.add_argument("id", metavar="ID", type=int, help=t("номер серии (его печатает add)", "the series' number (add prints it)"))
    s.add_argument("--json", action="store_true", help=t("вывести в JSON", "print as JSON"))
    add_out(s)
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return on_registry("queue", args.cmd, lambda registry: _dispatch(args, registry, QueueStore(registry.state)),
                       (QueueError, lock.RunnerBusy))


def _dispatch(args: argparse.Namespace, registry: Registry, store: QueueStore) -> int:
    cmd = args.cmd
    if cmd == "add":
        return _add(args, store)
    if cmd == "list":
        return print_to(args.out, lambda: _list(Planner(store, registry).timeline(), args.json),
                        "ternit queue list", args.json)
    if cmd == "run":
        return _run(registry) if args.wait else _run_in_background()
    if cmd == "remove":
        it = store.remove(args.id)
        print(t(f"{it.id} убран из очереди: {it.name}", f"{it.id} taken out of the queue: {it.name}"))
    elif cmd == "move":
        order = store.move(args.id, args.to)
        print(" ".join(str(it.id) for it in order))
    elif cmd == "hold":
        it = store.set_held(args.id, not args.off)
        print(f"{it.id}: {it.label()}")
    elif cmd in ("pause", "resume"):
        store.set_paused(cmd == "pause")
        print(t("очередь приостановлена: идущие прогоны идут, новые не начинаются", "the queue is paused: "
                "running runs go on, no new one starts") if cmd == "pause" else t("очередь продолжается",
                                                                                    "the queue goes on"))
    elif cmd == "series":
        return print_to(args.out, lambda: _series(results(store, registry, args.id), args.json),
                        "ternit queue series", args.json)
    elif cmd == "autostart":
        return _autostart(args.what)
    return EXIT_OK


def _add(args: argparse.Namespace, store: QueueStore) -> int:
    raw, base = load_config(args.config) if args.config else ({}, None)
    cfg = apply_flags(raw, args)
    if args.gpu:
        cfg.setdefault("target", {})["gpu"] = args.gpu
    cfg = data_for_cli(cfg)
    account = args.account or str((cfg.get("target") or {}).get("account") or "auto")
    vary = [parse_vary(v) for v in args.vary]
    added = add_runs(store, cfg, target=args.target, account=account, vary=vary or None, base=base)
    if added.series is not None:
        n = len(added.items)
        print(t(f"серия {added.series.id}: {n} {plural_ru(n, 'прогон', 'прогона', 'прогонов')}",
                f"series {added.series.id}: {n} runs"), file=sys.stderr)
    for it in added.items:
        print(f"{it.id}\t{it.name}")
    say_if_nobody_drives()
    return EXIT_OK


def say_if_nobody_drives() -> None:
    """After runs were queued: one line on stderr when no runner holds the queue's lock."""
    if lock.current_holder() is None:
        print(t("очередь сейчас никто не ведёт: запустите ternit queue run (или откройте окно лаборатории)",
                "nobody drives the queue now: start ternit queue run (or open the lab's window)"), file=sys.stderr)


# ---- list --------------------------------------------------------------------------------------
def _clock(at: float | None, now: float) -> str:
    if at is None:
        return "—"
    when = datetime.fromtimestamp(at)
    return when.strftime("%H:%M") if abs(at - now) < 20 * 3600 else when.strftime("%d.%m %H:%M")


def row_json(tl: Timeline) -> list[dict[str, Any]]:
    out = []
    for r in tl.rows:
        it = r.item
        out.append({"id": it.id, "place": r.place, "name": it.name, "state": it.state, "label": r.label,
                    "held": it.held, "target": it.target, "account": it.account, "machine": r.machine,
                    "expected_start": r.start if r.expected else None, "expected_end": r.end if r.expected else None,
                    "started_at": it.started_at, "ended_at": it.ended_at, "run_id": it.run_id, "runs": it.runs,
                    "run_status": r.run_status, "attempt": it.attempt, "series": it.series_id,
                    "series_values": it.series_values, "note": r.note})
    return out


def _list(tl: Timeline, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"now": tl.now, "paused": tl.paused, "runner": tl.runner, "who": tl.who, "machines": tl.machines,
                          "refreshes": tl.refreshes, "items": row_json(tl)}, ensure_ascii=False, indent=1))
        return EXIT_OK
    if not tl.rows:
        print(t("очередь пуста: ternit queue add --config RUN.json", "the queue is empty: ternit queue add --config RUN.json"))
        return EXIT_OK
    head = (t("№", "#"), "ID", t("прогон", "run"), t("где", "where"), t("начало", "start"), t("конец", "end"),
            t("состояние", "state"))
    print(_line(*head))
    for r in tl.rows:
        it = r.item
        print(_line(str(r.place or ""), str(it.id), it.name, machine_label(r.machine), _clock(r.start, tl.now),
                    _clock(r.end, tl.now), r.label) + (f"  {r.note}" if r.note else ""))
    if tl.paused:
        print(t("очередь приостановлена (ternit queue resume)", "the queue is paused (ternit queue resume)"))
    print(tl.who)
    return EXIT_OK


def _line(place: str, ident: str, name: str, where: str, start: str, end: str, state: str) -> str:
    return f"{place:>3} {ident:>4}  {name[:34]:<34} {where:<16} {start:>11} {end:>11}  {state}"


# ---- run ---------------------------------------------------------------------------------------
def _run_in_background(wait_s: float = 30.0) -> int:
    """Start the runner detached (app/queue/detach.py), its output in the lab's log folder;
    say so once the lock names it (or why it does not: another runner was first, or it
    ended at once — nothing to do, or its log's last line)."""
    if (note := lock.current_holder()) is not None:
        raise lock.RunnerBusy(t(f"очередь уже ведёт процесс {note.pid} ({note.program})",
                                f"the queue is already driven by process {note.pid} ({note.program})"))
    proc, note, whose = detach.start_and_wait(wait_s)
    log_path = detach.runner_log()
    if whose == "other" and note is not None:
        raise lock.RunnerBusy(t(f"очередь уже ведёт процесс {note.pid} ({note.program})",
                                f"the queue is already driven by process {note.pid} ({note.program})"))
    if whose == "ours" and note is not None:
        print(t(f"очередь ведёт процесс {note.pid} (журнал: {log_path}); посмотреть: ternit queue list",
                f"the queue is driven by process {note.pid} (log: {log_path}); to see it: ternit queue list"))
        return EXIT_OK
    if proc.poll() == 0:  # it had nothing to start or follow
        print(f"ternit queue run: {_last_line(log_path)}")
        return EXIT_OK
    print(f"ternit queue run: {_last_line(log_path)} ({log_path})", file=sys.stderr)
    return EXIT_USAGE


def _last_line(path: Any) -> str:
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


class _Terminated(Exception):
    pass


def _run(registry: Registry) -> int:
    runner = QueueRunner(RunManager(registry), "ternit queue run")
    runner.add_listener(_print_event)

    def leave(signum: int, frame: Any) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, leave)
    keep = Hold(False)
    try:
        runner.start()
        # The PC kept awake while the runner has work: between runs, and while Kaggle legs are
        # followed (each trainer here holds its own request too). Gone when it ends.
        keep = hold("the training queue") if settings.keep_awake() else \
            Hold(False, why="off in the lab's settings")
        runner.lock.annotate(awake=keep.as_event())
        runner.drive()
    except (KeyboardInterrupt, _Terminated) as e:
        print(t("\nочередь больше не ведётся; идущие прогоны идут. Продолжить: ternit queue run",
                "\nthe queue is no longer driven; running runs go on. To carry on: ternit queue run"), file=sys.stderr)
        return EXIT_TERMINATED if isinstance(e, _Terminated) else EXIT_INTERRUPTED
    finally:
        keep.release()
        signal.signal(signal.SIGTERM, previous)
        runner.close()
        kaggle_bridge.shutdown()  # the legs are followed again by the next runner
    if runner.gone:
        print(f"ternit queue run: {runner.gone}", file=sys.stderr)
        return EXIT_USAGE
    left = runner.store.pending()
    if left and runner.stuck:
        print(t(f"ждут {len(left)}, но начаться им негде: {'; '.join(runner.stuck)}",
                f"{len(left)} wait, but nowhere can they start: {'; '.join(runner.stuck)}"), file=sys.stderr)
    elif left:
        print(t(f"ждут {len(left)}: очередь приостановлена или они отложены", f"{len(left)} wait: the queue is "
                "paused or they are held"), file=sys.stderr)
    print(t(f"{time.strftime('%H:%M:%S')} больше нечего запускать и не за чем следить: процесс очереди завершается",
            f"{time.strftime('%H:%M:%S')} nothing left to start or follow: the queue runner ends"), flush=True)
    return EXIT_FAILED if runner.failed else EXIT_OK


def _print_event(ev: QueueEvent) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"{stamp} {ev.title()}" + (f": {ev.text}" if ev.text else ""), flush=True)


# ---- autostart ---------------------------------------------------------------------------------
def _autostart(what: str) -> int:
    try:
        st = autostart.on() if what == "on" else autostart.off() if what == "off" else autostart.status()
    except OSError as e:
        print(f"ternit queue autostart {what}: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(st.text())
    if what == "on" and st.kind == "startup":
        print(t("Планировщик заданий отказал: запись лежит в папке «Автозагрузка»",
                "Task Scheduler refused the task: the entry is in the Startup folder"), file=sys.stderr)
    return EXIT_OK


# ---- series ------------------------------------------------------------------------------------
def _series(res: Any, as_json: bool) -> int:
    if as_json:
        print(json.dumps(res.as_json(), ensure_ascii=False, indent=1))
        return EXIT_OK
    print(f"{t('серия', 'series')} {res.series_id}: {res.name} — {', '.join(res.keys)}")
    for r in res.rows:
        mark = "★" if r.item_id == res.winner else " "
        loss = f"{r.val_loss:.4f} ({r.val_low:.4f}…{r.val_high:.4f})" if r.val_loss is not None and r.val_low is not None \
            else (f"{r.val_loss:.4f}" if r.val_loss is not None else "—")
        bpb = f"{r.bits_per_byte:.3f}" if r.bits_per_byte is not None else "—"
        print(f"{mark} {r.item_id:>4}  {values_text(r.values):<28} val loss {loss:<26} {t('бит/байт', 'bits/byte')} {bpb}")
    print(res.verdict)
    return EXIT_OK

