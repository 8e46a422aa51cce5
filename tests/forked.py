"""`python -m MODULE ARGS` for the tests, forked from a process that has imported torch.

Each trainer process a test starts used to spend ≈ 2.6 s of its ≈ 3.4 s importing torch,
torch._dynamo (torch's optimizers import it at their first call) and, for the lean state,
bitsandbytes: ≈ 150 such processes made most of the suite's time on CI's 2 cores. Here a
zygote process per test worker imports them once; each run is a fork of it that then does
what `python -m MODULE` does (runpy, sys.argv, sys.path[0] the working folder) with the
test's own environment, working folder and output files. The trainer's code, its process,
pid, exit code and files are real; only the interpreter's start is shared.

`run_ranks` does the same for a two-process (gloo) run: each rank a fork with the
environment torchrun gives it (RANK, WORLD_SIZE, MASTER_ADDR/PORT, …; rank 0 holds the
rendezvous store, as torch.distributed does without torchrun's agent), and as torchrun does,
a rank that fails ends the others. Its fallback is torchrun itself. The tests that are about
torchrun (the 2×T4 kernel's launch, a rank's failure) call torchrun directly.

`start_module` starts one and leaves it running, as subprocess.Popen does, for a test that
signals it, pauses it or reads its output meanwhile (its stdout and stderr go to files);
until it has ended, the worker's other runs start fresh (the zygote waits on it).

What a fork cannot give falls back to a fresh interpreter (`subprocess.run`), the same
call: an environment that differs from the zygote's in a variable read while the
interpreter or its libraries start (PYTHON*, LC_*, LANG, OMP_*, CUDA*, TORCH*, CXX, …),
a zygote that could not start or has a thread of its own, a system without fork
(Windows), or TERNIT_TEST_FRESH=1, which runs every one of them fresh (the whole suite as
before, only slower). tests/test_forked.py checks that a forked start looks to the module
as a fresh one does.

The window's and the command line's tests start their trainers as the product does, in
fresh interpreters, and each two-process test file keeps one launch by torchrun itself:
this is only for tests that run a module directly.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Environment variables read while an interpreter and its libraries start (encodings,
# import paths, OpenMP's thread count, torch's and CUDA's settings, the C++ compiler that
# torch._inductor's config takes when it is imported): a run that sets any of them
# differently from the zygote's start needs a fresh interpreter.
AT_START = ("PYTHON", "LC_", "LANG", "OMP_", "MKL_", "KMP_", "GOMP_", "CUDA", "TORCH", "NVIDIA",
            "LD_", "MALLOC", "BNB_", "CXX", "CC", "TRITON")


def at_start(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(AT_START)}


def python_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a test's `python -m`: this tree first on PYTHONPATH (its
    `trainer`, not an installed one) and one OpenMP thread unless one was set."""
    env = dict(environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


# The test worker's environment as conftest set it, before any test changed it: the
# zygote starts with its start-time variables, whichever test happens to need it first
# (the failed-compilation test's CXX made every later run in its worker fresh).
_WORKER_START = at_start(python_env(os.environ))


# --- the zygote (python -m tests.forked) -------------------------------------------------

def _preload() -> None:
    import logging

    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401  (what the first optimizer call imports)
    import torch.optim  # noqa: F401

    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)  # as trainer.step.lean does
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        pass
    import safetensors.torch  # noqa: F401


