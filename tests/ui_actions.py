"""What a user does to the run form, for the window tests."""

from __future__ import annotations


def choose(view, name: str, key: str) -> None:  # noqa: ANN001
    """Pick an option as a user does: the combo's index changes, then `activated` fires."""
    combo = view.inputs[name]
    i = combo.findData(key)
    assert i >= 0, (name, key)
    combo.setCurrentIndex(i)
    combo.activated.emit(i)
