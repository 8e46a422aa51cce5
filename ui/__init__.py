"""Thin PySide6 views over app/."""

from __future__ import annotations

import sys


def _guard_none_refcount() -> None:
    """PySide6 6.12.0 on Python < 3.12 drops one reference to None on every call of a Qt
    method that returns nothing, and to True/False for one that returns a bool (measured
    here: sys.getrefcount(None) falls by exactly one per QPainter.setPen call; 6.11.3 does
    not), so a window with a live plot dies within seconds with "Fatal Python error:
    none_dealloc". Python 3.12 made these objects immortal; for older Pythons we do the
    same by hand, giving them reference counts no session can use up. The real fix is a
    PySide6 without the bug (pyproject should exclude 6.12.0)."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return
    try:
        import PySide6

        major, minor = (int(x) for x in PySide6.__version__.split(".")[:2])
    except (ImportError, ValueError):
        return
    if (major, minor) < (6, 12):
        return
    import ctypes

    # ob_refcnt is the first field of every CPython object. Methods returning a bool drop
    # references to True/False the same way.
    for singleton in (None, True, False):
        ctypes.c_ssize_t.from_address(id(singleton)).value += 1 << 40


_guard_none_refcount()
