"""Run by tests/test_forked.py, forked or fresh: says what a `python -m` start gave it."""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    mode = sys.argv[1]
    if mode == "sleep":
        time.sleep(60)
    if mode == "rank" and os.environ["RANK"] == "1":
        return 5  # the failing rank: the other is ended as torchrun ends it
    if mode == "rank":
        time.sleep(60)
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
                      "name": __name__, "stdin": sys.stdin.read(), "env": os.environ.get("PROBE"),
                      "pid": os.getpid(), "ppid": os.getppid()}))
    print("на stderr", file=sys.stderr)
    if mode == "raise":
        raise ValueError("probe")
    return int(mode) if mode.isdigit() else 0


if __name__ == "__main__":
    sys.exit(main())
