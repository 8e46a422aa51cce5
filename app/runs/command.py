"""One `ternit <command>` over the lab's history: the state opened, the command run, its known
failures said in one line each with the command's name, the state closed.

`ternit queue` and `ternit search` share this frame (their dispatch differs); `ternit run`
keeps its own, which also lists bad run folders and survives a closed pipe.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable

from ..base.state import StateError, failure_text
from ..data.library import LibraryError
from .precheck import RunError
from .registry import Registry

EXIT_USAGE = 2  # the command could not be done as asked: said why, nothing half-done


def on_registry(name: str, cmd: str, work: Callable[[Registry], int],
                refusals: tuple[type[BaseException], ...] = ()) -> int:
    """Run `work(registry)` for `ternit <name> <cmd>`: the state that cannot open, a refusal
    (`refusals` and the lab's own: a run's, the state's, a bad value), a data library's error
    (its own exit code) and a failed state write each end as one line on stderr."""
    try:
        registry = Registry()
    except StateError as e:
        print(f"ternit {name}: {e}", file=sys.stderr)
        return EXIT_USAGE
    said = f"ternit {name} {cmd}"
    try:
        return work(registry)
    except (*refusals, RunError, StateError, ValueError) as e:
        print(f"{said}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except LibraryError as e:
        print(f"{said}: {e}", file=sys.stderr)
        return e.exit_code
    except sqlite3.Error as e:  # a lock held past the wait, a full disk: one line naming it
        print(f"{said}: {failure_text(e, registry.state.path)}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        registry.close()
