"""The lab's own retries around the calls kaggle does not retry (status, logs, outputs,
push): 429 honours Retry-After, 5xx backs off, the network being down is said as such."""

from __future__ import annotations

import itertools
import json
import time

import pytest

from app.kaggle.backoff import Backoff, retry_after_seconds
from app.kaggle.client import AccountClient
from app.kaggle.credentials import Credential
from app.kaggle.errors import (
    AuthError,
    NetworkDown,
    NotFound,
    PushRefused,
    Stalled,
    Transient,
    UploadFailed,
)
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS

fake = fixtures.fake  # the fake-server fixture


def test_retry_after_forms():
    assert retry_after_seconds("120") == 120
    assert retry_after_seconds("0.25") == 0.25
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    now = time.time()
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))
    assert 28 <= retry_after_seconds(date, now=now) <= 31


def _client(waits: list[float]) -> AccountClient:
    return AccountClient(Credential("alice", KEYS["alice"]),
                         Backoff(attempts=4, base_s=0.01, sleep=waits.append))


def test_429_honours_retry_after_and_5xx_backs_off(fake):
    fake.add_account("alice", KEYS["alice"])
    waits: list[float] = []
    c = _client(waits)
    fake.fail("GetAcceleratorQuotaStatistics", 429, retry_after="7", times=2)
    assert c.quota().total_s > 0
    assert waits == [7.0, 7.0]  # exactly what the server asked for
    waits.clear()
    fake.fail("GetKernelSessionStatus", 503, times=2)
    with pytest.raises(NotFound) as e:  # the kernel does not exist: after the retries, Kaggle's 403
        c.kernel_status("alice/nothing-here")
    assert "403" in str(e.value) and len(waits) == 2 and all(w < 1 for w in waits)
    waits.clear()
    fake.fail("LogsStream", 500, times=10)
    with pytest.raises(Transient, match="500"):
        list(c.log_events("alice/nothing-here"))
    assert len(waits) == 3  # attempts - 1


def test_wrong_key_is_an_auth_error_not_retried(fake):
    fake.add_account("alice", KEYS["alice"])
    waits: list[float] = []
    c = AccountClient(Credential("alice", "wrongwrongwrongwrong"), Backoff(base_s=0.01, sleep=waits.append))
    with pytest.raises(AuthError) as e:
        c.quota()
    assert e.value.status == 401 and "alice" in str(e.value) and waits == []
    fake.fail("GetAcceleratorQuotaStatistics", 403)  # the key check itself: 403 refuses the key too
    with pytest.raises(AuthError):
        _client(waits).quota()


def test_403_is_absent_for_datasets_and_kernels_never_a_refused_key(fake):
    """Kaggle answers 403 for a dataset or kernel that does not exist or is not visible:
    one rule for both, and no verdict on the key (kaggle wraps a kernel's 403 in a ValueError)."""
    fake.add_account("alice", KEYS["alice"])
    fake.add_account("bob", KEYS["bob"])
    c = _client([])
    with pytest.raises(NotFound, match="403"):
        c.kernel_status("alice/no-such-kernel")
    assert c.dataset_stage("alice/ternit-data-0000000000000000") is None
    assert c.dataset_stage("bob/someone-elses") is None  # another account's private dataset: the same
    with pytest.raises(NotFound):
        list(c.log_events("alice/no-such-kernel"))
    assert c.quota().total_s > 0  # and the key works


def test_network_down_is_said_and_retried(fake):
    fake.add_account("alice", KEYS["alice"])
    waits: list[float] = []
    c = _client(waits)
    fake.down = True
    with pytest.raises(NetworkDown, match="недоступен"):
        c.quota()
    assert len(waits) == 3
    fake.down = False
    assert c.quota().total_s > 0


def test_push_refused_inside_http_200(fake, tmp_path):
    fake.add_account("alice", KEYS["alice"])
    fake.refuse_push["alice"] = "Maximum number of GPU sessions reached"
    folder = tmp_path / "k"
    folder.mkdir()
    (folder / "s.py").write_text("print('hi')\n")
    (folder / "kernel-metadata.json").write_text(json.dumps({
        "id": "alice/ternit-test", "title": "ternit-test", "code_file": "s.py", "language": "python",
        "kernel_type": "script"}))
    with pytest.raises(PushRefused, match="GPU sessions"):
        _client([]).push(folder)
    # Accepted, but an input Kaggle cannot attach (e.g. deleted): said, not left to fail later.
    del fake.refuse_push["alice"]
    meta = json.loads((folder / "kernel-metadata.json").read_text())
    meta["dataset_sources"] = ["alice/ternit-data-gone"]
    (folder / "kernel-metadata.json").write_text(json.dumps(meta))
    with pytest.raises(UploadFailed, match="ternit-data-gone"):
        _client([]).push(folder)


