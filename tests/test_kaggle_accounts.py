"""Kaggle accounts: the credentials file, one client per account against the fake server,
quota, refused keys, the global-token warning, and `ternit kaggle ...`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.kaggle.accounts import Accounts
from app.kaggle.client import AccountClient, import_kaggle
from app.kaggle.credentials import (
    Credential,
    CredentialsError,
    CredentialStore,
    global_token_warning,
    read_kaggle_json,
)
from app.kaggle.store import KaggleStore
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts

fake = fixtures.fake  # the fake-server fixture

ROOT = Path(__file__).resolve().parent.parent


def test_credentials_file_is_owner_only_and_atomic(tmp_path):
    store = CredentialStore(tmp_path / "cfg" / "creds.json")
    store.add(Credential("alice", KEYS["alice"]), Credential("bob", KEYS["bob"]))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert store.names() == ["alice", "bob"]
    assert store.get("bob").key == KEYS["bob"]
    assert KEYS["alice"] not in repr(store.get("alice"))  # repr never shows a key
    assert not [p for p in store.path.parent.iterdir() if p.name.endswith(".tmp")]
    os.chmod(store.path, 0o644)  # e.g. restored from a backup
    store.load()
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert store.remove("alice") and not store.remove("alice")
    assert store.names() == ["bob"]
    with pytest.raises(CredentialsError, match="carol"):
        store.get("carol")


def test_kaggle_json_and_bad_input(tmp_path):
    good = tmp_path / "kaggle.json"
    good.write_text(json.dumps({"username": "alice", "key": KEYS["alice"]}))
    assert read_kaggle_json(good) == Credential("alice", KEYS["alice"])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CredentialsError, match="JSON"):
        read_kaggle_json(tmp_path / "bad.json")
    (tmp_path / "nokey.json").write_text(json.dumps({"username": "alice"}))
    with pytest.raises(CredentialsError):
        read_kaggle_json(tmp_path / "nokey.json")
    with pytest.raises(CredentialsError):
        read_kaggle_json(tmp_path / "missing.json")


def test_global_token_is_detected(monkeypatch, isolated_home):
    assert global_token_warning() is None
    monkeypatch.setenv("KAGGLE_API_TOKEN", "KGAT_global")
    assert "KAGGLE_API_TOKEN" in global_token_warning()
    monkeypatch.delenv("KAGGLE_API_TOKEN")
    (isolated_home / ".kaggle").mkdir(exist_ok=True)
    (isolated_home / ".kaggle" / "access_token").write_text("KGAT_file\n")
    assert "access_token" in global_token_warning()


def test_kaggle_import_prints_nothing(tmp_path):
    # A fresh process with no global credentials: kaggle's own import prints a help text.
    code = "from app.kaggle.client import import_kaggle; import_kaggle(); print('ok')"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE")}
    env.update(HOME=str(tmp_path), KAGGLE_CONFIG_DIR=str(tmp_path / "kcfg"), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n" and out.stderr == ""
    assert import_kaggle() is import_kaggle()


def test_each_account_has_its_own_client_and_quota(fake):
    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=5)
    fake.add_account("bob", KEYS["bob"], quota_h=30, used_h=29)
    a = AccountClient(Credential("alice", KEYS["alice"]))
    b = AccountClient(Credential("bob", KEYS["bob"]))
    assert a.api is not b.api and a.api.config_values is not b.api.config_values
    qa, qb = a.quota(), b.quota()
    assert qa.remaining_s == pytest.approx(25 * 3600) and qb.remaining_s == pytest.approx(3600)
    assert qa.refresh_at is not None and qa.refresh_at > qa.checked_at
    assert {u for m, u in fake.calls if m == "GetAcceleratorQuotaStatistics"} == {"alice", "bob"}


def test_refused_key_marks_the_account_invalid_and_no_key_in_sqlite(fake):
    fake.add_account("alice", KEYS["alice"])
    fake.add_account("bob", KEYS["bob"])
    add_lab_accounts("alice", "bob", wrong_key=("bob",))
    store = KaggleStore()
    accounts = Accounts(store)
    results = {r.username: r for r in accounts.check_all()}
    assert results["alice"].ok and not results["bob"].ok
    assert "401" in results["bob"].message
    views = {v.username: v for v in accounts.views()}
    assert views["bob"].key_status == "invalid" and not views["bob"].usable
    assert views["alice"].key_status == "ok" and views["alice"].remaining_s > 0
    store.close()
    db = (Path(os.environ["TERNIT_HOME"]) / "data" / "state.sqlite").read_bytes()
    for key in KEYS.values():
        assert key.encode() not in db and key[8:].encode() not in db


def test_cli_add_and_list_accounts(fake, tmp_path, capsys):
    from app.kaggle import cli

    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=2)
    fake.add_account("bob", KEYS["bob"], quota_h=30)
    kj = tmp_path / "kaggle.json"
    kj.write_text(json.dumps({"username": "alice", "key": KEYS["alice"]}))
    assert cli.main(["add-account", "--json", str(kj)]) == 0
    assert cli.main(["add-account", "--username", "bob", "--key", KEYS["bob"]]) == 0
    capsys.readouterr()
    assert cli.main(["accounts", "--json"]) == 0
    listed = {a["username"]: a for a in json.loads(capsys.readouterr().out)}
    assert listed["alice"]["quota"]["remaining_s"] == pytest.approx(28 * 3600)
    assert listed["bob"]["key_status"] == "ok"
    assert cli.main(["accounts"]) == 0
    text = capsys.readouterr().out
    assert "alice" in text and "28 ч 00 мин" in text  # Russian by default
    assert KEYS["alice"] not in text and KEYS["bob"] not in text
    assert cli.main(["add-account", "--username", "carol", "--key", "x"]) == 2
    assert cli.main(["remove-account", "bob"]) == 0
    assert CredentialStore().names() == ["alice"]


def test_a_global_token_asks_kaggle_nothing_and_keeps_each_key_status(fake, monkeypatch, capsys):
    # With KAGGLE_API_TOKEN set the client sends that token instead of the account's key:
    # a check then would mark a good key refused (or show the token owner's quota).
    from app.kaggle import cli

    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=2)
    add_lab_accounts("alice")
    store = KaggleStore()
    accounts = Accounts(store)
    assert accounts.check("alice").ok
    asked = len(fake.calls)
    monkeypatch.setenv("KAGGLE_API_TOKEN", "KGAT_someone_elses_token")
    result = accounts.check("alice")
    assert not result.ok and "KAGGLE_API_TOKEN" in result.message
    assert cli.main(["accounts"]) == 0
    assert len(fake.calls) == asked  # nothing went to Kaggle as the token's owner
    view = {v.username: v for v in accounts.views()}["alice"]
    assert view.key_status == "ok" and view.usable and view.remaining_s == pytest.approx(28 * 3600)
    assert "ключ работает" in capsys.readouterr().out
    store.close()


def test_a_mistyped_new_key_does_not_lose_the_key_that_worked(fake):
    """Re-adding an account with another key: its old status no longer shows (the new key is
    unchecked), and if Kaggle refuses the new key the previous one is put back."""
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    accounts = Accounts(KaggleStore())
    accounts.add(Credential("alice", KEYS["alice"]))
    assert accounts.check("alice").ok
    accounts.add(Credential("alice", "0" * 32))  # a typo
    assert {v.username: v.key_status for v in accounts.views()}["alice"] == "unknown"
    # The window's dialog checks from a thread with an Accounts of its own.
    result = Accounts(KaggleStore()).check("alice")
    assert not result.ok and "прежний ключ оставлен" in result.message
    assert accounts.creds.get("alice").key == KEYS["alice"]
    assert {v.username: v.key_status for v in accounts.views()}["alice"] == "ok"
    assert accounts.check("alice").ok
