"""`python -m tests.trainer_blocked_import FOLDER TRAINER_ARGS` (tests/test_lean.py): `python
-m trainer TRAINER_ARGS` with FOLDER first on the import path, as PYTHONPATH=FOLDER puts it,
and no package of FOLDER's already imported: a package there that refuses to import (a
library "not installed") is what the trainer's import of it meets, also in a process forked
from the tests' zygote (tests/forked.py), which had imported the real one."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    folder = Path(sys.argv[1])
    names = {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    for name in list(sys.modules):
        if name.split(".")[0] in names:
            del sys.modules[name]
    sys.path.insert(0, str(folder))
    sys.argv = ["trainer", *sys.argv[2:]]
    runpy.run_module("trainer", run_name="__main__", alter_sys=True)
