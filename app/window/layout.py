"""What the window remembers of its layout from one start to the next (settings.json,
key "window"): the window's and the data window's geometry and splitters (Qt's own
saveGeometry/saveState bytes, kept as base64 text), the bottom tab in front, the history's
column widths the user set and its sort order.

Plain Python: it only checks that what is read back has the right shape. A damaged,
hand-edited or old value is dropped field by field (that part takes its default), never
handed to Qt as garbage and never a reason for the window not to open. Qt itself refuses a
state blob of the wrong kind and moves a geometry from a screen that is gone onto one that
is there.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass, field
from typing import Any

KEY = "window"
# Names of the Qt state blobs: the main window, its two splitters, the data window.
STATES = ("geometry", "splitter.main", "splitter.right", "data.geometry", "data.splitter")
TABS = ("history", "text", "gpu")  # the bottom tabs, in their order
ORDERS = ("asc", "desc")
# Qt's blobs are a few hundred bytes; anything far larger is not one of them.
MAX_STATE_BYTES = 16_384
MIN_COLUMN_PX, MAX_COLUMN_PX = 16, 4000
MAX_KEY_CHARS = 40


@dataclass
class WindowLayout:
    states: dict[str, bytes] = field(default_factory=dict)  # STATES name -> Qt's bytes
    tab: str | None = None  # TABS
    columns: dict[str, int] = field(default_factory=dict)  # history column key -> width set by the user
    sort: tuple[str, str] | None = None  # (history column key, "asc" | "desc")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"states": {k: base64.b64encode(v).decode("ascii") for k, v in self.states.items()}}
        if self.tab is not None:
            out["tab"] = self.tab
        out["history_columns"] = dict(self.columns)
        if self.sort is not None:
            out["history_sort"] = list(self.sort)
        return out


def decode_state(value: Any) -> bytes | None:
    """Qt's state bytes from their base64 text; None for anything else."""
    if not isinstance(value, str) or not value or len(value) > MAX_STATE_BYTES * 2:
        return None
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if 0 < len(data) <= MAX_STATE_BYTES else None


def _key(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_KEY_CHARS


def column_width(value: Any) -> int | None:
    """A column width in pixels, or None when it is not a sensible one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or not MIN_COLUMN_PX <= value <= MAX_COLUMN_PX:
        return None
    return int(value)


def from_settings(settings: Any) -> WindowLayout:
    """The layout kept in settings.json's contents; each bad part left out."""
    layout = WindowLayout()
    raw = settings.get(KEY) if isinstance(settings, dict) else None
    if not isinstance(raw, dict):
        return layout
    states = raw.get("states")
    if isinstance(states, dict):
        for name in STATES:
            data = decode_state(states.get(name))
            if data is not None:
                layout.states[name] = data
    if raw.get("tab") in TABS:
        layout.tab = raw["tab"]
    columns = raw.get("history_columns")
    if isinstance(columns, dict):
        for key, value in columns.items():
            width = column_width(value)
            if _key(key) and width is not None:
                layout.columns[key] = width
    sort = raw.get("history_sort")
    if isinstance(sort, list) and len(sort) == 2 and _key(sort[0]) and sort[1] in ORDERS:
        layout.sort = (sort[0], sort[1])
    return layout


def merged(settings: Any, layout: WindowLayout) -> dict[str, Any]:
    """settings.json's contents with this layout in it; the other keys kept."""
    out = dict(settings) if isinstance(settings, dict) else {}
    out[KEY] = layout.to_json()
    return out
