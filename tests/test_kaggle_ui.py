"""The Kaggle accounts dialog and «Машина» (offscreen Qt) against the fake server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.kaggle import accounts_for_form, auto_explanation
from app.kaggle.credentials import Credential, CredentialStore
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts, tiny_config

fake = fixtures.fake  # the fake-server fixture


def _events(run_dir: Path, kind: str) -> list[dict]:
    path = Path(run_dir) / "events.jsonl"
    evs = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []
    return [e for e in evs if e["event"] == kind]


def test_accounts_dialog_adds_tests_shows_quota_and_removes(qtbot, fake, tmp_path):
    from ui.kaggle.accounts import AccountsDialog

    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=10)
    fake.add_account("bob", KEYS["bob"], quota_h=30)
    kj = tmp_path / "kaggle.json"
    kj.write_text(json.dumps({"username": "alice", "key": KEYS["alice"]}))
    dlg = AccountsDialog()
    qtbot.addWidget(dlg)
    assert dlg.table.rowCount() == 0
    with qtbot.waitSignal(dlg.checked, timeout=20000):
        dlg.add_from_files([str(kj)])
    with qtbot.waitSignal(dlg.checked, timeout=20000):
        dlg.add_credential(Credential("bob", "wrong-key-for-bob-000"))
    assert dlg.table.rowCount() == 2
    names = [dlg.table.item(r, 0).text() for r in range(2)]
    alice, bob = names.index("alice"), names.index("bob")
    bar = dlg.table.cellWidget(alice, 2)
    assert bar.value() == 667 and "20 ч 00 мин" in bar.text() and "обновится" in bar.text()
    assert dlg.table.item(alice, 1).text() == "ключ работает"
    assert dlg.table.item(bob, 1).text() == "ключ не принят"
    assert "401" in dlg.table.item(bob, 1).toolTip()
    assert "bob" in dlg.status.text()
    dlg.table.selectRow(bob)
    dlg.remove_selected(confirm=False)
    assert dlg.table.rowCount() == 1 and CredentialStore().names() == ["alice"]
    assert not dlg.warning.isVisible()


def test_machine_lists_accounts_and_explains_auto(fake, tiny_data):
    """«Машина» in the form: this computer, «Авто» and each account with its quota, and the one
    line under it saying whom «Авто» picks now and why (headless: app.form.run_form over app.window.lab)."""
    from app.form.checks import AUTO_MACHINE
    from app.form.run_form import RunForm
    from app.kaggle.accounts import Accounts
    from app.kaggle.store import KaggleStore
    from app.window.lab import load_form_context

    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=25)
    fake.add_account("bob", KEYS["bob"], quota_h=30)
    add_lab_accounts("alice", "bob")
    store = KaggleStore()
    Accounts(store).check_all()
    store.close()
    form_accounts = {a.name: a for a in accounts_for_form()}
    assert form_accounts["bob"].quota_hours == 30 and form_accounts["alice"].valid
    form = RunForm(load_form_context(extra_prepared=[str(tiny_data)]))
    labels = [label for _, label in form.machine_choices()]
    assert labels[:2] == ["Этот компьютер", "Авто (Kaggle)"] and "bob — осталось 30,0 ч GPU" in labels
    assert form.values["machine"] == AUTO_MACHINE
    form.set("constellations", ["tiny"])
    form.set("limit_min", 600)
    assert form.machine_note().startswith("Авто: bob") and "хватает на весь прогон" in form.machine_note()
    form.set("limit_min", 2000)  # nobody covers it: the most quota, to be continued
    assert "продолжится на другом аккаунте" in form.machine_note()
    assert auto_explanation(form.run_config()) == form.machine_note()


def shown_window(qtbot, tiny_data):
    """The lab's window, shown, with the tiny prepared data to choose from."""
    from app.runs import RunManager
    from ui.window.main_window import MainWindow

    w = MainWindow(runs=RunManager(), poll_ms=100, extra_prepared=[str(tiny_data)])
    qtbot.addWidget(w)
    w.show()
    return w


