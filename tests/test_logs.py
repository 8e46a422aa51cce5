"""app.base.logs: the lab's rotating log file in its data folder, what lands there, and what never
does (a Kaggle key, during an account add and check against the fake Kaggle server)."""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
from pathlib import Path

import pytest

from app.base import logs
from tests.fake_kaggle import fixtures
from tests.fake_kaggle.fixtures import KEYS

fake = fixtures.fake  # the fake Kaggle server's fixture


@pytest.fixture
def log_file(tmp_path, monkeypatch):
    """Logging set up over this test's own lab folder, at DEBUG (everything written); the
    handler removed after, so that no other test writes here."""
    monkeypatch.setenv("TERNIT_HOME", str(tmp_path / "lab"))
    root = logging.getLogger()
    level = root.level
    path = logs.setup(logging.DEBUG)
    yield path
    handler = logs._handler
    if handler is not None:
        root.removeHandler(handler)
        handler.close()
    logs._handler = None
    root.setLevel(level)


def _text(path: Path) -> str:
    for h in logging.getLogger().handlers:
        h.flush()
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_the_log_file_is_in_the_data_folder_and_rotates(log_file, tmp_path):
    assert log_file == Path(os.environ["TERNIT_HOME"]) / "data" / "logs" / logs.FILE_NAME == logs.log_path()
    handler = logs._handler
    assert isinstance(handler, logging.handlers.RotatingFileHandler)
    assert handler.maxBytes == logs.MAX_BYTES and handler.backupCount == logs.BACKUPS
    assert 1 <= logs.MAX_BYTES // 2**20 <= 10 and 2 <= logs.BACKUPS <= 5  # a few MB, a few files
    assert logs.setup() == log_file and logs._handler is handler  # set up twice: one handler
    try:
        raise ValueError("damaged run.json")
    except ValueError:
        logging.getLogger("app.window.lab").exception("reading a run failed")
    text = _text(log_file)
    assert "ERROR" in text and "app.window.lab: reading a run failed" in text
    assert "ValueError: damaged run.json" in text  # the traceback is kept


def test_the_log_moves_with_the_data_folder(log_file, tmp_path, monkeypatch):
    monkeypatch.setenv("TERNIT_HOME", str(tmp_path / "other"))
    moved = logs.setup(logging.DEBUG)
    assert moved != log_file and moved == logs.log_path()
    logging.getLogger("app").warning("after the move")
    assert "after the move" in _text(moved) and "after the move" not in _text(log_file)
    assert sum(isinstance(h, logging.handlers.RotatingFileHandler) and h is logs._handler
               for h in logging.getLogger().handlers) == 1


def test_a_key_looking_value_is_masked_in_the_message_and_the_traceback(log_file):
    key = "0123456789abcdef0123456789abcdef"
    try:
        raise RuntimeError(f"refused: {key}")
    except RuntimeError:
        logging.getLogger("app.kaggle").exception("token KGAT_abc123XYZ and key %s", key)
    text = _text(log_file)
    assert key not in text and "KGAT_abc123XYZ" not in text
    assert text.count(logs.MASK) == 3
    sha = "ab" * 32  # a SHA-256 is not a key: kept
    assert logs.mask_secrets(sha) == sha
    assert logs.mask_secrets("Bearer KGAT_a1_b-2_c3.") == "Bearer ***."  # a token's _ and - are its own


def test_no_kaggle_key_reaches_the_log_while_accounts_are_added_and_checked(fake, log_file, tmp_path, capsys):
    """`ternit kaggle add-account` and `accounts` against the fake Kaggle: one key good, one
    refused; at DEBUG, with every library's records, neither key lands in the log file."""
    from app.kaggle import cli

    assert log_file is not None
    fake.add_account("alice", KEYS["alice"], quota_h=30)
    fake.add_account("bob", KEYS["bob"], quota_h=30)
    kj = tmp_path / "kaggle.json"
    kj.write_text(json.dumps({"username": "alice", "key": KEYS["alice"]}))
    assert cli.main(["add-account", "--json", str(kj)]) == 0
    wrong = "wrongkey" + KEYS["bob"][8:]
    cli.main(["add-account", "--username", "bob", "--key", wrong])
    assert cli.main(["accounts"]) == 0
    logging.getLogger("app.kaggle").info("accounts checked")  # the file is written to at all
    text = _text(log_file)
    assert "accounts checked" in text
    for key in (*KEYS.values(), wrong):
        assert key not in text and key[8:] not in text
    capsys.readouterr()


def test_about_names_the_log_file(qtbot, log_file):
    from ui.window.menu import about_text, show_about

    assert str(logs.log_path()) in about_text()
    box = show_about(None)
    qtbot.addWidget(box)
    assert str(log_file) in box.text()
    box.close()
