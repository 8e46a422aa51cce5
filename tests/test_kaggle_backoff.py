"""The lab's own retries around the calls kaggle does not retry (status, logs, outputs,
push): 429 honours Retry-After, 5xx backs off, the network being down is said as such."""

from __future__ import annotations

import json
import time

import pytest

from app.kaggle.backoff import Backoff, retry_after_seconds
from app.kaggle.client import AccountClient
from app.kaggle.credentials import Credential
from app.kaggle.errors import AuthError, NetworkDown, PushRefused, Transient, UploadFailed
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
    with pytest.raises(Exception) as e:  # the kernel does not exist: after the retries, 404
        c.kernel_status("alice/nothing-here")
    assert "404" in str(e.value) and len(waits) == 2 and all(w < 1 for w in waits)
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
    fake.fail("GetKernelSessionStatus", 403)
    c2 = _client(waits)
    with pytest.raises(AuthError):  # kaggle wraps this 403 in a ValueError: still recognised
        c2.kernel_status("alice/some-kernel")


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
