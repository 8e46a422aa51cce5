"""`python -m MODULE ARGS` for the tests, forked from a process that has imported torch.

Each trainer process a test starts used to spend ≈ 2.6 s of its ≈ 3.4 s importing torch,
torch._dynamo (torch's optimizers import it at their first call) and, for the lean state,
bitsandbytes: ≈ 150 such processes made most of the suite's time on CI's 2 cores. Here a
zygote process per test worker imports them once; each run is a fork of it that then does
what `python -m MODULE` does (runpy, sys.argv, sys.path[0] the working folder) with the
test's own environment, working folder and output files. The trainer's code, its process,
pid, exit code and files are real; only the interpreter's start is shared.

What a fork cannot give falls back to a fresh interpreter (`subprocess.run`), the same
call: an environment that differs from the zygote's in a variable read while the
interpreter or its libraries start (PYTHON*, LC_*, LANG, OMP_*, CUDA*, TORCH*, CXX, …),
a zygote that could not start or has a thread of its own, or TERNIT_TEST_FRESH=1, which
runs every one of them fresh (the whole suite as before, only slower).

The window's, the command line's and the torchrun tests start their trainers as the
product does, in fresh interpreters: this is only for tests that run a module directly.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Environment variables read while an interpreter and its libraries start (encodings,
# import paths, OpenMP's thread count, torch's and CUDA's settings, the C++ compiler that
# torch._inductor's config takes when it is imported): a run that sets any of them
# differently from the zygote's start needs a fresh interpreter.
AT_START = ("PYTHON", "LC_", "LANG", "OMP_", "MKL_", "KMP_", "GOMP_", "CUDA", "TORCH", "NVIDIA",
            "LD_", "MALLOC", "BNB_", "CXX", "CC", "TRITON")


def at_start(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(AT_START)}


# --- the zygote (python -m tests.forked) -------------------------------------------------

def _preload() -> None:
    import logging

    import numpy  # noqa: F401
    import torch
    import torch._dynamo  # noqa: F401  (what the first optimizer call imports)
    import torch.optim  # noqa: F401

    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)  # as trainer.lean does
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        pass
    import safetensors.torch  # noqa: F401

    assert torch  # imported for its side effect: the modules are in sys.modules


def _child(req: dict) -> None:
    """In the forked process: become `python -m MODULE ARGS`; never returns."""
    import atexit as _atexit
    import runpy
    import traceback

    code: int = 1
    try:
        # Signal dispositions are left as they are: the zygote changed none, so they are a
        # fresh interpreter's (SIGPIPE ignored, SIGINT raising KeyboardInterrupt).
        stdin = os.open(req["input"] or os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.close(stdin)
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.path[0] = os.getcwd()  # what `python -m` puts first
        sys.argv = [req["module"], *req["argv"]]
        try:
            runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: B036 (what an uncaught exception does to `python -m`)
            traceback.print_exc()
            code = 1
        threading._shutdown()  # what the interpreter's exit does: join the non-daemon threads
        _atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    """Read one request a line from stdin, fork, answer {"pid"} and then {"rc"}."""
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # stray output of an import must not reach the answers
        os.dup2(null, fd)
    _preload()
    threads = threading.active_count()
    answers.write((json.dumps({"ready": threads == 1, "threads": threads}) + "\n").encode())
    for line in requests:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            answers.close()
            _child(req)
        answers.write((json.dumps({"pid": pid}) + "\n").encode())
        _, status = os.waitpid(pid, 0)
        answers.write((json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n").encode())


# --- the client ---------------------------------------------------------------------------

class _Zygote:
    def __init__(self, env: dict[str, str]) -> None:
        self.start_env = at_start(env)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.forked"], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)  # unbuffered: select sees every line
        hello = self._answer(120)
        self.ready = bool(hello and hello.get("ready"))

    def _answer(self, timeout: float | None) -> dict | None:
        assert self.proc.stdout is not None
        if timeout is not None:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, timeout))
            if not ready:
                return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def run(self, module: str, argv: list[str], env: dict[str, str], cwd: Path,
            timeout: float, input: str | None) -> subprocess.CompletedProcess:
        args = [sys.executable, "-m", module, *argv]
        with tempfile.TemporaryDirectory(prefix="forked-") as tmp:
            out, err, given = Path(tmp) / "out", Path(tmp) / "err", Path(tmp) / "in"
            if input is not None:
                given.write_text(input, encoding="utf-8")
            req = {"module": module, "argv": argv, "env": env, "cwd": str(cwd), "out": str(out), "err": str(err),
                   "input": str(given) if input is not None else None}
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
            started = self._answer(60)
            if started is None:
                raise RuntimeError("the test zygote did not fork")
            done = self._answer(timeout)
            if done is None:  # as subprocess.run: kill it, then say it ran too long
                os.kill(started["pid"], signal.SIGKILL)
                self._answer(None)
                raise subprocess.TimeoutExpired(args, timeout, out.read_text(errors="replace"),
                                                err.read_text(errors="replace"))
            return subprocess.CompletedProcess(args, done["rc"], out.read_text(encoding="utf-8", errors="replace"),
                                               err.read_text(encoding="utf-8", errors="replace"))

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_zygote: _Zygote | None = None
_lock = threading.Lock()


def _get(env: dict[str, str]) -> _Zygote | None:
    global _zygote
    if _zygote is None or _zygote.proc.poll() is not None:
        _zygote = _Zygote(env)
        atexit.register(_zygote.close)
    return _zygote if _zygote.ready else None


def run_module(module: str, argv: list[str], env: dict[str, str], cwd: Path = ROOT,
               timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGV` with this environment and standard input: forked where it can
    be, else fresh."""
    with _lock:
        zygote = None if os.environ.get("TERNIT_TEST_FRESH") == "1" else _get(env)
        if zygote is not None and zygote.start_env == at_start(env):
            return zygote.run(module, argv, env, cwd, timeout, input)
    return subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd, input=input)


if __name__ == "__main__":
    serve()
