"""python -m trainer.parallel.ranks N TRAINER-ARGS...: N processes of `python -m trainer TRAINER-ARGS`
on this PC, as `torchrun --standalone --nproc_per_node=N` starts them. For Windows.

Windows' torch cannot run torchrun: its rendezvous store (TCPStore) asks for libuv, which
the Windows builds are made without ("use_libuv was requested but PyTorch was built
without libuv support"), and torchrun's agent gives no way to ask otherwise (USE_LIBUV=0 is
not read there; torch 2.15). The trainer's own `init_process_group` (env://) takes the
plain store on Windows by itself, so the ranks only need what torchrun would give them:
RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. They talk
through gloo (trainer/parallel/distributed.py says what that costs).

As torchrun does: a rank that fails ends the others; the exit code is the first failed
rank's, else 0. A stop request reaches every rank (RUN_DIR/STOP, which they agree on; a
console's Ctrl+C or Ctrl+Break, which every process of the console gets): this launcher
then waits for them to save instead of dying first.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def launch(world: int, trainer_args: list[str]) -> int:
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "trainer", *trainer_args],
                              env={**os.environ, **rank_env(r, world, port)}) for r in range(world)]
    for name in ("SIGINT", "SIGBREAK", "SIGTERM"):  # the ranks save on it; this one waits for them
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    first_failure = 0
    while any(p.poll() is None for p in procs):
        failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
        if failed and not first_failure:
            first_failure = failed[0]
            for p in procs:  # as torchrun: the others would wait for it in a collective forever
                if p.poll() is None:
                    p.terminate()
        time.sleep(0.2)
    codes = [p.returncode for p in procs]
    return first_failure or next((c for c in codes if c != 0), 0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or not args[0].isdigit() or int(args[0]) < 1:
        print("usage: python -m trainer.parallel.ranks N TRAINER-ARGS...", file=sys.stderr)
        return 2
    return launch(int(args[0]), args[1:])


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()
    sys.exit(main())
