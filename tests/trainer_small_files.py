"""`python -m tests.trainer_small_files BYTES TRAINER_ARGS` (tests/test_trainer.py): `python
-m trainer TRAINER_ARGS` in a process that may write no file larger than BYTES
(RLIMIT_FSIZE; Python ignores SIGXFSZ, so a write past it fails as a full disk's does)."""

from __future__ import annotations

import resource
import runpy
import sys

if __name__ == "__main__":
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    sys.argv = ["trainer", *sys.argv[2:]]
    runpy.run_module("trainer", run_name="__main__", alter_sys=True)
