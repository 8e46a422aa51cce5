"""The window's meaning colours (error, warning, note, muted text, run statuses, the plot's
background and ink), chosen in one place by how light the system palette is: the light
set on a light palette, a lighter, less saturated set on a dark one, where #b00020 on
near-black cannot be read. "gpu_*" are a card's levels as text on the window (temperature),
"gpu_fill_*" the memory bar's fill, behind the palette's own text; "grid" the plots' guide lines;
"prompt_*" a prompt's tint in the «Текст» tab. Plain Python: ui/base/palette.py asks the window's QPalette for its
lightness and takes the colours from here."""

from __future__ import annotations

DARK_BELOW = 128  # a window colour's HSL lightness (0–255) under this: a dark palette

_LIGHT = {
    "error": "#b00020", "warning": "#8a5a00", "note": "#1b5e20", "muted": "#555555",
    "hint": "#888888", "ink": "#000000", "locked_label": "#777777",
    "locked_bg": "#eeeeee", "locked_fg": "#555555",
    "running": "#1b7f3b", "finished": "#1f4e99", "stopped": "#555555",
    "plot_bg": "#ffffff", "plot_fg": "#333333", "legend_bg": (255, 255, 255, 210),
    "marker_data": "#b35900", "marker_pause": "#777777", "marker_leg": "#999999",
    "grid": "#dddddd", "prompt_bg": "#e3e9f7", "prompt_fg": "#34456b",
    "gpu_normal": "#2e7d32", "gpu_warm": "#e08a00", "gpu_hot": "#c62828",
    "gpu_fill_normal": "#2e7d32", "gpu_fill_high": "#e08a00", "gpu_fill_full": "#c62828",
}
_DARK = {
    "error": "#ff6b7f", "warning": "#e0b050", "note": "#7fd08a", "muted": "#b0b0b0",
    "hint": "#909090", "ink": "#f0f0f0", "locked_label": "#8a8a8a",
    "locked_bg": "#3a3a3a", "locked_fg": "#b0b0b0",
    "running": "#6fd08c", "finished": "#8ab4f8", "stopped": "#b0b0b0",
    "plot_bg": "#1e1e1e", "plot_fg": "#d0d0d0", "legend_bg": (40, 40, 40, 210),
    "marker_data": "#ffa657", "marker_pause": "#a0a0a0", "marker_leg": "#808080",
    "grid": "#3c3c3c", "prompt_bg": "#2a3550", "prompt_fg": "#c8d6f5",
    "gpu_normal": "#81c784", "gpu_warm": "#ffb74d", "gpu_hot": "#ff7070",
    # Under the palette's light text (Fusion draws a styled bar's text in Text, not in
    # HighlightedText): deep enough for ≥ 5:1 where the dark set's text colours give ~1.5:1.
    "gpu_fill_normal": "#2e6b31", "gpu_fill_high": "#8a5200", "gpu_fill_full": "#a32020",
}


def is_dark(window_lightness: int) -> bool:
    return window_lightness < DARK_BELOW


def colors(dark: bool) -> dict:
    """The colour table for a dark or a light palette (names → "#rrggbb")."""
    return dict(_DARK if dark else _LIGHT)
