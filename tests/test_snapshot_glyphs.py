"""A window's snapshot with no font found (Qt's offscreen platform under Wine without
QT_QPA_FONTDIR) was a picture of empty boxes that passed as a picture: now the snapshot
refuses it, and the Windows set's snapshot test fails on it. Shown on Linux by a fontconfig
that knows no fonts, against this machine's own rendering of the same letters."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_letters_are_drawn_here_and_differ_from_each_other(qtbot):
    from PySide6.QtWidgets import QApplication, QLabel

    from ui.base import glyphs

    assert glyphs.drawn(QApplication.instance().font())
    label = QLabel("Новый прогон")
    qtbot.addWidget(label)
    label.adjustSize()
    assert glyphs.ink(label.grab().toImage()) > 20  # a known label of the window has its letters' ink


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="an empty fontconfig shows it; Wine's set checks its own")
def test_a_snapshot_without_fonts_is_refused_not_written(tmp_path):
    empty = tmp_path / "no-fonts"
    empty.mkdir()
    conf = tmp_path / "fonts.conf"
    conf.write_text(f'<?xml version="1.0"?><fontconfig><dir>{empty}</dir><cachedir>{empty}/cache</cachedir>'
                    "</fontconfig>", encoding="utf-8")
    picture = tmp_path / "окно.png"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TERNIT_HOME": str(tmp_path / "lab"),
           "QT_QPA_PLATFORM": "offscreen", "FONTCONFIG_FILE": str(conf), "QT_QPA_FONTDIR": str(empty),
           "TERNIT_CPU_PROBE": "0", "LANG": "ru_RU.UTF-8"}
    done = subprocess.run([sys.executable, "-m", "ui.main", "--snapshot", str(picture), "--size", "800x600"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 1 and "QT_QPA_FONTDIR" in done.stderr, done.stderr
    assert not picture.exists()
