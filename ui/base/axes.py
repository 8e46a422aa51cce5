"""pyqtgraph's tick labels in the interface language: its own are «0.2» in the Russian window,
beside «0,9678» in the history beside it (app.base.numbers writes every other number)."""

from __future__ import annotations

from typing import Any

from app.base.numbers import decimal_mark


def decimal_axes(plot_item: Any, names: tuple[str, ...] = ("left", "bottom")) -> None:
    """The axes' numbers with the language's decimal mark, read at each draw (a switch of
    language shows at the next)."""
    for name in names:
        axis = plot_item.getAxis(name)
        own = axis.tickStrings
        axis.tickStrings = lambda values, scale, spacing, own=own: [decimal_mark(s) for s in own(values, scale, spacing)]
