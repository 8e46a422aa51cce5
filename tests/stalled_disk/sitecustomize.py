"""A stalled disk for the child commands a test starts with this folder on PYTHONPATH.

Python imports `sitecustomize` at start-up, so a real `python -m app.cli data add …` begins
with this: opening a file whose name ends in $TERNIT_TEST_STALL never returns, as on a
network disk that stopped answering. (A named pipe stood in for that until `data add`
learned to pass over anything that is not a regular file.) Only the tests set the variable.
"""

import builtins
import os
import time

_SUFFIX = os.environ.get("TERNIT_TEST_STALL", "")
_open = builtins.open


def _open_or_stall(file, *args, **kwargs):
    if _SUFFIX and str(file).endswith(_SUFFIX):
        while True:  # until the process is stopped or killed
            time.sleep(0.1)
    return _open(file, *args, **kwargs)


if _SUFFIX:
    builtins.open = _open_or_stall
