"""`ternit-lab`: the window (a placeholder until the window issue lands)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from PySide6.QtWidgets import QApplication, QLabel

    app = QApplication(sys.argv if argv is None else argv)
    label = QLabel("Ternit Lab")
    label.resize(480, 240)
    label.show()
    return app.exec()
