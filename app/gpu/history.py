"""The last minutes of each card, for the panel's scrolling plot (pure data, no Qt)."""

from __future__ import annotations

from collections import deque

from .samples import Snapshot

SERIES = ("mem_pct", "temp_c", "util_pct")


class History:
    """Per card: (time, memory used %, temperature °C, utilisation %) for the last `seconds`.

    A value the card did not report is NaN, which the plot draws as a gap, not as a zero.
    """

    def __init__(self, seconds: float = 600.0):
        self.seconds = seconds
        self._points: dict[int, deque[tuple[float, float, float, float]]] = {}

    def add(self, snap: Snapshot) -> None:
        nan = float("nan")
        seen = {gpu.index for gpu in snap.gpus}
        for index in self._points.keys() - seen:
            # A card this sample did not give (NVML stopped answering, the driver is being
            # re-read): a gap, or the plot joins the last reading before the outage to the
            # first after it with a straight line, as if measured.
            self._append(index, (snap.time, nan, nan, nan), snap.time)
        for gpu in snap.gpus:
            frac = gpu.mem_fraction
            point = (
                snap.time,
                frac * 100.0 if frac is not None and not gpu.lost else nan,
                gpu.temp_c if gpu.temp_c is not None and not gpu.lost else nan,
                gpu.util_pct if gpu.util_pct is not None and not gpu.lost else nan,
            )
            self._append(gpu.index, point, snap.time)

    def _append(self, index: int, point: tuple[float, float, float, float], now: float) -> None:
        points = self._points.setdefault(index, deque())
        points.append(point)
        while points and points[0][0] < now - self.seconds:
            points.popleft()

    def gpus(self) -> list[int]:
        return sorted(self._points)

    def series(self, index: int, now: float | None = None) -> dict[str, list[float]]:
        """{"t": seconds relative to now (≤ 0), "mem_pct": [...], "temp_c": [...], ...}."""
        points = self._points.get(index, ())
        if now is None:
            now = points[-1][0] if points else 0.0
        out: dict[str, list[float]] = {"t": [p[0] - now for p in points]}
        for i, name in enumerate(SERIES, start=1):
            out[name] = [p[i] for p in points]
        return out

    def clear(self) -> None:
        self._points.clear()
