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
from app.kaggle.client import AccountClient
from app.kaggle.credentials import (
    Credential,
    CredentialsError,
    CredentialStore,
    check,
    check_token,
    global_token_note,
    read_kaggle_json,
    read_token_file,
)
from app.kaggle.sdk import import_kaggle
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


def test_global_token_is_named_and_said_unused(monkeypatch, isolated_home):
    assert global_token_note() is None
    monkeypatch.setenv("KAGGLE_API_TOKEN", "KGAT_global")
    assert "KAGGLE_API_TOKEN" in global_token_note() and "не использует" in global_token_note()
    monkeypatch.delenv("KAGGLE_API_TOKEN")
    (isolated_home / ".kaggle").mkdir(exist_ok=True)
    (isolated_home / ".kaggle" / "access_token").write_text("KGAT_file\n")
    assert "access_token" in global_token_note()


def test_tokens_and_keys_side_by_side_in_the_key_file(tmp_path):
    store = CredentialStore(tmp_path / "creds.json")
    store.add(Credential("alice", token="KGAT_alice_token_0001"), Credential("bob", KEYS["bob"]))
    assert store.get("alice").kind == "token" and store.get("bob").kind == "key"
    assert "KGAT_alice" not in repr(store.get("alice"))
    raw = json.loads(store.path.read_text())
    assert {"username": "alice", "token": "KGAT_alice_token_0001"} in raw["accounts"]
    assert check("carol", "KGAT_typed_where_a_key_goes").kind == "token"  # sent as a key it would be refused
    (tmp_path / "access_token").write_text("KGAT_from_a_file_01\n")
    assert read_token_file("dave", tmp_path / "access_token").token == "KGAT_from_a_file_01"
    with pytest.raises(CredentialsError, match="токен"):
        check_token("dave", "short")


def test_kaggle_import_prints_nothing(tmp_path):
    # A fresh process with no global credentials: kaggle's own import prints a help text.
    code = "from app.kaggle.sdk import import_kaggle; import_kaggle(); print('ok')"
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


def test_a_global_token_is_not_used_by_the_labs_accounts(fake, monkeypatch, isolated_home, capsys):
    """Kaggle now sets up its CLI with KAGGLE_API_TOKEN or ~/.kaggle/access_token; the
    client would send that token for every legacy-key account. Here the global token is
    bob's: every account of the lab must still speak as itself, and the lab says the global
    token is there and not used."""
    from app.kaggle import cli

    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=2)
    fake.add_account("bob", token="KGAT_bobs_global_token", quota_h=30, used_h=20)
    fake.add_account("carol", token="KGAT_carols_own_token", quota_h=30, used_h=10)
    accounts = Accounts(KaggleStore())
    accounts.add(Credential("alice", KEYS["alice"]), Credential("carol", token="KGAT_carols_own_token"))
    monkeypatch.setenv("KAGGLE_API_TOKEN", "KGAT_bobs_global_token")
    (isolated_home / ".kaggle").mkdir(exist_ok=True)
    (isolated_home / ".kaggle" / "access_token").write_text("KGAT_bobs_global_token\n")
    results = {r.username: r for r in accounts.check_all()}
    assert results["alice"].ok and results["alice"].quota.remaining_s == pytest.approx(28 * 3600)
    assert results["carol"].ok and results["carol"].quota.remaining_s == pytest.approx(20 * 3600)
    assert {u for _, u in fake.calls} == {"alice", "carol"}  # nothing went as bob
    capsys.readouterr()
    assert cli.main(["accounts", "--no-refresh"]) == 0
    err = capsys.readouterr().err
    assert "KAGGLE_API_TOKEN" in err and "не использует" in err