def _child(module: str, argv: list[str], cwd: str, proc: dict) -> None:
    """In the forked process: become `python -m MODULE ARGV`; never returns."""
    import atexit as _atexit
    import runpy
    import traceback

    code: int = 1
    try:
        # Signal dispositions are left as they are: the zygote changed none, so they are a
        # fresh interpreter's (SIGPIPE ignored, SIGINT raising KeyboardInterrupt).
        stdin = os.open(proc["input"] or os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.close(stdin)
        if proc.get("output"):  # both appended to one file: stdout=f, stderr=f of open(path, "ab")
            f = os.open(proc["output"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            os.dup2(f, 1)
            os.dup2(f, 2)
            os.close(f)
        else:
            for fd, path in ((1, proc["out"]), (2, proc["err"])):
                f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(f, fd)
                os.close(f)
        if proc.get("file_size_limit") is not None:  # what a preexec_fn setting RLIMIT_FSIZE does
            import resource

            limit = proc["file_size_limit"]
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(proc["env"])
        sys.path[0] = os.getcwd()  # what `python -m` puts first
        sys.argv = [module, *argv]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
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


def _wait_all(pids: list[int]) -> tuple[list[int], int]:
    """The exit codes of these children, and the first failure's (0 if none): as torchrun,
    once one fails the others get SIGTERM (the trainer's stop), and SIGKILL 30 s later (a
    rank waiting in a collective)."""
    codes: dict[int, int] = {}
    first = 0
    kill_at: float | None = None
    while len(codes) < len(pids):
        pid, status = os.waitpid(-1, 0 if kill_at is None else os.WNOHANG)
        if pid == 0:
            if time.monotonic() > kill_at:
                for p in set(pids) - set(codes):
                    os.kill(p, signal.SIGKILL)
                kill_at = float("inf")
            time.sleep(0.05)
            continue
        codes[pid] = os.waitstatus_to_exitcode(status)
        if codes[pid] != 0 and kill_at is None:
            first = codes[pid]
            for p in set(pids) - set(codes):
                os.kill(p, signal.SIGTERM)
            kill_at = time.monotonic() + 30
    return [codes[p] for p in pids], first


def serve() -> None:
    """Read one request a line from stdin: fork each of its processes, answer {"pids"},
    then {"codes", "first"} once all have ended."""
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # stray output of an import must not reach the answers
        os.dup2(null, fd)
    _preload()
    threads = threading.active_count()
    # torch._dynamo's import sets TORCHINDUCTOR_CACHE_DIR (to its default): the start-time
    # variables after the imports are the zygote's too.
    hello = {"ready": threads == 1, "threads": threads, "start_env": at_start(os.environ)}
    answers.write((json.dumps(hello) + "\n").encode())
    for line in requests:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pids = []
        for proc in req["procs"]:
            pid = os.fork()
            if pid == 0:
                requests.close()
                answers.close()
                _child(req["module"], req["argv"], req["cwd"], proc)
            pids.append(pid)
        answers.write((json.dumps({"pids": pids}) + "\n").encode())
        codes, first = _wait_all(pids)
        answers.write((json.dumps({"codes": codes, "first": first}) + "\n").encode())


# --- the client ---------------------------------------------------------------------------

class _Zygote:
    def __init__(self, env: dict[str, str]) -> None:
        env = {**{k: v for k, v in env.items() if not k.startswith(AT_START)}, **_WORKER_START}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.forked"], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)  # unbuffered: select sees every line
        hello = self._answer(120)
        self.ready = bool(hello and hello.get("ready"))
        # A run matches the zygote as it started, or as its imports left it (a worker that
        # has imported torch._dynamo itself has the same variable set).
        self.start_envs = [_WORKER_START, (hello or {}).get("start_env")]

    def _answer(self, timeout: float | None) -> dict | None:
        assert self.proc.stdout is not None
        if timeout is not None:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, timeout))
            if not ready:
                return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def fork(self, module: str, argv: list[str], cwd: Path, procs: list[dict]) -> list[int]:
        """Ask for `procs` (one a rank) forked as `python -m MODULE ARGV`: their pids, once
        they have started."""
        req = {"module": module, "argv": argv, "cwd": str(cwd), "procs": procs}
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        started = self._answer(60)
        if started is None:
            raise RuntimeError("the test zygote did not fork")
        return started["pids"]

    def run(self, module: str, argv: list[str], envs: list[dict[str, str]], cwd: Path,
            timeout: float, input: str | None, args: list[str], output: Path | None = None,
            file_size_limit: int | None = None) -> subprocess.CompletedProcess:
        """One process per environment; their outputs joined in rank order (or, with
        `output`, appended to that file, and "" returned); the exit code of the first to
        fail (0 when none did)."""
        with tempfile.TemporaryDirectory(prefix="forked-") as tmp:
            given = Path(tmp) / "in"
            if input is not None:
                given.write_text(input, encoding="utf-8")
            procs = [{"env": env, "out": str(Path(tmp) / f"out{i}"), "err": str(Path(tmp) / f"err{i}"),
                      "input": str(given) if input is not None else None,
                      "output": str(output) if output is not None else None,
                      "file_size_limit": file_size_limit} for i, env in enumerate(envs)]
            pids = self.fork(module, argv, cwd, procs)
            done = self._answer(timeout)

            def joined(kind: str) -> str:
                return "".join(Path(p[kind]).read_text(encoding="utf-8", errors="replace")
                               for p in procs if Path(p[kind]).exists())

            if done is None:  # as subprocess.run: kill it, then say it ran too long
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                self._answer(None)
                raise subprocess.TimeoutExpired(args, timeout, joined("out"), joined("err"))
            return subprocess.CompletedProcess(args, done["first"], joined("out"), joined("err"))

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
# The run started by `start_module` that the zygote is waiting on (it serves one request at
# a time): until it has ended, other runs of this worker start fresh.
_busy: Started | None = None


def _get(env: dict[str, str]) -> _Zygote | None:
    global _zygote
    if _zygote is None or _zygote.proc.poll() is not None:
        _zygote = _Zygote(env)
        atexit.register(_zygote.close)
    return _zygote if _zygote.ready else None


def _forkable(env: dict[str, str]) -> _Zygote | None:
    """The zygote, if a run with this environment can be forked from it."""
    if os.environ.get("TERNIT_TEST_FRESH") == "1" or not hasattr(os, "fork"):
        return None
    if _busy is not None:
        return None
    zygote = _get(env)
    return zygote if zygote is not None and at_start(env) in zygote.start_envs else None


def run_module(module: str, argv: list[str], env: dict[str, str], cwd: Path = ROOT,
               timeout: float = 120, input: str | None = None, output: Path | None = None,
               file_size_limit: int | None = None) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGV` with this environment and standard input: forked where it can
    be, else fresh. `output`: its stdout and stderr appended to this file instead of
    captured; `file_size_limit`: no file it writes may grow past this many bytes
    (RLIMIT_FSIZE, POSIX only), as a preexec_fn setting it gives a fresh one."""
    args = [sys.executable, "-m", module, *argv]
    with _lock:
        zygote = _forkable(env)
        if zygote is not None:
            return zygote.run(module, argv, [env], cwd, timeout, input, args, output, file_size_limit)
    if output is None and file_size_limit is None:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, input=input)

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    preexec = limit if file_size_limit is not None else None
    if output is None:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, input=input,
                              preexec_fn=preexec)
    with open(output, "ab") as out:
        done = subprocess.run(args, stdout=out, stderr=out, timeout=timeout, env=env, cwd=cwd,
                              input=None if input is None else input.encode(), preexec_fn=preexec)
    return subprocess.CompletedProcess(args, done.returncode, "", "")


class Started:
    """A `python -m MODULE` left running, as subprocess.Popen leaves one (`start_module`): its
    pid for signals, `wait`, `poll`, `kill`, and its output so far in files (`stderr()`,
    `stdout()`), which a test reads while it runs."""

    def __init__(self, module: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        global _busy
        self.args = [sys.executable, "-m", module, *argv]
        self._tmp = tempfile.TemporaryDirectory(prefix="started-")
        tmp = Path(self._tmp.name)
        self._out, self._err = tmp / "out", tmp / "err"
        self.returncode: int | None = None
        self._popen: subprocess.Popen | None = None
        self._zygote: _Zygote | None = None
        with _lock:
            zygote = _forkable(env)
            if zygote is not None:
                proc = {"env": env, "out": str(self._out), "err": str(self._err), "input": None}
                self.pid: int = zygote.fork(module, argv, cwd, [proc])[0]
                self._zygote = zygote
                _busy = self
                return
        with open(self._out, "wb") as out, open(self._err, "wb") as err:
            self._popen = subprocess.Popen(self.args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=err)
        self.pid = self._popen.pid

    def stdout(self) -> str:
        return self._out.read_text(encoding="utf-8", errors="replace") if self._out.exists() else ""

    def stderr(self) -> str:
        return self._err.read_text(encoding="utf-8", errors="replace") if self._err.exists() else ""

    def send_signal(self, sig: int) -> None:
        if self._popen is not None:
            self._popen.send_signal(sig)
        elif self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        if self.returncode is None:
            if self._popen is not None:
                self._popen.kill()
            else:
                os.kill(self.pid, signal.SIGKILL)

    def _ended(self, timeout: float | None) -> int | None:
        global _busy
        if self.returncode is not None:
            return self.returncode
        if self._popen is not None:
            try:
                self.returncode = self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
            return self.returncode
        assert self._zygote is not None
        done = self._zygote._answer(timeout)
        if done is None:
            return None
        self.returncode = done["first"]
        with _lock:
            _busy = None
        return self.returncode

    def poll(self) -> int | None:
        return self._ended(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._ended(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0, self.stdout(), self.stderr())
        return code

    def end(self) -> None:
        """A test's clean-up: kill it if it still runs, wait for its exit, remove its files."""
        if self.poll() is None:
            self.kill()
            self.wait(60)
        self._tmp.cleanup()


def start_module(module: str, argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> Started:
    """`python -m MODULE ARGV` started and left running (a test that signals it, or watches
    its files meanwhile): forked where it can be, else fresh. Call `end()` after it."""
    return Started(module, argv, env, cwd)


def rank_env(rank: int, ranks: int, port: int) -> dict[str, str]:
    """What torchrun --standalone puts in a worker's environment (torch 2.13), with the
    rendezvous store held by rank 0 instead of torchrun's agent."""
    env = {"RANK": rank, "LOCAL_RANK": rank, "GROUP_RANK": 0, "ROLE_RANK": rank, "ROLE_NAME": "default",
           "WORLD_SIZE": ranks, "LOCAL_WORLD_SIZE": ranks, "GROUP_WORLD_SIZE": 1, "ROLE_WORLD_SIZE": ranks,
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "TORCHELASTIC_RESTART_COUNT": 0,
           "TORCHELASTIC_MAX_RESTARTS": 0, "TORCHELASTIC_RUN_ID": "tests", "TORCHELASTIC_USE_AGENT_STORE": False}
    return {k: str(v) for k, v in env.items()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_argv(module: str, argv: list[str], ranks: int = 2) -> list[str]:
    """torchrun itself on this machine: RANKS processes of `python -m MODULE ARGV`."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
            "-m", "--", module, *argv]


def run_ranks(module: str, argv: list[str], env: dict[str, str], ranks: int = 2, cwd: Path = ROOT,
              timeout: float = 240) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node=RANKS -m MODULE ARGV` for a test: the ranks
    forked where they can be, else torchrun itself."""
    args = torchrun_argv(module, argv, ranks)
    with _lock:
        zygote = _forkable(env)
        if zygote is not None:
            port = _free_port()
            envs = [{**env, **rank_env(r, ranks, port)} for r in range(ranks)]
            return zygote.run(module, argv, envs, cwd, timeout, None, args)
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


if __name__ == "__main__":
    serve()
