"""The frame `ternit queue` and `ternit search` run in (app/runs/command.py): each known
failure is one line naming the command, with its exit code; the state is closed either way."""

from __future__ import annotations

import sqlite3

import pytest

from app.base.state import StateError
from app.data.library import LibraryError
from app.queue.store import QueueError
from app.runs.command import EXIT_USAGE, on_registry


def _raises(exc: BaseException):
    def work(registry) -> int:
        seen.append(registry)
        raise exc

    seen: list = []
    return work, seen


@pytest.mark.parametrize("exc, code, said", [
    (QueueError("item 7 is not in the queue"), EXIT_USAGE, "item 7"),  # the command's own refusal
    (ValueError("bad value"), EXIT_USAGE, "bad value"),
    (LibraryError("no such folder", exit_code=1), 1, "no such folder"),  # the library's own code
    (sqlite3.OperationalError("database is locked"), EXIT_USAGE, "занят"),  # said for people
])
def test_each_known_failure_is_one_line_with_the_command_and_its_code(capsys, russian, exc, code, said):
    work, seen = _raises(exc)
    assert on_registry("queue", "hold", work, (QueueError,)) == code
    err = capsys.readouterr().err
    assert err.startswith("ternit queue hold: ") and err.count("\n") == 1 and said in err, err
    with pytest.raises(StateError, match="closed"):  # closed after the command, whatever it raised
        seen[0].state.query("SELECT 1")


def test_a_failure_it_does_not_know_is_not_swallowed(capsys):
    work, _ = _raises(KeyError("a bug"))
    with pytest.raises(KeyError):
        on_registry("search", "show", work, ())
    assert capsys.readouterr().err == ""


def test_an_answer_is_passed_through():
    assert on_registry("search", "list", lambda registry: 0) == 0
