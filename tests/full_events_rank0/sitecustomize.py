"""A disk that fills up under rank 0's events.jsonl, for the child commands a test starts
with this folder on PYTHONPATH (Python imports `sitecustomize` at start-up).

In the process whose RANK is 0, the writes to a file named events.jsonl fail with ENOSPC
("No space left on device") from the $TERNIT_TEST_FULL_EVENTS-th one on; every other file,
and every other process, writes as usual. Only the tests set the variable. Linux only (the
file of a descriptor is read from /proc/self/fd).
"""

import errno
import os

_AFTER = int(os.environ.get("TERNIT_TEST_FULL_EVENTS", "0") or 0)
_write = os.write
_count = [0]


def _write_or_full(fd, data):
    try:
        name = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        name = ""
    if name.endswith("events.jsonl"):
        _count[0] += 1
        if _count[0] >= _AFTER:
            raise OSError(errno.ENOSPC, "No space left on device")
    return _write(fd, data)


if _AFTER and os.environ.get("RANK") == "0":
    os.write = _write_or_full
