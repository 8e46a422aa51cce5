"""`ternit kaggle ...`: accounts and their quota without the window.

    ternit kaggle add-account --username U --token -    (an API token, read from stdin)
    ternit kaggle add-account --username U --token-file access_token
    ternit kaggle add-account --json kaggle.json [--json other.json ...]   (legacy keys)
    ternit kaggle add-account --username U --key K      (--key - reads it from stdin)
    ternit kaggle accounts [--no-refresh] [--json]
    ternit kaggle remove-account NAME
    ternit kaggle clean [--account NAME ...] [--yes]    (the lab's datasets no run needs)

Runs on Kaggle start with `ternit run start --config RUN.json --target kaggle
[--account NAME|auto] [--wait]` (app.runs.cli).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from ..base.cli_args import Parser, add_out, print_to
from ..base.i18n import t
from ..base.numbers import bytes_text, counted
from . import cleanup
from .accounts import Accounts, AccountView, auth_text, key_status_text, leg_state_text
from .credentials import (
    Credential,
    CredentialsError,
    check,
    check_token,
    global_token_note,
    read_token_file,
)
from .errors import KaggleError
from .quota import hours, refresh_text
from .store import ACCOUNT_UNREACHABLE, KaggleStore


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit kaggle", description=t("Аккаунты Kaggle, квота и ядра.", "Kaggle accounts, quota and kernels."))
    sub = p.add_subparsers(dest="cmd", required=True, title=t("команды", "commands"))
    a = sub.add_parser("add-account", help=t(
        "добавить аккаунт: имя и токен API (kaggle.com → `Settings → API → Generate New Token`), "
        "или kaggle.json / имя и ключ (`Create Legacy API Key`)",
        "add an account: a username and an API token (kaggle.com → Settings → API → Generate New Token), "
        "or kaggle.json / a username and key (Create Legacy API Key)"))
    a.add_argument("--username", metavar=t("ИМЯ", "NAME"), help=t("имя пользователя Kaggle", "the Kaggle username"))
    a.add_argument("--token", metavar=t("ТОКЕН", "TOKEN"),
                   help=t("токен API; '-' — прочитать его из stdin (не попадёт в историю оболочки)",
                          "the API token; '-' reads it from stdin (keeps it out of the shell history)"))
    a.add_argument("--token-file", metavar=t("ФАЙЛ", "FILE"),
                   help=t("файл с токеном API (как ~/.kaggle/access_token)",
                          "a file holding the API token (like ~/.kaggle/access_token)"))
    a.add_argument("--json", action="append", default=[], metavar=t("ФАЙЛ", "FILE"),
                   help=t("файл kaggle.json с устаревшим ключом (можно несколько раз)",
                          "a kaggle.json with a legacy key (repeatable)"))
    a.add_argument("--key", metavar=t("КЛЮЧ", "KEY"),
                   help=t("устаревший ключ API; '-' — прочитать его из stdin",
                          "a legacy API key; '-' reads it from stdin"))
    a.add_argument("--no-check", action="store_true",
                   help=t("не спрашивать Kaggle, работает ли ключ", "do not ask Kaggle whether the key works"))
    ls = sub.add_parser("accounts", help=t("аккаунты с квотой, состоянием ключа и тем, что на них хранится",
                                           "the accounts with their quota, key status and what they hold"))
    ls.add_argument("--no-refresh", action="store_true",
                    help=t("показать последние известные цифры, ничего не спрашивая у Kaggle",
                           "show the last known figures, ask Kaggle nothing"))
    ls.add_argument("--json", action="store_true", help=t("вывод в JSON для программ", "machine-readable output"))
    add_out(ls)
    rm = sub.add_parser("remove-account", help=t("забыть аккаунт и его ключ", "forget an account and its key"))
    rm.add_argument("name", metavar=t("ИМЯ", "NAME"), help=t("имя аккаунта", "the account's username"))
    rm.add_argument("--force", action="store_true", help=t(
        "удалить, даже если на нём идут прогоны (лаборатория перестанет следить за ними)",
        "remove it even while runs go on it (the lab stops following them)"))
    cl = sub.add_parser("clean", help=t(
        "показать датасеты лаборатории на аккаунтах, не нужные ни одному прогону, с размерами, и удалить их "
        "после подтверждения", "list the lab's datasets on the accounts that no run needs, with their sizes, "
        "and delete them once confirmed"))
    cl.add_argument("--account", action="append", default=[], metavar=t("ИМЯ", "NAME"),
                    help=t("только этот аккаунт (можно несколько раз; без него — все)",
                           "only this account (repeatable; without it: all)"))
    cl.add_argument("--yes", action="store_true", help=t("удалить без вопроса", "delete without asking"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    note = global_token_note()
    if note and args.cmd in ("add-account", "accounts"):
        print(note, file=sys.stderr)
    store = KaggleStore()
    try:
        accounts = Accounts(store)
        if args.cmd == "add-account":
            return _add(accounts, args)
        if args.cmd == "accounts":
            return print_to(args.out, lambda: _list(accounts, args), "ternit kaggle accounts", args.json)
        if args.cmd == "clean":
            return _clean(accounts, args)
        if args.cmd == "remove-account":
            busy = accounts.in_flight(args.name)
            if busy and not args.force:  # asked first: the runs would go on unseen, spending its quota
                print(t(f"на аккаунте {args.name} идут прогоны: {', '.join(busy)}. Без ключа лаборатория не сможет "
                        "следить за ними и скачать результаты, а ядра продолжат тратить квоту. Дождитесь их конца "
                        "(ternit run wait ID) или остановите (ternit run stop ID); удалить всё равно: --force",
                        f"runs go on account {args.name}: {', '.join(busy)}. Without the key the lab cannot follow "
                        "them or download their outputs, and the kernels go on spending its quota. Wait for them "
                        "(ternit run wait ID) or stop them (ternit run stop ID); to remove it anyway: --force"),
                      file=sys.stderr)
                return 2
            if accounts.remove(args.name):
                print(t(f"аккаунт {args.name} удалён вместе с ключом", f"account {args.name} removed with its key"))
                return 0
            print(t(f"аккаунта {args.name} нет", f"there is no account {args.name}"), file=sys.stderr)
            return 1
        return 2
    except CredentialsError as e:
        print(f"ternit kaggle: {e}", file=sys.stderr)
        return 2
    except KaggleError as e:
        print(f"ternit kaggle {args.cmd}: {e}", file=sys.stderr)
        return 1
    finally:
        store.close()


def _add(accounts: Accounts, args: argparse.Namespace) -> int:
    creds: list[Credential] = []
    if args.json:
        from .credentials import read_kaggle_json

        creds += [read_kaggle_json(f) for f in args.json]
    if args.token is not None or args.token_file:
        if not args.username:
            print(t("для токена укажите и --username ИМЯ", "a token needs --username NAME too"), file=sys.stderr)
            return 2
        if args.token_file:
            creds.append(read_token_file(args.username, args.token_file))
        else:
            token = sys.stdin.readline().strip() if args.token == "-" else args.token
            creds.append(check_token(args.username, token))
    elif args.username or args.key:
        key = sys.stdin.readline().strip() if args.key == "-" else (args.key or "")
        creds.append(check(args.username or "", key))
    if not creds:
        print(t("укажите --username ИМЯ --token - (токен из stdin), --token-file ФАЙЛ или --json kaggle.json",
                "give --username NAME --token - (the token from stdin), --token-file FILE or --json kaggle.json"),
              file=sys.stderr)
        return 2
    names = accounts.add(*creds)
    print(t(f"добавлено: {', '.join(names)}", f"added: {', '.join(names)}"))
    if args.no_check:
        return 0
    bad = 0
    for name in names:
        r = accounts.check(name)
        if r.ok and r.quota is not None:
            print(f"  {name}: {r.message}; " + t(f"квота GPU: осталось {hours(r.quota.remaining_s)}",
                                                 f"GPU quota: {hours(r.quota.remaining_s)} left"))
        elif _unverified(accounts, name):  # offline: one outcome, saved and said unverified (exit 0)
            print(f"  {name}: " + t(f"сохранён, но не проверен: Kaggle сейчас недоступен ({r.message}); ключ "
                                    "проверится, когда Kaggle ответит (ternit kaggle accounts)",
                                    f"saved but not verified: Kaggle cannot be reached now ({r.message}); the key "
                                    "is checked once Kaggle answers (ternit kaggle accounts)"), file=sys.stderr)
        else:
            bad += 1
            print(f"  {name}: {r.message}", file=sys.stderr)
    return 1 if bad else 0


def _unverified(accounts: Accounts, name: str) -> bool:
    """The check could not reach Kaggle (the key was neither accepted nor refused)."""
    row = accounts.store.account(name)
    return row is not None and row.key_status == ACCOUNT_UNREACHABLE


def _list(accounts: Accounts, args: argparse.Namespace) -> int:
    if not args.no_refresh:
        accounts.check_all()
    views = accounts.views()
    if args.json:
        print(json.dumps([_as_dict(v) for v in views], ensure_ascii=False, indent=2))
        return 0
    if not views:
        print(t("аккаунтов нет: ternit kaggle add-account --username ИМЯ --token -",
                "no accounts: ternit kaggle add-account --username NAME --token -"))
        return 0
    for v in views:
        q = v.quota
        quota = (t(f"осталось {hours(q.remaining_s)} из {hours(q.total_s)}, ", f"{hours(q.remaining_s)} of {hours(q.total_s)} left, ")
                 + refresh_text(q.refresh_at)) if q else t("квота неизвестна", "quota unknown")
        held = f" ({auth_text(v)})" if v.auth else ""
        print(f"{v.username}{held}: {key_status_text(v)}; {quota}")
        if v.key_reason and v.key_status != "ok":
            print(f"    {v.key_reason}")
        for d in v.holds:
            print("    " + t("хранит: ", "holds: ") + f"{d.label} ({d.ref})")
        for k in v.kernels[:5]:
            when = datetime.fromtimestamp(k["updated_at"]).strftime("%d.%m %H:%M")
            print("    " + t("ядро: ", "kernel: ") + f"{k.get('kernel_ref') or k['kernel_slug']} — {leg_state_text(k)} ({when})")
    return 0


def _clean(accounts: Accounts, args: argparse.Namespace) -> int:
    names = args.account or accounts.creds.names()
    if not names:
        print(t("аккаунтов нет", "no accounts"))
        return 0
    items = cleanup.survey(accounts, names)
    for name in names:
        mine = [i for i in items if i.account == name]
        print(f"{name}: " + (t(f"датасетов лаборатории {len(mine)}, {bytes_text(cleanup.total_bytes(mine))}",
                                f"{len(mine)} datasets of the lab, {bytes_text(cleanup.total_bytes(mine))}")
                             if mine else t("датасетов лаборатории нет", "no datasets of the lab")))
        for i in mine:
            print(("  " if i.removable else "  [" + t("оставлю", "kept") + "] ") + i.line())
    removable = [i for i in items if i.removable]
    if not removable:
        print(t("удалять нечего: все нужны идущим прогонам", "nothing to delete: running legs need them all")
              if items else t("удалять нечего", "nothing to delete"))
        return 0
    size = bytes_text(cleanup.total_bytes(removable))
    if not args.yes:
        if not sys.stdin.isatty():
            print(t(f"удалить {len(removable)} ({size}): ternit kaggle clean --yes",
                    f"to delete {len(removable)} ({size}): ternit kaggle clean --yes"), file=sys.stderr)
            return 0
        answer = input(t(f"Удалить {counted(len(removable), ('датасет', 'датасета', 'датасетов'), ('dataset', 'datasets'), 'ru')} ({size})? Их загрузят заново, если "
                         "понадобятся. [y/N] ",
                         f"Delete {counted(len(removable), ('датасет', 'датасета', 'датасетов'), ('dataset', 'datasets'), 'en')} ({size})? They are uploaded again if "
                         "needed. [y/N] "))
        if answer.strip().lower() not in ("y", "yes", "д", "да"):
            print(t("ничего не удалено", "nothing deleted"))
            return 0
    failed = cleanup.delete(accounts, removable, progress=lambda m: print("  " + m, flush=True))
    for item, why in failed:
        print(f"  {item.ref}: {why}", file=sys.stderr)
    done = len(removable) - len(failed)
    print(t(f"удалено датасетов: {done} из {len(removable)}", f"deleted {done} of {len(removable)} datasets"))
    return 1 if failed else 0


def _as_dict(v: AccountView) -> dict:
    q = v.quota
    return {
        "username": v.username,
        "auth": v.auth,
        "key_status": v.key_status,
        "key_reason": v.key_reason,
        "quota": None if q is None else {"total_s": q.total_s, "used_s": q.used_s, "reserved_s": q.reserved_s,
                                         "remaining_s": q.remaining_s, "refresh_at": q.refresh_at},
        "holds": [{"kind": d.kind, "ref": d.ref, "hash": d.content_hash, "label": d.label} for d in v.holds],
        "kernels": [{"ref": k.get("kernel_ref"), "state": k["state"], "run_id": k["run_id"],
                     "kernel_status": k.get("kernel_status"), "said": leg_state_text(k)} for k in v.kernels],
    }
