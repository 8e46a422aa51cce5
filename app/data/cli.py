"""`ternit data ...`: the dataset library and prepared data from the command line.

    ternit data add PATH [--name NAME] [--constellation CNAME]
    ternit data list
    ternit data constellations
    ternit data prepare --constellations A,B [--vocab 4000] [--out DIR] [--tokenizer FILE]
                        [--context 1024] [--no-cache]
    ternit data prepared
    ternit data remove NAME [--constellation CNAME]
    ternit data rename-constellation OLD NEW
    ternit data remove-constellation CNAME
    ternit data check [NAME...]
    ternit data bench [...]          (the same as `ternit bench data`)

Errors are one line on stderr: exit 2 for a missing/unreadable path or a refused argument
(an unknown constellation or dataset name included),
1 for other failures, 130 when interrupted (nothing half-written is left).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sqlite3
import sys
import threading
from collections.abc import Iterator

from ..base.cli_args import Parser, add_out, print_to
from ..base.i18n import t
from ..base.numbers import bytes_text, count_text, int_text
from ..base.state import StateError, failure_text
from .progress import Cancelled, progress_for_cli


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit data", description=t(
        "Наборы данных, созвездия и подготовленные данные.",
        "Datasets, constellations and prepared data."))
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add", help=t("добавить файл или папку с текстом", "add a text file or folder"))
    a.add_argument("path")
    a.add_argument("--name", help=t("имя набора (по умолчанию имя файла)", "dataset name (default: file name)"))
    a.add_argument("--constellation", help=t("добавить в созвездие (создаётся при нужде)",
                                             "add to a constellation (created if needed)"))
    for name, ru, en in (("list", "наборы данных", "datasets"), ("constellations", "созвездия", "constellations"),
                         ("prepared", "подготовленные папки", "prepared folders")):
        add_out(sub.add_parser(name, help=t(ru, en)))
    sub.add_parser("bench", help=t("замер скорости подготовки (= ternit bench data)",
                                   "preparation throughput benchmark (= ternit bench data)"), add_help=False)
    ch = sub.add_parser("check", help=t("перепроверить файлы наборов (изменения, пропажи)",
                                        "re-check datasets' files (changes, missing paths)"))
    ch.add_argument("names", nargs="*", help=t("наборы (по умолчанию все)", "datasets (default: all)"))
    ch.add_argument("--json", action="store_true", help=t(
        "по строке JSON на набор с полями `name`, `status` (unchanged/changed/missing/error), `message`, "
        "`changes`",
        "a JSON line per dataset: `name`, `status` (unchanged/changed/missing/error), `message`, `changes`"))
    r = sub.add_parser("remove", help=t("убрать набор из библиотеки (файлы не трогаются)",
                                        "remove a dataset from the library (files stay)"))
    r.add_argument("name")
    r.add_argument("--constellation", help=t("убрать набор только из этого созвездия",
                                             "take the dataset out of this constellation only"))
    rc = sub.add_parser("rename-constellation", help=t("переименовать созвездие", "rename a constellation"))
    rc.add_argument("old")
    rc.add_argument("new")
    xc = sub.add_parser("remove-constellation", help=t("удалить созвездие (наборы остаются в библиотеке)",
                                                       "remove a constellation (its datasets stay)"))
    xc.add_argument("name")
    pr = sub.add_parser("prepare", help=t("токенизатор и train/val для тренера",
                                          "tokenizer and train/val files for the trainer"))
    pr.add_argument("--constellations", required=True, help="A,B")
    pr.add_argument("--vocab", type=int, default=None, help=t("размер словаря (4000)", "vocabulary size (4000)"))
    pr.add_argument("--out", default=None, help=t("папка (по умолчанию в данных лаборатории)",
                                                  "folder (default: in the lab's data folder)"))
    pr.add_argument("--tokenizer", default=None, help=t("взять готовый tokenizer.json",
                                                        "reuse this tokenizer.json"))
    pr.add_argument("--context", type=int, default=1024, help=t("контекст модели (1024)", "model context (1024)"))
    pr.add_argument("--no-cache", action="store_true", help=t("подготовить заново", "prepare again"))
    return p


def main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:
        from .bench import main as bench_main

        return bench_main(argv[1:])
    args = _parser().parse_args(argv)
    from .library import LibraryError

    try:
        with _terminate_as_interrupt():
            if args.cmd in ("list", "constellations", "prepared"):
                return print_to(args.out, lambda: COMMANDS[args.cmd](args), f"ternit data {args.cmd}")
            return COMMANDS[args.cmd](args)
    except LibraryError as exc:
        print(f"ternit data: {exc}", file=sys.stderr)
        return exc.exit_code
    except (StateError, sqlite3.Error) as exc:  # a full disk, a lock (who holds it), said in one line
        print(f"ternit data: {failure_text(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"ternit data: {exc}", file=sys.stderr)
        return 1
    except (Cancelled, KeyboardInterrupt):
        print(t("\nternit data: прервано, ничего не записано", "\nternit data: interrupted, nothing written"),
              file=sys.stderr)
        return 130


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a closed terminal, `kill`, the window's cancel) stops the command the way
    Ctrl-C does: its temporary folder is removed. Python's default for SIGTERM is to die on
    the spot, leaving a hidden half-written folder of up to the data's size behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _library():
    from .library import Library

    return Library()


def cmd_add(args: argparse.Namespace) -> int:
    lib = _library()
    bar = progress_for_cli()
    res = lib.add(args.path, name=args.name, constellation=args.constellation, progress=bar)
    bar.close()
    d = res.dataset
    status = {"added": t("добавлен", "added"), "unchanged": t("без изменений", "unchanged"),
              "changed": t("изменился", "changed")}[res.status]
    print(f"{d.name}: {status} — {t('файлов', 'files')}: {d.files}, {bytes_text(d.bytes)}, "
          f"{t('документов', 'documents')}: {d.documents}, {t('символов', 'characters')}: {count_text(d.characters)}"
          + (f"; {t('созвездия', 'constellations')}: {', '.join(d.constellations)}" if d.constellations else ""))
    for c in res.changes:
        print(f"  {c}")
    for note in res.notes:
        print(f"  {t('заметка', 'note')}: {note}", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    lib = _library()
    rows = [(t("набор", "dataset"), t("созвездия", "constellations"), t("файлы", "files"),
             t("размер", "size"), t("документы", "documents"), t("символы", "characters"),
             t("токены", "tokens"))]
    for d in lib.datasets():
        rows.append((d.name, ",".join(d.constellations) or "-", str(d.files) + (f" (+{d.skipped})" if d.skipped else ""),
                     bytes_text(d.bytes), str(d.documents), count_text(d.characters), count_text(d.tokens)))
    _table(rows)
    return 0


def cmd_constellations(args: argparse.Namespace) -> int:
    lib = _library()
    rows = [(t("созвездие", "constellation"), t("наборы", "datasets"), t("размер", "size"),
             t("документы", "documents"), t("токены", "tokens"))]
    for c in lib.constellations():
        rows.append((c.name + (" *" if c.builtin else ""), ",".join(c.datasets) or "-", bytes_text(c.bytes),
                     str(c.documents), count_text(c.tokens)))
    _table(rows)
    print(t("* встроенное: документация Python, без загрузки", "* builtin: the Python documentation, no download"))
    return 0


def cmd_prepared(args: argparse.Namespace) -> int:
    from .prepare import prepared_entries

    rows = [(t("папка", "folder"), t("созвездия", "constellations"), t("словарь", "vocab"),
             "train", "val", t("цела", "intact"))]
    for e in prepared_entries(_library()):
        rows.append((e["path"], ",".join(e["constellations"]), str(e["vocab_size"]),
                     count_text(e["train_tokens"]), count_text(e["val_tokens"]),
                     t("да", "yes") if e["intact"] else t("нет", "no")))
    _table(rows)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .library import LibraryError

    lib = _library()
    names = args.names or [d.name for d in lib.datasets() if d.kind != "builtin"]
    worst = 0
    bar = progress_for_cli()
    for name in names:
        try:
            res = lib.refresh(name, progress=bar)
        except LibraryError as exc:
            worst = max(worst, exc.exit_code)
            if args.json:
                # exit code 2 from refresh: the dataset's path is gone.
                _json_line(name=name, status="missing" if exc.exit_code == 2 else "error", message=str(exc),
                           changes=[])
            else:
                print(f"{name}: {exc}", file=sys.stderr)
            continue
        if args.json:
            _json_line(name=name, status=res.status, message="", changes=res.changes)
            continue
        status = {"unchanged": t("без изменений", "unchanged"), "changed": t("изменился", "changed")}[res.status]
        print(f"{name}: {status}")
        for c in res.changes:
            print(f"  {c}")
    bar.close()
    return worst


def _json_line(**fields: object) -> None:
    print(json.dumps(fields, ensure_ascii=False), flush=True)


def cmd_remove(args: argparse.Namespace) -> int:
    from .manage import remove_dataset

    print(remove_dataset(_library(), args.name, args.constellation))
    return 0


def cmd_rename_constellation(args: argparse.Namespace) -> int:
    from .manage import rename_constellation

    print(rename_constellation(_library(), args.old, args.new))
    return 0


def cmd_remove_constellation(args: argparse.Namespace) -> int:
    from .manage import remove_constellation

    print(remove_constellation(_library(), args.name))
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from .prepare import prepare, validate_vocab

    if args.vocab is not None and args.tokenizer is None:
        validate_vocab(args.vocab)  # refused before anything is read
    bar = progress_for_cli()  # JSON lines for the window (TERNIT_PROGRESS=json), else a text bar
    try:
        res = prepare(args.constellations.split(","), out=args.out, vocab=args.vocab,
                      tokenizer=args.tokenizer, context=args.context, progress=bar,
                      use_cache=not args.no_cache)
    finally:
        bar.close()
    m = res.meta
    for w in res.warnings:
        bar.warning(w)
    print(res.path)
    if res.cached:
        print("  " + t("из кэша (уже подготовлено)", "from cache (prepared before)"))
    print(f"  {t('словарь', 'vocab')} {m['vocab_size']}, train {int_text(m['train_tokens'])}, val {int_text(m['val_tokens'])} "
          f"({m['val_split']['segments']} × {m['context']})")
    for name, n in m["tokens_by_constellation"].items():
        print(f"  {name}: {int_text(n)} {t('токенов', 'tokens')}")
    print(f"  data_id {m['data_id']}")
    return 0


COMMANDS = {
    "add": cmd_add,
    "list": cmd_list,
    "constellations": cmd_constellations,
    "prepared": cmd_prepared,
    "remove": cmd_remove,
    "rename-constellation": cmd_rename_constellation,
    "remove-constellation": cmd_remove_constellation,
    "check": cmd_check,
    "prepare": cmd_prepare,
}


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
