"""`ternit law [--constellations A,B] [--hours H] [--json] [--queue [--target T]]`: the lab's scaling
law, fitted to its runs of one data set (app/law/report.py), or the ladder of runs that would
measure it (queued as a series a width with `--queue`).

Exit codes: 0 the report was printed (enough or not: `enough` says which); 2 bad arguments
or the lab's state could not be read; with `--queue`, also nothing to queue or a run the queue refused.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys

from ..base.cli_args import Parser
from ..base.i18n import t
from ..base.numbers import counted
from ..base.state import StateError
from ..runs.registry import Registry
from .ladder import Ladder

log = logging.getLogger(__name__)
RUNS = (("прогон", "прогона", "прогонов"), ("run", "runs"))


def parser() -> Parser:
    p = Parser(prog="ternit law", description=t(
        "Закон лабы L(N, D) = E + A/N^α + B/D^β по её завершённым прогонам на одних данных: "
        "параметры с интервалами, проверка на самом большом прогоне; если прогонов мало — "
        "лестница прогонов, которая его измерит.",
        "The lab's law L(N, D) = E + A/N^α + B/D^β from its finished runs on one data set: the "
        "parameters with intervals, a check on the largest run; with too few runs, the ladder "
        "of runs that would measure it."))
    p.add_argument("--constellations", metavar="A,B", help=t(
        "созвездия данных (по умолчанию — данные, на которых больше всего прогонов)",
        "the data's constellations (default: the data set with the most runs)"))
    p.add_argument("--hours", type=float, metavar="H", help=t(
        "часы видеокарты для лестницы (по умолчанию — остаток квоты Kaggle на неделе)",
        "GPU hours for the ladder (default: the Kaggle quota left this week)"))
    p.add_argument("--queue", action="store_true", help=t(
        "поставить лестницу в очередь (серия на каждую ширину), если закон ещё не известен",
        "queue the ladder (a series a width) when the law is not known well enough yet"))
    p.add_argument("--target", default="any", choices=("local", "kaggle", "any"), help=t(
        "где идти лестнице (с --queue): local, kaggle или any (по умолчанию)",
        "where the ladder runs (with --queue): local, kaggle or any (the default)"))
    p.add_argument("--json", action="store_true", help=t("вывести отчёт в JSON", "print the report as JSON"))
    return p


def main(argv: list[str]) -> int:
    from .report import human, report

    args = parser().parse_args(argv)
    names = tuple(n.strip() for n in args.constellations.split(",") if n.strip()) if args.constellations else None
    try:
        registry = Registry()
    except (sqlite3.Error, StateError) as e:
        log.warning("ternit law: the lab's state could not be opened", exc_info=True)
        print(f"ternit law: {e}", file=sys.stderr)
        return 2
    try:
        r = report(registry, names, args.hours)
    finally:
        registry.close()
    if args.json:
        print(json.dumps(r.as_json(), ensure_ascii=False, indent=1))
    else:
        print("\n".join(human(r)))
    return queue_ladder(r.ladder, args.target) if args.queue else 0


def queue_ladder(ladder: Ladder | None, target: str) -> int:
    """`--queue`: the ladder's series into the queue (its ids on stderr, one line a series; the
    runs' ids and names on stdout as `ternit queue add` prints them). 2: nothing to queue or
    the queue refused a run (nothing of that series queued, said why)."""
    from ..queue.adding import add_runs
    from ..queue.cli import say_if_nobody_drives
    from ..queue.store import QueueError, QueueStore

    if ladder is None:
        print(t("ternit law: закон уже известен, лестница не нужна", "ternit law: the law is known, no ladder is needed"),
              file=sys.stderr)
        return 2
    if not ladder.base:
        print(t("ternit law: нет прогона, от которого строить лестницу", "ternit law: no run to build the ladder from"),
              file=sys.stderr)
        return 2
    try:
        store = QueueStore()
    except (sqlite3.Error, StateError) as e:
        print(f"ternit law: {e}", file=sys.stderr)
        return 2
    try:
        for cfg, vary in ladder.series():
            added = add_runs(store, cfg, target=target, vary=vary)
            n = len(added.items)
            width = cfg["model"]["width"]
            print(t(f"серия {added.series.id}: ширина {width}, {counted(n, *RUNS, 'ru')}",
                    f"series {added.series.id}: width {width}, {counted(n, *RUNS, 'en')}"), file=sys.stderr)
            for it in added.items:
                print(f"{it.id}\t{it.name}")
    except QueueError as e:
        print(f"ternit law: {e}", file=sys.stderr)
        return 2
    finally:
        store.close()
    say_if_nobody_drives()
    return 0