def test_importing_the_client_reads_no_global_credentials(fake, isolated_home, tmp_path):
    """`import kaggle` authenticates at import time with the global token (asking Kaggle to
    introspect it) and makes its config folder: the lab imports it with neither."""
    (isolated_home / ".kaggle").mkdir(exist_ok=True)
    (isolated_home / ".kaggle" / "access_token").write_text("KGAT_global_file_token\n")
    code = ("import sys; from kagglesdk.kaggle_env import KaggleEnv, _env_to_endpoint; "
            "_env_to_endpoint[KaggleEnv.LOCAL] = sys.argv[1]; "
            "from app.kaggle.sdk import import_kaggle; import_kaggle(); print('ok')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE")}
    env.update(HOME=str(isolated_home), XDG_CONFIG_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT),
               KAGGLE_API_TOKEN="KGAT_global_env_token", KAGGLE_API_ENVIRONMENT="LOCALHOST",
               TERNIT_HOME=str(tmp_path / "lab"))
    out = subprocess.run([sys.executable, "-c", code, fake.url], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0 and out.stdout == "ok\n" and out.stderr == "", out.stderr
    assert fake.calls == []  # no token was sent anywhere
    assert not (tmp_path / "xdg" / "kaggle").exists()


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


def test_cli_adds_a_token_from_stdin_or_a_file_and_never_prints_it(fake, tmp_path, monkeypatch, capsys):
    import io

    from app.kaggle import cli

    fake.add_account("alice", token="KGAT_alice_token_0001", quota_h=30, used_h=3)
    fake.add_account("bob", token="KGAT_bob_token_00002", quota_h=30)
    monkeypatch.setattr("sys.stdin", io.StringIO("KGAT_alice_token_0001\n"))
    assert cli.main(["add-account", "--username", "alice", "--token", "-"]) == 0
    (tmp_path / "access_token").write_text("KGAT_bob_token_00002\n")
    assert cli.main(["add-account", "--username", "bob", "--token-file", str(tmp_path / "access_token")]) == 0
    out = capsys.readouterr()
    assert "27 ч 00 мин" in out.out and "KGAT_" not in out.out + out.err
    assert CredentialStore().get("alice").kind == "token" and CredentialStore().get("bob").token == "KGAT_bob_token_00002"
    assert cli.main(["accounts", "--no-refresh"]) == 0
    assert "alice (токен API): ключ работает" in capsys.readouterr().out
    assert cli.main(["add-account", "--token", "-"]) == 2  # a token needs its username
    monkeypatch.setattr("sys.stdin", io.StringIO("KGAT_wrong_token_0003\n"))
    assert cli.main(["add-account", "--username", "carol", "--token", "-"]) == 1  # 401: said, exit 1
    assert "не принят" in capsys.readouterr().err


def test_cli_clean_lists_the_labs_datasets_with_sizes_and_deletes_what_no_run_needs(fake, tiny_data, capsys):
    """Uploaded datasets pile up in an account's private storage: `ternit kaggle clean`
    names them with their sizes, keeps what a leg in flight mounts, deletes the rest on --yes."""
    from app.kaggle import cli, datasets
    from app.kaggle.client import AccountClient

    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    store = KaggleStore()
    client = AccountClient(Credential("alice", KEYS["alice"]))
    data = datasets.data_bundle(tiny_data, store)
    code = datasets.code_bundle()
    for b in (data, code):
        datasets.ensure(client, store, b, poll_s=0.01)
    fake.datasets["alice/not-the-labs"] = type(fake.datasets[data.ref("alice")])("alice", "not-the-labs", {"x": b"1"})
    store.add_leg(run_id="r-in-flight", run_dir="/x", account="alice", kernel_slug="k", state="running",
                  data_hash=data.content_hash, code_hash="0" * 64)
    store.close()
    capsys.readouterr()
    assert cli.main(["clean"]) == 0  # not a terminal, no --yes: listed, nothing deleted
    out = capsys.readouterr()
    assert data.slug in out.out and code.slug in out.out and "not-the-labs" not in out.out
    assert "нужен: r-in-flight" in out.out and "КиБ" in out.out and "--yes" in out.err
    assert len(fake.datasets) == 3
    assert cli.main(["clean", "--yes"]) == 0
    assert set(fake.datasets) == {data.ref("alice"), "alice/not-the-labs"}  # needed, and not the lab's
    assert [d.kind for d in KaggleStore().holdings("alice")] == ["data"]


def test_removing_an_account_whose_runs_train_asks_first_and_marks_them_untracked(tiny_data, capsys):
    """`ternit kaggle remove-account alice` while a run trains there: refused naming the run
    (its kernel would go on spending the quota unseen); with --force removed, and the run
    shows «не отслеживается: аккаунт удалён» with the way back (add the account again)."""
    from app.kaggle import cli as kaggle_cli
    from app.kaggle.credentials import Credential, CredentialStore
    from app.kaggle.store import KaggleStore
    from app.runs.registry import Registry
    from tests.fake_kaggle.fixtures import KEYS, tiny_config

    CredentialStore().add(Credential("alice", key=KEYS["alice"]))
    reg = Registry()
    rec = reg.create_run(tiny_config(tiny_data))
    store = KaggleStore(reg.state)
    store.ensure_account("alice")
    store.add_leg(run_id=rec.id, run_dir=str(rec.path), account="alice", kernel_slug="k", state="running")
    reg.close()
    assert kaggle_cli.main(["remove-account", "alice"]) == 2
    err = capsys.readouterr().err
    assert rec.id in err and "--force" in err, err
    assert CredentialStore().names() == ["alice"]
    assert kaggle_cli.main(["remove-account", "alice", "--force"]) == 0
    assert CredentialStore().names() == []
    reg = Registry()
    said = reg.get(rec.id).last_message or ""
    reg.close()
    assert ("не отслеживается" in said or "not followed" in said) and "add-account --username alice" in said, said
