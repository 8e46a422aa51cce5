"""The monitor panel redraws every second for hours: Qt calls must not leak references.

PySide6-Essentials 6.12.0 on Python 3.11 drops one reference to None on every call of a
void Qt method (QLabel.setText, QPainter.drawLine...). None is not immortal before Python
3.12, so after a few thousand calls the interpreter aborts with "none_dealloc: deallocating
None" — within minutes of a live panel or plot. 6.11.3 does not. This test names the cause
instead of leaving a crash at exit.
"""

from __future__ import annotations

import sys

import PySide6
from PySide6.QtWidgets import QLabel


def test_void_qt_calls_keep_none_alive(qtbot):
    label = QLabel()
    qtbot.addWidget(label)
    label.setText("warm-up")
    before = sys.getrefcount(None)
    for _ in range(1000):
        label.setText("x")
    lost = before - sys.getrefcount(None)
    assert lost < 100, (
        f"PySide6 {PySide6.__version__} on Python {sys.version.split()[0]} lost {lost} "
        "references to None in 1000 QLabel.setText calls: the window would abort within "
        "minutes (none_dealloc). Use PySide6-Essentials 6.11.x (or Python >= 3.12)."
    )
