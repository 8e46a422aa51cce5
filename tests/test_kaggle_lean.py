"""The lean state on Kaggle, against the fake server: the kernel's image has no bitsandbytes
and no internet, so its wheel travels in the code dataset and is installed offline at the
kernel's start. The wheels here are built by the test (nothing is downloaded)."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from app.base import run_status as st
from app.kaggle import datasets, runner
from app.kaggle.errors import KaggleError
from app.runs.registry import Registry
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS, add_lab_accounts, tiny_config

fake = fixtures.fake  # the fake-server fixture

MARK = "[test-wheel] bitsandbytes imported from the wheel the kernel installed"

# The stand-in package: it says it was imported, then becomes the real bitsandbytes
# installed beside the tests (the next `bitsandbytes` folder on sys.path), so the trainer
# really trains with 8-bit moments from what the kernel installed.
STAND_IN = f'''
import os, sys
print({MARK!r}, file=sys.stderr, flush=True)
_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    _real = os.path.join(os.path.abspath(_entry or "."), "bitsandbytes")
    if _real != _here and os.path.isfile(os.path.join(_real, "__init__.py")):
        break
else:
    raise ImportError("no real bitsandbytes beside the stand-in")
__path__ = [_real]
__file__ = os.path.join(_real, "__init__.py")
with open(__file__, encoding="utf-8") as _f:
    exec(compile(_f.read(), __file__, "exec"))
'''


def make_wheel(folder: Path, version: str = "0.99.0", tag: str = "py3-none-any") -> Path:
    """A minimal valid wheel of a `bitsandbytes` package (the stand-in above)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"bitsandbytes-{version}-{tag}.whl"
    info = f"bitsandbytes-{version}.dist-info"
    files = {
        "bitsandbytes/__init__.py": STAND_IN,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: bitsandbytes\nVersion: {version}\n",
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: ternit-test\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def _events(run_dir: Path, kind: str) -> list[dict]:
    path = Path(run_dir) / "events.jsonl"
    evs = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []
    return [e for e in evs if e["event"] == kind]


def _run_on_kaggle(fake, config: dict) -> object:
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    add_lab_accounts("alice")
    reg = Registry()
    rec = reg.create_run(config)
    runner.start_kaggle_run(reg, rec.id, account="alice")
    assert runner.wait_followers(120)
    return reg.get(rec.id)


def _code_datasets(fake) -> list:
    return [d for d in fake.datasets.values() if d.slug.startswith("ternit-code-")]


def test_a_lean_run_installs_the_wheel_offline_in_the_kernel_and_trains(fake, tiny_data):
    pytest.importorskip("bitsandbytes")  # the stand-in delegates to the real library
    wheel = make_wheel(datasets.wheel_cache_dir())  # as if the lab had downloaded it before
    got = _run_on_kaggle(fake, tiny_config(tiny_data, steps_to=6, eval_every=3, lean_state=True))
    assert got.status == st.FINISHED, got.last_message
    assert [e["step"] for e in _events(got.path, "step")] == list(range(1, 7))
    log = (got.path / "trainer.log").read_text(encoding="utf-8")
    assert f"installed {wheel.name} offline from the lab's code dataset" in log
    assert MARK in log  # the trainer imported the library the kernel installed
    # The wheel went up inside the code dataset, byte for byte, beside the trainer.
    (code,) = _code_datasets(fake)
    assert code.files[wheel.name] == wheel.read_bytes()
    assert "trainer.zip" in code.files
    # The kernel pushed keeps the internet off and carries no key.
    push = fake.pushes[-1]
    assert push["enableInternet"] is False
    for key in KEYS.values():
        assert key.encode() not in fake.all_received()


def test_a_broken_wheel_is_an_error_event_and_nothing_trains(fake, tiny_data):
    broken = datasets.wheel_cache_dir() / "bitsandbytes-0.99.0-py3-none-any.whl"
    broken.write_bytes(b"PK\x03\x04 this is not a whole wheel")
    got = _run_on_kaggle(fake, tiny_config(tiny_data, steps_to=6, lean_state=True))
    assert got.status == st.FAILED
    (error,) = _events(got.path, "error")
    assert error["kind"] == "other" and broken.name in error["message"]
    assert "internet off" in error["message"] and "lean_state" in error["advice"]
    assert error["message"] in got.last_message and error["advice"] in got.last_message
    assert not _events(got.path, "step") and not _events(got.path, "start")
    assert fake.kernels[got.kaggle_kernel_ref].status == "ERROR"


# ---- where the wheel comes from: pip download for Kaggle's platform ---------------------------


def test_the_wheel_is_downloaded_once_for_kaggles_platform(tmp_path, monkeypatch):
    """The lab's real `pip download`, pointed at a local folder (pip's own PIP_NO_INDEX and
    PIP_FIND_LINKS) instead of PyPI: it picks the Linux wheel, not this machine's."""
    index = tmp_path / "index"
    make_wheel(index, "0.98.0", "py3-none-manylinux_2_24_x86_64")
    make_wheel(index, "0.99.0", "py3-none-win_amd64")  # newer, but not for a Kaggle kernel
    monkeypatch.setenv("TERNIT_HOME", str(tmp_path / "lab"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    said: list[str] = []
    wheel = datasets.lean_wheel(said.append)
    assert wheel.name == "bitsandbytes-0.98.0-py3-none-manylinux_2_24_x86_64.whl"
    assert wheel.parent == datasets.wheel_cache_dir() and len(said) == 1
    assert [p.name for p in wheel.parent.iterdir()] == [wheel.name]  # no download folder left
    # Cached: no second download (the index is gone).
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    assert datasets.lean_wheel(said.append) == wheel and len(said) == 1
    # The lean code bundle carries it, and its hash differs from the normal bundle's.
    lean, normal = datasets.code_bundle(lean=True), datasets.code_bundle()
    assert (wheel.name, wheel) in lean.files and lean.content_hash != normal.content_hash
    assert not [n for n, _ in normal.files if n.endswith(".whl")]  # a normal run carries none


def test_the_download_command_asks_for_kaggles_python_and_platform(tmp_path):
    cmd = datasets.pip_download_command(tmp_path)
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"]
    joined = " ".join(cmd)
    assert "--no-deps" in cmd and "--only-binary :all:" in joined
    assert f"--python-version {datasets.KAGGLE_PYTHON}" in joined and "--platform manylinux_2_24_x86_64" in joined
    assert cmd[-1] == datasets.LEAN_SPEC and "--no-index" not in cmd


def test_a_failed_download_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("TERNIT_HOME", str(tmp_path / "lab"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(KaggleError) as e:
        datasets.lean_wheel()
    text = str(e.value)
    assert "bitsandbytes" in text and "Облегчённое состояние" in text and str(datasets.wheel_cache_dir()) in text
    assert not list(datasets.wheel_cache_dir().iterdir())  # nothing half-made in the cache


def test_the_cache_takes_only_wheels_a_kernel_can_install(tmp_path):
    for name in ("bitsandbytes-0.45.1-py3-none-manylinux_2_24_x86_64.whl",
                 "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl",
                 "bitsandbytes-0.60.0-py3-none-win_amd64.whl",
                 "bitsandbytes-0.61.0-py3-none-macosx_14_0_arm64.whl",
                 "notbitsandbytes-9.0-py3-none-any.whl"):
        (tmp_path / name).write_bytes(b"x")
    assert datasets.cached_lean_wheel(tmp_path).name == "bitsandbytes-0.50.2-py3-none-manylinux_2_24_x86_64.whl"
    (tmp_path / "empty").mkdir()
    assert datasets.cached_lean_wheel(tmp_path / "empty") is None


def test_auto_prefers_the_account_that_holds_the_lean_code_bundle(fake, tiny_data, monkeypatch):
    """A lean run uploads the trainer's code with the wheel: «Авто» compares the accounts
    with that bundle's hash, not with the normal code's (equal quotas: the one holding what
    the run needs wins)."""
    from app.kaggle import machine
    from app.kaggle.accounts import Accounts
    from app.kaggle.store import KaggleStore

    monkeypatch.setattr(machine, "_code_hash_cache", {})
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    fake.add_account("bob", KEYS["bob"], quota_h=30)
    add_lab_accounts("alice", "bob")
    store = KaggleStore()
    try:
        Accounts(store).check_all()
        config = tiny_config(tiny_data)
        lean_config = {**config, "training": {**config["training"], "lean_state": "fused"}}
        # No wheel in the cache yet: no account can hold the lean bundle, nothing is fetched.
        assert machine._code_hash(lean=True) == ""
        make_wheel(datasets.wheel_cache_dir())
        normal, lean = datasets.code_bundle(), datasets.code_bundle(lean=True)
        assert normal.content_hash != lean.content_hash
        store.record_dataset("alice", normal.content_hash, "code", "alice/code", "code", 1)
        store.record_dataset("bob", lean.content_hash, "code", "bob/code", "code", 1)
        assert machine.auto_pick(lean_config, store).username == "bob"
        assert machine.auto_pick(config, store).username == "alice"
    finally:
        store.close()
