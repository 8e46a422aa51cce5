"""Shared test set-up: every test runs with the lab's folders, Kaggle's config and HOME in
temporary folders, Qt offscreen, and no GPU visible.

The lab's folders are moved by TERNIT_HOME, which app/paths.py honours on every OS: on
Windows platformdirs ignores HOME and XDG_*, and a test isolated by those alone would write
into the user's real %LOCALAPPDATA%\\ternit-lab."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["CUDA_VISIBLE_DEVICES"] = ""
# One compute thread for torch in the tests and the trainers they start: on a busy 2-core
# machine two OpenMP threads contend and a tiny step can take 100× longer.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# No background CPU rate measurement (app/sizing/cpu_rate.py) from each test's fresh lab;
# its own tests start it themselves.
os.environ.setdefault("TERNIT_CPU_PROBE", "0")
# Each test's window is a first start: the fields' own defaults, not a first run sized to
# this machine (app/sizing/first_run.py); tests/test_window_first_run.py turns it on.
os.environ.setdefault("TERNIT_FIRST_RUN", "0")
# The interface's language when nothing chose one is the OS's (app.base.i18n.os_language):
# pinned to Russian, the lab's first language, in this process and, through gettext's
# LANGUAGE, in the children the tests start, whatever this machine's locale is.
os.environ["LANGUAGE"] = "ru"
from app.base.i18n import set_system_language  # noqa: E402  (after the environment above)

set_system_language(lambda: "ru")
# No trainer or queue runner of a test asks this PC's OS not to sleep (trainer/run/awake.py);
# tests/test_awake.py asks, against an inhibitor of its own.
os.environ.setdefault("TERNIT_KEEP_AWAKE", "0")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """The lab's data/config folders, Kaggle's config and HOME in a fresh temporary folder."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("TERNIT_HOME", str(home / "lab"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))  # Windows' HOME (Path.home(), ~ in paths)
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(home / ".kaggle"))
    monkeypatch.delenv("KAGGLE_API_TOKEN", raising=False)
    monkeypatch.delenv("KAGGLE_USERNAME", raising=False)
    monkeypatch.delenv("KAGGLE_KEY", raising=False)
    monkeypatch.delenv("TERNIT_LANG", raising=False)
    yield home
    # A repaired state file is said once per process (app/base/state.repairs_to_say): one test's
    # repair must not be said by the next command another test runs on the same worker.
    state = sys.modules.get("app.base.state")
    if state is not None:
        state.repairs_to_say()


@pytest.fixture
def russian():
    """The interface in Russian (its default language) for one test, whatever an earlier
    test chose; the interface's own choice is restored after."""
    from app.base.i18n import set_language

    set_language("ru")
    yield
    set_language(None)


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """A real prepared-data folder (BPE tokenizer, train.bin, val.bin, meta.json), tiny."""
    from bench.synthetic import make_prepared

    return make_prepared(tmp_path_factory.mktemp("tiny-data"))
