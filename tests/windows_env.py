"""What the Windows set's tests share: the ANSI code pages they run on, and `ternit` as a
user's shell starts it (a real process, its output a pipe).

On Windows (the Wine kit in .ci/run, or a real PC) a process whose output is a pipe or a file
writes it in the ANSI code page: the real one of the session (`run.sh --codepage 1251|1252`).
On Linux the same strict code page is given by PYTHONIOENCODING, which is what Windows does
to a redirected stream; a test parametrized over CODE_PAGES then fails on Linux exactly where
it would fail on Windows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# None: this Windows's own ANSI code page (the session's); on Linux, the two that matter.
CODE_PAGES: list[str | None] = [None] if os.name == "nt" else ["cp1252", "cp1251"]


def code_page_env(code_page: str | None, **more: str) -> dict[str, str]:
    """The environment of a process a user starts from a shell on that code page: the test's
    own (TERNIT_HOME from conftest), with nothing of the lab's UTF-8 set-up in it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if code_page:
        env["PYTHONIOENCODING"] = code_page
    env.update(more)
    return env


def ternit(*args: str, code_page: str | None, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    """`ternit ARGS` with its output a pipe, as `ternit run list > runs.txt` has it. The bytes
    must be UTF-8 (decoded strictly: a wrong encoding fails here, not later)."""
    done = subprocess.run([sys.executable, "-m", "app.cli", *args], env=code_page_env(code_page, **env),
                          cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    out, err = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)
