"""One start of the window, for tests/test_window_layout.py: a real restart is a new process
(and lets each start have its own screens: QT_QPA_PLATFORM=offscreen:configfile=...).

    python tests/window_layout_child.py '{"geometry": [x, y, w, h], ...}'

Opens the main window on the lab folders of TERNIT_HOME, prints what it restored as one JSON
line, applies the changes given (as a user would make them), prints the layout then, and
closes the window (which remembers it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def state(w, dialog) -> dict:  # noqa: ANN001
    g = w.normalGeometry() if w.isMaximized() else w.geometry()
    header = w.history.table.horizontalHeader()
    return {"geometry": [g.x(), g.y(), g.width(), g.height()], "maximized": w.isMaximized(),
            "screen": w.screen().name(), "main": w.main_split.sizes(), "right": w.right_split.sizes(),
            "tab": "gpu" if w.tabs.currentWidget() is w.monitor else "history",
            "widths": w.history.user_widths, "where_width": header.sectionSize(3),
            "sort": list(w.history.sort_order()), "data": dialog.split.sizes(),
            "data_geometry": [dialog.width(), dialog.height()]}


def main() -> int:
    changes = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    from ui.data.dialog import DataDialog
    from ui.window.main_window import MainWindow, app_instance

    app = app_instance()
    w = MainWindow()
    w.show()
    w.ensure_ready()
    w.shortcut_actions["data"].trigger()  # «Данные…», as the user opens it
    dialog = w.findChild(DataDialog)
    for _ in range(3):
        app.processEvents()
    print(json.dumps(state(w, dialog)), flush=True)
    if "geometry" in changes:
        x, y, width, height = changes["geometry"]
        w.resize(width, height)
        w.move(x, y)
    if "maximized" in changes:
        w.showMaximized()
    app.processEvents()
    if "main" in changes:
        w.main_split.setSizes(changes["main"])
    if "right" in changes:
        w.right_split.setSizes(changes["right"])
    if "tab" in changes:
        w.tabs.setCurrentWidget(w.monitor if changes["tab"] == "gpu" else w.history)
    if "where_width" in changes:
        w.history.table.horizontalHeader().resizeSection(3, changes["where_width"])  # a drag
    if "sort" in changes:
        from PySide6.QtCore import Qt

        column, order = changes["sort"]
        w.history.table.sortByColumn(column, Qt.SortOrder.DescendingOrder if order == "desc"
                                     else Qt.SortOrder.AscendingOrder)
    if "data" in changes:
        dialog.split.setSizes(changes["data"])
        dialog.resize(*changes["data_geometry"])
    if "language" in changes:
        w.set_language(changes["language"])
    for _ in range(3):
        app.processEvents()
    print(json.dumps(state(w, dialog)), flush=True)
    dialog.accept()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