def test_a_kaggle_chain_followed_by_the_window_and_a_cli_wait_goes_on_on_a_second_account(qtbot, fake, tiny_data):
    """One chain (a Kaggle leg is a real trainer process: each chain costs two), checked by
    everything that follows it — it was run three times by three tests:
    - the window follows it into its next leg as one curve, and says so in its notification;
    - `ternit run start --wait`'s follower (RunManager.wait, here in a thread beside the
      window, as the CLI beside an open window) sees leg 1's end by the quota before leg 2's
      events, and the chain's last end closes it;
    - the chain itself: leg 2 on bob resumes from leg 1's checkpoint (sent to bob as a
      dataset, byte for byte), ends at steps_to, and «Лимит, мин» is the run's."""
    import threading

    from app.base import run_status as st
    from app.kaggle import runner
    from app.kaggle.store import KaggleStore
    from app.runs import RunManager
    from ui.window.main_window import LIVE

    steps_to = 100  # leg 1 stops at its first steps (12 ms of quota); any count well above proves the same
    # Alice's quota ends the first leg at once (12 ms above the 1 min margin); the lab goes
    # on on bob (10 h) by itself.
    fake.add_account("alice", KEYS["alice"], quota_h=(1 + 0.0002) / 60)
    fake.add_account("bob", KEYS["bob"], quota_h=10)
    add_lab_accounts("alice", "bob")
    w = shown_window(qtbot, tiny_data)
    w.ensure_ready()
    cfg = tiny_config(tiny_data, steps_to=steps_to, limit_min=5, eval_every=100)
    cfg["target"]["account"] = "alice"
    first = w.start_run(cfg)
    assert first is not None and w.followed == first.id

    seen: list[dict] = []
    waited: dict = {}

    def cli_wait() -> None:
        try:
            waited["last"] = RunManager().wait(first.id, on_event=lambda ev: seen.append(dict(ev)), poll_s=0.1,
                                               timeout=180)
        except BaseException as e:  # noqa: BLE001 - said in the main thread's assertion
            waited["error"] = e

    waiter = threading.Thread(target=cli_wait, name="cli-wait", daemon=True)
    waiter.start()

    qtbot.waitUntil(lambda: w.followed != first.id, timeout=120_000)
    two = w.runs.registry.get(w.followed)
    assert (two.chain_id, two.leg, two.target_account) == (first.chain_id, 2, "bob")
    qtbot.waitUntil(lambda: not w.runs.registry.get(two.id).active, timeout=120_000)
    qtbot.waitUntil(lambda: w.plot.traces[LIVE].points >= steps_to, timeout=20_000)  # both legs, one curve
    title, text = w.notifications[0]
    assert "лимит" in title and "bob" in text and "этап 2" in text  # not «можно продолжить»
    w.close()

    # RunManager.wait (the CLI's --wait): leg 1's end by the quota, then leg 2's to the end.
    waiter.join(180)
    assert not waiter.is_alive() and "error" not in waited, waited
    last = waited["last"]
    assert last.status == st.FINISHED and last.leg == 2, last.last_message
    ends = [ev.get("reason") for ev in seen if ev.get("event") == "end"]
    assert ends == ["time_limit", "steps_reached"], ends

    # The chain: leg 1 on alice to the quota, leg 2 on bob to steps_to.
    assert runner.wait_followers(120)
    reg = w.runs.registry
    legs = reg.chain(first.chain_id)
    assert [r.leg for r in legs] == [1, 2]
    one, two = legs
    assert (one.target_account, one.status) == ("alice", st.TIME_LIMIT)
    assert (two.target_account, two.status) == ("bob", st.FINISHED), two.last_message
    reg.ingest(one.id)
    reg.ingest(two.id)
    one, two = reg.get(one.id), reg.get(two.id)
    assert one.last_step < steps_to and two.last_step == steps_to
    ckpt = Path(two.config()["resume_from"])
    assert ckpt.parent == one.path / "checkpoints" and ckpt.is_file()
    # The second leg resumed where the first stopped: its steps continue the count.
    assert _events(two.path, "step")[0]["step"] == one.last_step + 1
    # Bob got the checkpoint as a dataset, byte for byte.
    ckpt_ds = [d for d in fake.datasets.values() if d.owner == "bob" and d.slug.startswith("ternit-ckpt-")]
    assert len(ckpt_ds) == 1 and ckpt_ds[0].files[ckpt.name] == ckpt.read_bytes()
    assert "Продолжение" in one.last_message
    # «Лимит, мин» is the run's: leg 2's kernel gets the 5 min less what leg 1's was given,
    # and its run.json keeps the 5 the user set (what «Продолжить» offers again).
    store = KaggleStore()
    try:
        leg_one, leg_two = store.leg(one.id), store.leg(two.id)
    finally:
        store.close()
    assert leg_two["allot_min"] == pytest.approx(5 - leg_one["limit_min"])
    assert leg_two["limit_min"] <= leg_two["allot_min"] < 5
    assert two.config()["training"]["limit_min"] == 5


def test_stop_on_a_kaggle_run_says_what_happens_in_the_window(qtbot, fake, tiny_data):

    fake.run_kernels = False  # the kernel stays queued
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    w = shown_window(qtbot, tiny_data)
    rec = w.start_run(tiny_config(tiny_data, limit_min=60))
    qtbot.waitUntil(lambda: w.runs.registry.get(rec.id).status == "queued", timeout=60_000)
    assert "Остановить" in w.banner.stop_button.text() and "kaggle.com" in w.banner.stop_button.toolTip()
    w.stop_run(rec.id)
    said = w.statusBar().currentMessage()
    assert not said.endswith("сохранение…") and "Stop session" in said  # nothing is saving: how to stop it
    w.tick()
    assert w.banner.note.isVisible() and "Stop session" in w.banner.note.text()
    w.close()


