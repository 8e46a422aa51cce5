"""Which language the lab speaks: the OS's on a first start (through one function the tests
pin), the setting once the user chose, `ternit --lang` for one start; and `ternit --version`
with the torch build."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest

from app.base import i18n, settings
from app.base.version import torch_build_text, version_lines
from app.cli import main as cli
from tests.conftest import ROOT


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("env", "want"), [
    ({"LANG": "ru_RU.UTF-8"}, "ru"),
    ({"LANG": "en_GB.UTF-8"}, "en"),
    ({"LANG": "de_DE.UTF-8"}, "en"),  # the lab speaks two languages: any other reads English
    ({"LANGUAGE": "ru:en", "LANG": "en_US.UTF-8"}, "ru"),  # gettext's order: LANGUAGE first
    ({"LC_ALL": "C.UTF-8", "LANG": "ru_RU.UTF-8"}, "ru"),  # C says nothing: the next one does
    ({}, "en"),
])
@pytest.mark.skipif(sys.platform == "win32", reason="Windows asks GetUserDefaultUILanguage, not the environment")
def test_the_os_language_from_the_locale_variables(monkeypatch, env, want):
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert i18n.os_language() == want


def test_a_first_start_speaks_the_pinned_system_language_and_the_setting_wins_after():
    try:
        i18n.set_system_language(lambda: "en")
        assert i18n.current_language() == "en"  # no settings.json yet: the OS's language
        settings.update(window={})  # a settings file without a choice: still the OS's
        assert i18n.current_language() == "en"
        settings.update(language="ru")
        assert i18n.current_language() == "ru"  # the user's choice, whatever the OS says
    finally:
        i18n.set_system_language(lambda: "ru")  # as tests/conftest.py pins it
    settings.update(language=None)
    assert i18n.current_language() == "ru"


def test_ternit_lang_speaks_that_language_for_one_start_and_keeps_the_setting():
    code, out, _ = _run(["--lang", "en", "--help"])
    assert code == 0 and out.startswith("usage: ternit [--lang ru|en] COMMAND")
    assert i18n.current_language() == "ru"  # only that start
    assert "language" not in settings.load()
    code, out, _ = _run(["--lang=ru", "run", "list"])
    assert code == 0 and out.strip() == "прогонов пока нет"
    code, _, err = _run(["--lang", "de", "run", "list"])
    assert code == 2 and err.strip() == "ternit: язык: --lang de: ru|en"


def test_ternit_version_names_the_lab_and_the_torch_build():
    code, out, _ = _run(["--version"])
    lines = out.splitlines()
    assert code == 0 and lines == version_lines()
    assert lines[0].startswith("Ternit Lab ") and lines[1].startswith("PyTorch ")


@pytest.mark.parametrize(("version", "ru", "en"), [
    ("2.13.0+cu128", "2.13.0+cu128 (CUDA 12.8)", "2.13.0+cu128 (CUDA 12.8)"),
    ("2.13.0+cpu", "2.13.0+cpu (только процессор)", "2.13.0+cpu (CPU only)"),
    ("2.13.0", "2.13.0", "2.13.0"),
    ("", "не установлен", "not installed"),
])
def test_the_torch_build_in_words(version, ru, en):
    assert torch_build_text(version, "ru") == ru and torch_build_text(version, "en") == en


@pytest.mark.parametrize(("lang_env", "first"), [("ru_RU.UTF-8", "использование:"), ("en_US.UTF-8", "usage:")])
def test_a_real_ternit_speaks_the_os_language_on_a_first_start(tmp_path, lang_env, first):
    """The command as a user starts it, with no setting: the OS's language (an English
    Windows user gets English help)."""
    res = subprocess.run([sys.executable, "-m", "app.cli", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={"PATH": "/usr/bin:/bin", "TERNIT_HOME": str(tmp_path / "lab"),
                                          "HOME": str(tmp_path), "LANG": lang_env})
    assert res.returncode == 0 and res.stdout.startswith(first)
