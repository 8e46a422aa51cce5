"""training.compile (trainer/step/compiling.py) in the real trainer on the CPU: bit-exact resume
with compilation on, checkpoints crossing between compiled and eager runs (plain weight
names), the economical levels compiled, the fallback when compilation fails, and the lean
state refused in one line.

The backend in these tests is "aot_eager" (TERNIT_COMPILE_BACKEND): the same graph
capture by dynamo and the same forward/backward split by AOTAutograd as inductor, without
inductor's C++ build, which takes ≈ 45 s cold (≈ 4 s from its cache) per process for the
tiny model on this 2-core machine. TERNIT_TEST_INDUCTOR=1 runs the resume test with
inductor itself (measured here: it holds bit for bit)."""

from __future__ import annotations

import os

import pytest

from tests.trainer_run import events, run_trainer, write_run

torch = pytest.importorskip("torch")

STEPS, STOP = 8, 5
KW = {"steps_to": STEPS, "eval_every": STEPS, "eval_segments": 8, "sample_tokens": 0}
INDUCTOR = os.environ.get("TERNIT_TEST_INDUCTOR") == "1"


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.setenv("TERNIT_COMPILE_BACKEND", "inductor" if INDUCTOR else "aot_eager")


def losses_after(run_dir, step: int) -> list[float]:
    return [s["loss"] for s in events(run_dir, "step") if s["step"] > step]


@pytest.mark.parametrize("level", ["off", "selective"])
def test_compiled_run_resumes_bit_exact_and_crosses_to_eager(tmp_path, tiny_data, backend, level):
    kw = {**KW, "compile": "on", "economical": level}
    # The uninterrupted run saves a checkpoint at every step (kept), so that its step STOP
    # is the resumed runs' starting point: one compiled process fewer than a stop-and-resume
    # (a periodic checkpoint holds the same state; the stop path has its own test in
    # test_trainer), and the saves must not change the trajectory either.
    whole = write_run(tmp_path / "whole", tiny_data, **kw, checkpoint_every_min=0, keep_checkpoints=STEPS)
    p = run_trainer(whole)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "compile: on" in p.stderr and not events(whole, "warning")
    assert events(whole, "start")[0]["compile"] == "on"
    end = events(whole, "end")[-1]
    at_stop = whole / "checkpoints" / f"step-{STOP:08d}.pt"
    saved = torch.load(at_stop, weights_only=True)
    assert not [k for k in saved["model"] if "_orig_mod" in k]  # plain names

    parted = write_run(tmp_path / "parted", tiny_data, **kw)
    p = run_trainer(parted, "--resume", str(at_stop))  # a new process compiles again
    assert p.returncode == 0, p.stderr[-3000:]
    assert events(parted, "start")[-1]["compile"] == "on"
    assert events(parted, "end")[-1]["state_sha256"] == end["state_sha256"]
    assert losses_after(parted, STOP) == losses_after(whole, STOP)

    # The compiled run's checkpoint continues eagerly, on the same trajectory (compiled
    # kernels may sum in another order: close, not equal).
    eager = write_run(tmp_path / "eager", tiny_data, **{**kw, "compile": "off"})
    p = run_trainer(eager, "--resume", str(at_stop))
    assert p.returncode == 0, p.stderr[-3000:]
    assert events(eager, "start")[-1]["compile"] == "off"
    assert losses_after(eager, STOP) == pytest.approx(losses_after(whole, STOP), abs=1e-3)


def test_a_failed_compilation_is_said_and_training_goes_on_eagerly(tmp_path, tiny_data, monkeypatch):
    # inductor with a C++ compiler that is there but does not work (a missing one is refused
    # by the plan: test_compile_choices_and_refusals): what such a CPU meets at the first step.
    monkeypatch.setenv("TERNIT_COMPILE_BACKEND", "inductor")
    # The broken one is the g++ first on PATH ($CXX unset, inductor's default: "g++"), not a
    # $CXX: CXX is read as torch._inductor's config is imported, so a run that sets it needs a
    # fresh interpreter, while with PATH it is forked as the other runs are (tests/forked.py).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    broken = bin_dir / "g++"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    run = write_run(tmp_path / "run", tiny_data, **KW, compile="on")
    p = run_trainer(run)
    assert p.returncode == 0, p.stderr[-3000:]
    warning = events(run, "warning")[0]
    assert warning["kind"] == "compile_failed" and "C++ compiler" in warning["message"]
    assert "training goes on without compilation" in p.stderr
    assert [s["step"] for s in events(run, "step")] == list(range(1, STEPS + 1))

    eager = write_run(tmp_path / "eager", tiny_data, **KW, compile="off")
    assert run_trainer(eager).returncode == 0
    # The failed attempt left nothing behind: the same state as a run that never tried.
    assert events(run, "end")[-1]["state_sha256"] == events(eager, "end")[-1]["state_sha256"]


def test_compile_choices_and_refusals(tmp_path, tiny_data, monkeypatch):
    from trainer.config.run_config import ConfigError, from_dict
    from trainer.parallel.distributed import World
    from trainer.plan.planner import Machine, Refusal, plan
    from trainer.run.hardware import this_machine

    def compiles(machine: Machine, **training) -> str:
        p = plan(from_dict({"training": training}), machine)
        return p.code if isinstance(p, Refusal) else p.compile.value

    cpu = Machine(bitsandbytes=True, compiler=True)
    card = Machine(device="cuda", capability=(8, 6), bf16=True, bitsandbytes=True, triton=True)
    assert compiles(cpu) == "off"  # auto: no gain measured on the CPU
    assert compiles(card) == "on"
    assert compiles(cpu, compile=True) == "on"
    assert compiles(card, lean_state="fused") == "off"  # auto leaves the fused step eager, and says why
    assert compiles(card, lean_state=True) == "on"  # gradients held: nothing to lose
    assert compiles(card, compile="on", lean_state="fused") == "compile_on_lean"
    # A compiler that is not there: auto says so, "on" is refused (not quietly eager).
    no_triton = Machine(device="cuda", capability=(8, 6), bf16=True)
    assert compiles(no_triton) == "off" and compiles(no_triton, compile="on") == "compile_no_compiler"
    assert compiles(Machine(), compile="on") == "compile_no_compiler"
    with pytest.raises(ConfigError, match="training.compile must be one of"):
        from_dict({"training": {"compile": "fast"}})
    assert from_dict({"training": {"compile": False}}).training.compile is False
    # The trainer's machine: inductor needs the C++ compiler $CXX names; another backend none.
    monkeypatch.setenv("TERNIT_COMPILE_BACKEND", "inductor")
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-g++"))
    assert this_machine(torch.device("cpu"), World()).compiler is False
    monkeypatch.setenv("TERNIT_COMPILE_BACKEND", "aot_eager")
    assert this_machine(torch.device("cpu"), World()).compiler is True

    # Refused before the lean state's library is imported at all: one line, exit 2.
    run = write_run(tmp_path / "lean", tiny_data, **KW, compile="on", lean_state="fused")
    p = run_trainer(run)
    assert p.returncode == 2
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "compile \"on\" cannot be combined" in errors[0]
    assert not (run / "checkpoints").exists()
