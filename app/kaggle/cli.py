"""`ternit kaggle ...`: accounts and their quota without the window.

    ternit kaggle add-account --json kaggle.json [--json other.json ...]
    ternit kaggle add-account --username U --key K      (--key - reads it from stdin)
    ternit kaggle accounts [--no-refresh] [--json]
    ternit kaggle remove-account NAME

Runs on Kaggle start with `ternit run start --config RUN.json --target kaggle
[--account NAME|auto] [--wait]` (app.runs.cli).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from ..base.cli_args import Parser
from ..base.i18n import t
from .accounts import Accounts, AccountView, key_status_text
from .credentials import Credential, CredentialsError, check, global_token_warning
from .quota import hours, refresh_text
from .store import KaggleStore


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit kaggle", description=t("Аккаунты Kaggle, квота и ядра.", "Kaggle accounts, quota and kernels."))
    sub = p.add_subparsers(dest="cmd", required=True, title=t("команды", "commands"))
    a = sub.add_parser("add-account", help=t("добавить аккаунты из файлов kaggle.json или по имени и ключу",
                                             "add accounts from kaggle.json files or a username and key"))
    a.add_argument("--json", action="append", default=[], metavar=t("ФАЙЛ", "FILE"),
                   help=t("файл kaggle.json (можно несколько раз)", "a kaggle.json (repeatable)"))
    a.add_argument("--username", metavar=t("ИМЯ", "NAME"), help=t("имя пользователя Kaggle", "the Kaggle username"))
    a.add_argument("--key", metavar=t("КЛЮЧ", "KEY"),
                   help=t("ключ API; '-' — прочитать его из stdin (не попадёт в историю оболочки)",
                          "the API key; '-' reads it from stdin (keeps it out of the shell history)"))
    a.add_argument("--no-check", action="store_true",
                   help=t("не спрашивать Kaggle, работает ли ключ", "do not ask Kaggle whether the key works"))
    ls = sub.add_parser("accounts", help=t("аккаунты с квотой, состоянием ключа и тем, что на них хранится",
                                           "the accounts with their quota, key status and what they hold"))
    ls.add_argument("--no-refresh", action="store_true",
                    help=t("показать последние известные цифры, ничего не спрашивая у Kaggle",
                           "show the last known figures, ask Kaggle nothing"))
    ls.add_argument("--json", action="store_true", help=t("вывод в JSON для программ", "machine-readable output"))
    rm = sub.add_parser("remove-account", help=t("забыть аккаунт и его ключ", "forget an account and its key"))
    rm.add_argument("name", metavar=t("ИМЯ", "NAME"), help=t("имя аккаунта", "the account's username"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    warning = global_token_warning()
    if warning:
        print(warning, file=sys.stderr)
    store = KaggleStore()
    try:
        accounts = Accounts(store)
        if args.cmd == "add-account":
            return _add(accounts, args)
        if args.cmd == "accounts":
            return _list(accounts, args)
        if args.cmd == "remove-account":
            if accounts.remove(args.name):
                print(t(f"аккаунт {args.name} удалён вместе с ключом", f"account {args.name} removed with its key"))
                return 0
            print(t(f"аккаунта {args.name} нет", f"there is no account {args.name}"), file=sys.stderr)
            return 1
        return 2
    except CredentialsError as e:
        print(f"ternit kaggle: {e}", file=sys.stderr)
        return 2
    finally:
        store.close()


def _add(accounts: Accounts, args: argparse.Namespace) -> int:
    creds: list[Credential] = []
    if args.json:
        from .credentials import read_kaggle_json

        creds += [read_kaggle_json(f) for f in args.json]
    if args.username or args.key:
        key = sys.stdin.readline().strip() if args.key == "-" else (args.key or "")
        creds.append(check(args.username or "", key))
    if not creds:
        print(t("укажите --json ФАЙЛ или --username ИМЯ --key КЛЮЧ", "give --json FILE or --username NAME --key KEY"),
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
        else:
            bad += 1
            print(f"  {name}: {r.message}", file=sys.stderr)
    return 1 if bad else 0


def _list(accounts: Accounts, args: argparse.Namespace) -> int:
    if not args.no_refresh:
        accounts.check_all()
    views = accounts.views()
    if args.json:
        print(json.dumps([_as_dict(v) for v in views], ensure_ascii=False, indent=2))
        return 0
    if not views:
        print(t("аккаунтов нет: ternit kaggle add-account --json kaggle.json",
                "no accounts: ternit kaggle add-account --json kaggle.json"))
        return 0
    for v in views:
        q = v.quota
        quota = (t(f"осталось {hours(q.remaining_s)} из {hours(q.total_s)}, ", f"{hours(q.remaining_s)} of {hours(q.total_s)} left, ")
                 + refresh_text(q.refresh_at)) if q else t("квота неизвестна", "quota unknown")
        print(f"{v.username}: {key_status_text(v)}; {quota}")
        if v.key_reason and v.key_status != "ok":
            print(f"    {v.key_reason}")
        for d in v.holds:
            print("    " + t("хранит: ", "holds: ") + f"{d.label} ({d.ref})")
        for k in v.kernels[:5]:
            when = datetime.fromtimestamp(k["updated_at"]).strftime("%d.%m %H:%M")
            print("    " + t("ядро: ", "kernel: ") + f"{k.get('kernel_ref') or k['kernel_slug']} — {k['state']} ({when})")
    return 0


def _as_dict(v: AccountView) -> dict:
    q = v.quota
    return {
        "username": v.username,
        "key_status": v.key_status,
        "key_reason": v.key_reason,
        "quota": None if q is None else {"total_s": q.total_s, "used_s": q.used_s, "reserved_s": q.reserved_s,
                                         "remaining_s": q.remaining_s, "refresh_at": q.refresh_at},
        "holds": [{"kind": d.kind, "ref": d.ref, "hash": d.content_hash, "label": d.label} for d in v.holds],
        "kernels": [{"ref": k.get("kernel_ref"), "state": k["state"], "run_id": k["run_id"]} for k in v.kernels],
    }
