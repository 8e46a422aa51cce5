"""settings.json has one reader and writer (app/base/settings.py): what it makes of a damaged
file, that a write keeps the other keys, and that no other module names the file."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from app.base import i18n, settings
from app.kaggle import settings as kaggle_settings

ROOT = Path(__file__).resolve().parent.parent


def test_a_missing_damaged_or_foreign_file_reads_as_no_settings():
    assert settings.load() == {}
    settings.path().parent.mkdir(parents=True, exist_ok=True)
    for text in ("not json", "[1, 2]", '"text"', ""):
        settings.path().write_text(text, encoding="utf-8")
        assert settings.load() == {}
    assert settings.ask_on_close() is True


def test_a_write_keeps_the_other_keys_and_every_reader_sees_it(monkeypatch):
    monkeypatch.delenv("TERNIT_LANG", raising=False)
    monkeypatch.delenv("TERNIT_KAGGLE_MARGIN_MIN", raising=False)
    i18n.set_language(None)
    settings.update(kaggle_margin_min=25, other={"kept": True})
    settings.update(language="en", ask_on_close=False)
    assert json.loads(settings.path().read_text(encoding="utf-8")) == {
        "kaggle_margin_min": 25, "other": {"kept": True}, "language": "en", "ask_on_close": False}
    assert i18n.current_language() == "en"
    assert kaggle_settings.load().margin_min == 25.0
    assert settings.ask_on_close() is False


def test_no_other_module_names_the_settings_file():
    found = []
    for room in ("app", "ui"):
        for path in (ROOT / room).rglob("*.py"):
            if path == ROOT / "app" / "base" / "settings.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value == "settings.json":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