def test_accounts_dialog_refreshes_the_quota_when_it_opens(qtbot, fake):
    from app.kaggle.accounts import Accounts
    from app.kaggle.store import KaggleStore
    from ui.kaggle.accounts import AccountsDialog

    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=2)
    add_lab_accounts("alice")
    store = KaggleStore()
    Accounts(store).check_all()  # what the lab knew last week
    store.close()
    fake.accounts["alice"].used_s = 10 * 3600.0  # spent since, e.g. on kaggle.com
    dlg = AccountsDialog()
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.checked, timeout=20000):
        pass
    assert "20 ч 00 мин" in dlg.table.cellWidget(0, 2).text()


def test_accounts_dialog_says_a_global_token_is_there_and_unused_and_every_key_works(qtbot, fake, monkeypatch):
    from ui.kaggle.accounts import AccountsDialog

    fake.add_account("alice", KEYS["alice"], quota_h=30, used_h=10)
    fake.add_account("bob", KEYS["bob"])
    fake.add_account("eve", token="KGAT_someone_elses_token")
    add_lab_accounts("alice", "bob")
    monkeypatch.setenv("KAGGLE_API_TOKEN", "KGAT_someone_elses_token")
    dlg = AccountsDialog()
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.checked, timeout=20000):
        pass
    assert "KAGGLE_API_TOKEN" in dlg.warning.text() and "не использует" in dlg.warning.text()
    assert dlg.status.text() == "alice, bob: ключ работает"
    assert [dlg.table.item(r, 1).text() for r in range(2)] == ["ключ работает"] * 2
    assert "20 ч 00 мин" in dlg.table.cellWidget(0, 2).text()  # alice's own quota, not eve's
    assert "eve" not in {u for _, u in fake.calls}


def test_accounts_dialog_adds_an_api_token(qtbot, fake):
    from ui.kaggle.accounts import AccountsDialog, AddByHandDialog

    fake.add_account("alice", token="KGAT_alice_token_0001", quota_h=30, used_h=6)
    dlg = AccountsDialog()
    qtbot.addWidget(dlg)
    assert dlg.add_token.text() == "Добавить токен…"
    hand = AddByHandDialog(dlg, token=True)
    qtbot.addWidget(hand)
    hand.username.setText("alice")
    hand.key.setText("KGAT_alice_token_0001")
    hand._accept()
    assert hand.credential is not None and hand.credential.kind == "token"
    with qtbot.waitSignal(dlg.checked, timeout=20000):
        dlg.add_credential(hand.credential)
    assert dlg.table.item(0, 1).text() == "ключ работает" and "24 ч 00 мин" in dlg.table.cellWidget(0, 2).text()
    assert CredentialStore().get("alice").token == "KGAT_alice_token_0001"


def test_removing_an_account_with_a_run_in_flight_says_so(qtbot, fake, tiny_data, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from app.kaggle import runner
    from app.runs.registry import Registry
    from ui.kaggle.accounts import AccountsDialog

    fake.run_kernels = False
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    reg = Registry()
    rec = reg.create_run(tiny_config(tiny_data, limit_min=60))
    runner.start_kaggle_run(reg, rec.id, account="alice")
    asked: list[str] = []
    monkeypatch.setattr(QMessageBox, "question", lambda _parent, _title, text: asked.append(text)
                        or QMessageBox.StandardButton.No)  # the user reads it and keeps the account
    dlg = AccountsDialog()
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.checked, timeout=20000):
        pass
    dlg.table.selectRow(0)
    dlg.remove_selected()
    assert rec.id in asked[0] and "следить" in asked[0]
    assert CredentialStore().names() == ["alice"]


def test_accounts_dialog_cleans_the_labs_datasets_after_asking(qtbot, fake, tiny_data):
    from app.kaggle import datasets
    from app.kaggle.client import AccountClient
    from app.kaggle.store import KaggleStore
    from ui.kaggle.accounts import AccountsDialog

    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    store = KaggleStore()
    client = AccountClient(Credential("alice", KEYS["alice"]))
    for bundle in (datasets.data_bundle(tiny_data, store), datasets.code_bundle()):
        datasets.ensure(client, store, bundle, poll_s=0.01)
    store.close()
    dlg = AccountsDialog()
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.checked, timeout=20000):
        pass
    asked: list[tuple[int, str]] = []
    dlg.cleaning.confirm = lambda removable, kept: asked.append(
        (len(removable), "\n".join(i.line() for i in removable))) or True
    with qtbot.waitSignal(dlg.cleaning.finished, timeout=20000):
        dlg.clean.click()
    assert asked[0][0] == 2 and "ternit-data-" in asked[0][1] and "КиБ" in asked[0][1]
    assert dlg.status.text() == "Удалено датасетов: 2 из 2." and fake.datasets == {}
    assert dlg.table.item(0, 3).text() == "ничего" and dlg.clean.isEnabled()
