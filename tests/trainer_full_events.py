"""`python -m tests.trainer_full_events TRAINER_ARGS` (tests/test_fsdp_faults.py, each rank
of a two-process run): `python -m trainer TRAINER_ARGS` on a disk that fills up under rank
0's events.jsonl.

In the process whose RANK is 0, the writes to a file named events.jsonl fail with ENOSPC
("No space left on device") from the $TERNIT_TEST_FULL_EVENTS-th one on; every other file,
and every other process, writes as usual. Linux only (the file of a descriptor is read from
/proc/self/fd).
"""

from __future__ import annotations

import errno
import os
import runpy
import sys

_AFTER = int(os.environ.get("TERNIT_TEST_FULL_EVENTS", "0") or 0)
_write = os.write
_count = [0]


def _write_or_full(fd: int, data: bytes) -> int:
    try:
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = ""
    if name.endswith("events.jsonl"):
        _count[0] += 1
        if _count[0] >= _AFTER:
            raise OSError(errno.ENOSPC, "No space left on device")
    return _write(fd, data)


if __name__ == "__main__":
    if _AFTER and os.environ.get("RANK") == "0":
        os.write = _write_or_full
    sys.argv = ["trainer", *sys.argv[1:]]
    runpy.run_module("trainer", run_name="__main__", alter_sys=True)
