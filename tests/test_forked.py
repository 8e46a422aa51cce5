"""tests/forked.py, the suite's fork-from-a-warm-process start of `python -m MODULE`: a forked
run must look to the module and to the test exactly as a fresh interpreter does, or fall
back to one."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests import forked
from tests.trainer_run import ROOT, trainer_env

pytestmark = [pytest.mark.skipif(os.name != "posix", reason="fork is POSIX"),
              pytest.mark.skipif(os.environ.get("TERNIT_TEST_FRESH") == "1", reason="every run fresh, as asked")]


def probe(*argv: str, env: dict | None = None, **kw) -> tuple[subprocess.CompletedProcess, dict]:
    p = forked.run_module("tests.forked_probe", list(argv), env or {**trainer_env(), "PROBE": "да"}, ROOT, **kw)
    return p, (json.loads(p.stdout.splitlines()[0]) if p.stdout else {})


def test_a_forked_run_is_started_as_python_m_is(tmp_path):
    # The worker's own import of torch._dynamo sets TORCHINDUCTOR_CACHE_DIR in its
    # environment (to the default): its runs are still forked (once they all went fresh).
    import torch._dynamo  # noqa: F401

    p, seen = probe("3", "--flag", input="строка\n")
    assert p.returncode == 3 and "на stderr" in p.stderr
    assert seen["argv"] == ["3", "--flag"] and seen["name"] == "__main__" and seen["stdin"] == "строка\n"
    assert seen["cwd"] == str(ROOT) and seen["path0"] == str(ROOT) and seen["env"] == "да"
    assert seen["ppid"] != os.getpid()  # a child of the warm process: it was forked
    assert p.args[1:4] == ["-m", "tests.forked_probe", "3"]

    p, _ = probe("raise")
    assert p.returncode == 1 and "ValueError: probe" in p.stderr


def test_an_environment_read_at_start_gets_a_fresh_interpreter(monkeypatch):
    _, forked_seen = probe("0")
    env = {**trainer_env(), "PYTHONIOENCODING": "utf-8", "PROBE": "x"}
    p, seen = probe("0", env=env)
    assert p.returncode == 0 and seen["ppid"] == os.getpid() != forked_seen["ppid"]
    monkeypatch.setenv("TERNIT_TEST_FRESH", "1")
    _, seen = probe("0")
    assert seen["ppid"] == os.getpid()


def test_a_run_past_its_timeout_is_killed_and_said():
    with pytest.raises(subprocess.TimeoutExpired):
        probe("sleep", timeout=1)
    p, seen = probe("0")  # the warm process goes on serving
    assert p.returncode == 0 and seen["argv"] == ["0"]


def test_ranks_get_torchruns_environment_and_a_failed_one_ends_the_other():
    p = forked.run_ranks("tests.forked_probe", ["rank"], trainer_env(), timeout=40)
    # rank 1 exits 5; rank 0, asleep, gets SIGTERM as torchrun's agent sends it
    assert p.returncode == 5
    envs = [forked.rank_env(r, 2, 1234) for r in (0, 1)]
    assert [e["RANK"] for e in envs] == ["0", "1"] and {e["WORLD_SIZE"] for e in envs} == {"2"}
    assert not forked.at_start({k: v for e in envs for k, v in e.items() if not k.startswith("TORCHELASTIC_")})


def test_the_first_run_of_a_worker_does_not_set_the_warm_process_s_start():
    """The zygote starts at a worker's first forked run, whatever that run's environment:
    it takes the worker's start-time variables, so a first run with its own CXX (the
    failed-compilation test) is fresh and the runs after it are still forked."""
    old = forked._zygote
    forked._zygote = None
    try:
        _, seen = probe("0", env={**trainer_env(), "CXX": "/no/such/g++"})
        assert seen["ppid"] == os.getpid()  # fresh
        _, seen = probe("0")
        assert seen["ppid"] != os.getpid()  # forked
    finally:
        if forked._zygote is not None:
            forked._zygote.close()
        forked._zygote = old
