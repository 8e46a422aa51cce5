"""`ternit law [--constellations A,B] [--json]`: the lab's scaling law, fitted to its runs of
one data set (app/law/report.py), or the ladder of runs that would measure it.

Exit codes: 0 the report was printed (enough or not: `enough` says which); 2 bad arguments
or the lab's state could not be read.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import sys

from ..base.cli_args import Parser
from ..base.i18n import t
from ..base.state import StateError
from ..runs.registry import Registry

log = logging.getLogger(__name__)


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
    return 0