def _kernel_folder(tmp_path, slug="ternit-test"):
    folder = tmp_path / slug
    folder.mkdir()
    (folder / "s.py").write_text("print('hi')\n")
    (folder / "kernel-metadata.json").write_text(json.dumps({
        "id": f"alice/{slug}", "title": slug, "code_file": "s.py", "language": "python", "kernel_type": "script"}))
    return folder


@pytest.mark.parametrize("html", [False, True])
def test_html_and_json_errors_are_retried_or_moved_on_alike(fake, tmp_path, html):
    """A front end's web page with 429/503 is retried as Kaggle's JSON is (Retry-After
    honoured); 412, Kaggle having no room, refuses the push: «Авто» moves on."""
    fake.add_account("alice", KEYS["alice"])
    waits: list[float] = []
    c = _client(waits)
    fake.fail("GetAcceleratorQuotaStatistics", 429, retry_after="3", html=html)
    fake.fail("GetAcceleratorQuotaStatistics", 503, html=html)
    assert c.quota().total_s > 0
    assert waits[0] == 3.0 and len(waits) == 2
    fake.fail("SaveKernel", 412, html=html)
    with pytest.raises(PushRefused, match="412"):
        c.push(_kernel_folder(tmp_path))
    assert c.push(_kernel_folder(tmp_path, "ternit-again")).version_number == 1


def test_a_token_goes_as_bearer_and_a_token_sent_as_a_key_is_refused(fake):
    fake.add_account("alice", token="KGAT_alice_token_0001", quota_h=12)
    good = AccountClient(Credential("alice", token="KGAT_alice_token_0001"), Backoff(base_s=0.01, sleep=lambda s: None))
    assert good.quota().total_s == 12 * 3600
    as_key = AccountClient(Credential("alice", key="KGAT_alice_token_0001"), Backoff(base_s=0.01, sleep=lambda s: None))
    with pytest.raises(AuthError) as e:
        as_key.quota()
    assert e.value.status == 401


def test_a_hung_log_stream_is_given_up_after_the_stall_timeout(fake, monkeypatch, tmp_path):
    """No request waits for ever: a stream that sends a few events and then nothing, the
    connection open, ends in Stalled after the stall timeout, not never."""
    import time

    monkeypatch.setenv("TERNIT_KAGGLE_STALL_S", "1")
    fake.add_account("alice", KEYS["alice"])
    fake.kernel_queue_polls = 0
    c = _client([])
    folder = _kernel_folder(tmp_path)
    (folder / "s.py").write_text("import time\nfor i in range(5): print(i, flush=True)\ntime.sleep(60)\n")
    c.push(folder)
    kernel = fake.kernels["alice/ternit-test"]
    deadline = time.monotonic() + 60
    while len(kernel.log) < 5 and time.monotonic() < deadline:  # the script has printed its lines
        time.sleep(0.02)
    fake.hang_stream_once = 3
    got: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(Stalled):
        for ev in c.log_events("alice/ternit-test"):
            got.append(ev["data"])
    assert 0.9 < time.monotonic() - t0 < 20 and got == ["0\n", "1\n", "2\n"] and fake.streams_hung == 1
    # Opened again, the stream replays from the start (the follower skips what it read).
    assert [ev["data"] for ev in itertools.islice(c.log_events("alice/ternit-test"), 5)] == [f"{i}\n" for i in range(5)]


def test_a_request_kaggle_never_answers_times_out_and_is_retried(fake, monkeypatch):
    """The client sets no timeout: without the lab's, a request read and never answered
    would hang the lab's thread for good."""
    import time

    from app.kaggle import sdk

    monkeypatch.setattr(sdk, "READ_S", 0.5)
    fake.add_account("alice", KEYS["alice"])
    waits: list[float] = []
    c = _client(waits)
    fake.hang_once = {"GetAcceleratorQuotaStatistics"}
    t0 = time.monotonic()
    assert c.quota().total_s > 0  # the second try is answered
    assert time.monotonic() - t0 >= 0.5 and len(waits) == 1 and fake.count("GetAcceleratorQuotaStatistics") == 2
