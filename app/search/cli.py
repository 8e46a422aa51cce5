"""`ternit search add|list|show|stop`: a hyperparameter search whose trials are queued runs.

The queue runner (`ternit queue run`, or the window) drives the searches: it asks each trial
when a slot frees, prunes and tells (app/search/driver.py).

Exit codes: 0 done; 2 bad arguments, config or id, or the lab's state could not be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..base.cli_args import Parser
from ..base.i18n import t
from ..base.numbers import loss_text
from ..runs.command import on_registry
from ..runs.precheck import load_config, normalize_config
from ..runs.registry import Registry
from ..runs.start_flags import data_for_cli
from .adding import create_search
from .space import parse_space
from .store import PRUNERS, SEARCH_ACTIVE, STOPPING, SearchError, SearchStore, label
from .view import search_json

EXIT_OK, EXIT_USAGE = 0, 2
TARGETS = ("local", "kaggle", "any")


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit search", description=t(
        "Поиск гиперпараметров (Optuna): каждая попытка — прогон в очереди, на любой свободной машине; "
        "безнадёжные останавливаются (с чекпоинтом), следующая спрашивается, когда освободится место.",
        "A hyperparameter search (Optuna): each trial is a queued run on any free machine; hopeless "
        "ones are stopped (with a checkpoint), the next is asked when a slot frees."))
    sub = p.add_subparsers(dest="cmd", required=True, title=t("команды", "commands"))
    ident = t("номер поиска (его печатает add)", "the search's number (add prints it)")
    a = sub.add_parser("add", help=t("начать поиск", "start a search"))
    a.add_argument("--config", metavar="RUN.json", required=True, help=t("run.json, от которого идут попытки",
                                                                         "the run.json the trials start from"))
    a.add_argument("--space", action="append", required=True, metavar="KEY=log:LOW..HIGH",
                   help=t("поле и его пределы: KEY=log:НИЗ..ВЕРХ, KEY=НИЗ..ВЕРХ или KEY=З1,З2,…; от одного до четырёх",
                          "a field and its range: KEY=log:LOW..HIGH, KEY=LOW..HIGH or KEY=V1,V2,…; one to four"))
    a.add_argument("--trials", type=int, required=True, metavar="N", help=t("сколько попыток", "how many trials"))
    a.add_argument("--budget-hours", type=float, metavar="H",
                   help=t("не больше стольких часов видеокарты на все попытки", "at most this many GPU hours for all trials"))
    a.add_argument("--pruner", choices=list(PRUNERS), default="median",
                   help=t("отсечение безнадёжных: median (по умолчанию), halving или none",
                          "stopping hopeless trials: median (the default), halving or none"))
    a.add_argument("--target", choices=list(TARGETS), default="any",
                   help=t("где обучать (по умолчанию any — что освободится раньше)", "where (default any: whichever frees first)"))
    a.add_argument("--seed", type=int, default=0, metavar="N", help=t("зерно выбора значений", "the sampler's seed"))
    ls = sub.add_parser("list", help=t("все поиски", "every search"))
    ls.add_argument("--json", action="store_true", help=t("вывести в JSON", "print as JSON"))
    sh = sub.add_parser("show", help=t("попытки поиска и лучшая", "a search's trials and the best"))
    sh.add_argument("id", metavar="ID", type=int, help=ident)
    sh.add_argument("--json", action="store_true", help=t("вывести в JSON", "print as JSON"))
    sp = sub.add_parser("stop", help=t("остановить поиск и его попытки", "stop a search and its trials"))
    sp.add_argument("id", metavar="ID", type=int, help=ident)
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return on_registry("search", args.cmd, lambda registry: _dispatch(args, registry, SearchStore(registry.state)),
                       (SearchError,))


def _dispatch(args: argparse.Namespace, registry: Registry, store: SearchStore) -> int:
    if args.cmd == "add":
        return _add(args, store)
    if args.cmd == "list":
        rows = [{"id": s.id, "name": s.name, "trials": len(store.trials(s.id)), "of": s.trials, "state": s.state}
                for s in store.searches()]
        if args.json:
            print(json.dumps(rows, ensure_ascii=False, indent=1))
        elif not rows:
            print(t("поисков пока нет: ternit search add", "no searches yet: ternit search add"))
        for r in rows if not args.json else []:
            print(f"{r['id']}\t{r['name']}\t{r['trials']}/{r['of']}\t{label(r['state'])}")
        return EXIT_OK
    if args.cmd == "show":
        view = search_json(store, store.search(args.id))
        print(json.dumps(view, ensure_ascii=False, indent=1) if args.json else "\n".join(_show_lines(view)))
        return EXIT_OK
    if args.cmd == "stop":
        return _stop(store, registry, args.id)
    return EXIT_USAGE


def _add(args: argparse.Namespace, store: SearchStore) -> int:
    if args.trials < 1:
        raise SearchError(t("--trials: хотя бы одна попытка", "--trials: at least one trial"))
    space = parse_space(args.space)
    raw, base = load_config(args.config)
    # data.dir found (or prepared) now, not at each trial's turn; a relative one from the file's folder
    cfg = normalize_config(data_for_cli(raw), base)
    search = create_search(store, cfg, space, args.trials, budget_hours=args.budget_hours, pruner=args.pruner,
                           target=args.target, seed=args.seed)
    print(search.id)
    print(t("попытки пойдут, когда очередь ведут: ternit queue run (или окно лаборатории)",
            "the trials go when the queue is driven: ternit queue run (or the lab's window)"), file=sys.stderr)
    return EXIT_OK


def _stop(store: SearchStore, registry: Registry, search_id: int) -> int:
    """The search stops asking; its running trials are stopped now (STOP: each saves its
    checkpoint), its waiting ones leave the queue at the runner's next round."""
    from ..runs.manager import RunManager

    search = store.search(search_id)
    if search.state not in SEARCH_ACTIVE:
        print(f"{search.id}: {label(search.state)}")
        return EXIT_OK
    store.set_state(search.id, STOPPING, expect=SEARCH_ACTIVE)
    manager = RunManager(registry)
    for tr in store.trials(search.id):
        if not tr.ended and tr.run_id and registry.get(tr.run_id).active:
            manager.stop(tr.run_id)
    print(f"{search.id}: {label(STOPPING)}")
    return EXIT_OK


def _show_lines(view: dict[str, Any]) -> list[str]:
    lines = [f"{view['id']}  {view['name']}  {label(view['state'])}  {view['storage']}"]
    for tr in view["trials"]:
        values = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in tr["values"].items())
        ci = tr["val_ci95"]
        interval = f" [{loss_text(ci[0])}…{loss_text(ci[1])}]" if ci else ""
        lines.append(f"  {tr['number']:>3}  {label(tr['state']):<10} {loss_text(tr['val_loss'])}{interval}  {values}"
                     + (f"  {tr['run_id']}" if tr["run_id"] else ""))
    best = view["best"]
    lines.append(t(f"лучшая: попытка {best['number']}, val loss {loss_text(best['val_loss'])}",
                   f"best: trial {best['number']}, val loss {loss_text(best['val_loss'])}") if best
                 else t("лучшей пока нет", "no best trial yet"))
    return lines
