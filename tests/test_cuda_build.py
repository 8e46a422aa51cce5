"""The torch build against this PC's NVIDIA card (issue 22, item 3): which build the set-up
installs, the one line when a build cannot drive the card, the trainer refusing such a run
before training (never on the CPU instead), and text generation saying why it runs on the CPU.

No card here (nor under Wine): `nvidia-smi` is a fake on PATH that prints what a real one
prints for an RTX 5070 Ti; torch is the real CPU build, which is exactly the build a plain
`pip install torch` gives a Windows PC.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import trainer_run as tr
from trainer.plan import cuda_build
from trainer.plan.cuda_build import Card, build_for, runs_on, verdict

ROOT = Path(__file__).resolve().parent.parent

RTX_5070_TI = "0, GPU-5070ti00-0000-0000-0000-000000000000, NVIDIA GeForce RTX 5070 Ti, 12.0, 576.80"
RTX_3050 = "0, GPU-30500000-0000-0000-0000-000000000000, NVIDIA GeForce RTX 3050, 8.6, 566.36"
CU126_ARCHS = ["sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
CU128_ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]


@pytest.fixture
def nvidia_smi(tmp_path, monkeypatch):
    """Put a fake `nvidia-smi` first on PATH that prints the given csv lines."""
    def install(*lines: str) -> None:
        folder = tmp_path / "smi"
        folder.mkdir(exist_ok=True)
        if os.name == "nt":
            body = "@echo off\r\n" + "".join(f"echo {ln}\r\n" for ln in lines)
            (folder / "nvidia-smi.bat").write_text(body, encoding="ascii")
        else:
            script = folder / "nvidia-smi"
            script.write_text("#!/bin/sh\n" + "".join(f"echo '{ln}'\n" for ln in lines), encoding="ascii")
            script.chmod(0o755)
        monkeypatch.setenv("PATH", str(folder) + os.pathsep + os.environ.get("PATH", ""))
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # conftest hides cards; this test shows one

    return install


@pytest.mark.windows
def test_a_card_runs_on_a_build_with_its_architecture_or_an_older_one_of_its_major():
    assert not runs_on((12, 0), CU126_ARCHS)  # RTX 50 on a CUDA 12.6 build: no code for it
    assert runs_on((12, 0), CU128_ARCHS)
    assert runs_on((8, 9), ["sm_80", "sm_86"])  # sm_86 code runs on an RTX 40 (8.9)
    assert not runs_on((7, 5), ["sm_80", "sm_86"])
    assert runs_on((12, 1), ["compute_120"])  # PTX: the driver compiles it
    assert runs_on((9, 0), ["sm_90a"]) and not runs_on((10, 0), ["sm_90a"])


@pytest.mark.windows
def test_the_set_up_installs_the_build_for_the_newest_card_or_the_cpu_one():
    assert build_for([]) == "cpu"
    assert build_for([Card(0, "RTX 5070 Ti", (12, 0))]) == "cu128"
    assert build_for([Card(0, "RTX 3050", (8, 6))]) == "cu128"
    assert build_for([Card(0, "GTX 1060", (6, 1))]) == "cu126"
    assert build_for([Card(0, "an old driver", None)]) == "cu128"
    assert build_for([Card(0, "GTX 1060", (6, 1)), Card(1, "RTX 5070 Ti", (12, 0))]) == "cu128"


@pytest.mark.windows
def test_each_problem_is_one_line_saying_what_to_install():
    card = [Card(0, "NVIDIA GeForce RTX 5070 Ti", (12, 0), driver="576.80")]
    cpu = verdict(card, False, [], "2.9.0+cpu", None, python="py")
    assert cpu == ('torch 2.9.0+cpu is a CPU-only build and cannot use the NVIDIA GeForce RTX 5070 Ti: install '
                   'the CUDA build: "py" -m pip install --force-reinstall torch --index-url '
                   'https://download.pytorch.org/whl/cu128')
    old = verdict(card, True, CU126_ARCHS, "2.9.0+cu126", "12.6", python="py")
    assert "has no code for the NVIDIA GeForce RTX 5070 Ti (sm_120" in old and old.endswith("/whl/cu128")
    driver = verdict(card, False, [], "2.9.0+cu128", "12.8", python="py")
    assert "update the NVIDIA driver" in driver and "576.80" in driver
    assert verdict(card, True, CU128_ARCHS, "2.9.0+cu128", "12.8") is None
    assert all("\n" not in line for line in (cpu, old, driver))


@pytest.mark.windows
def test_cards_are_found_with_nvidia_smi_and_hidden_by_cuda_visible_devices(nvidia_smi, monkeypatch):
    nvidia_smi(RTX_5070_TI, RTX_3050.replace("0, ", "1, ", 1))
    cards = cuda_build.find_cards()
    assert [(c.index, c.name, c.capability) for c in cards] == [
        (0, "NVIDIA GeForce RTX 5070 Ti", (12, 0)), (1, "NVIDIA GeForce RTX 3050", (8, 6))]
    assert [c.index for c in cuda_build.visible(cards, {"CUDA_VISIBLE_DEVICES": "1"})] == [1]
    assert cuda_build.visible(cards, {"CUDA_VISIBLE_DEVICES": ""}) == []
    assert [c.index for c in cuda_build.visible(cards, {"CUDA_VISIBLE_DEVICES": "GPU-3050"})] == [1]


@pytest.mark.windows
@pytest.mark.parametrize("device", ["cuda", "auto"])
def test_pick_device_refuses_a_card_its_torch_cannot_drive(device, nvidia_smi):
    """The trainer's own choice, in this process (the next test runs the whole trainer)."""
    from trainer.config.run_config import ConfigError
    from trainer.parallel.distributed import World
    from trainer.run.train import pick_device

    assert pick_device("cpu", World()).type == "cpu"
    nvidia_smi(RTX_5070_TI)
    with pytest.raises(ConfigError, match="RTX 5070 Ti.*--index-url https://download.pytorch.org/whl/cu128"):
        pick_device(device, World())


@pytest.mark.parametrize("device", ["cuda", "auto"])
def test_the_trainer_refuses_a_run_on_a_card_its_torch_cannot_drive(device, nvidia_smi, tiny_data, tmp_path):
    """Before, --device cuda said «torch sees no CUDA GPU: use --device cpu» (steering the user
    away from the card) and --device auto trained on the CPU without a word."""
    nvidia_smi(RTX_5070_TI)
    run = tr.write_run(tmp_path / "run", tiny_data, steps_to=3)
    done = subprocess.run([sys.executable, "-m", "trainer", "--run", str(run), "--device", device],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True,
                          encoding="utf-8", timeout=600)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    # A CPU build (CI's, a plain Windows install's) or a CUDA build with no driver (here):
    # either way the line names the card and what to install.
    assert ("CPU-only build and cannot use the NVIDIA GeForce RTX 5070 Ti" in line
            or "cannot reach the NVIDIA GeForce RTX 5070 Ti" in line), line
    assert "--index-url https://download.pytorch.org/whl/cu128" in line
    assert not (run / "checkpoints").exists() and tr.events(run, "step") == []


@pytest.mark.windows
def test_text_generation_on_auto_says_why_it_runs_on_the_cpu(nvidia_smi, tmp_path):
    from app.text.generation import start_text
    from trainer.config.run_config import ModelConfig
    from trainer.model.gpt import GPT
    from trainer.state import checkpoint as ckpt
    from trainer.text.generate import load_for_generation

    cfg = ModelConfig(context=16, width=32, heads=2, layers=2, vocab=50)
    model = GPT(cfg)
    model.init_weights(0)
    payload = {"format": ckpt.FORMAT, "config": {"model": cfg.__dict__}, "model": model.state_dict(), "step": 1}
    path, _ = ckpt.save(tmp_path, 1, payload, 3)
    assert load_for_generation(path, "auto").cpu_because is None  # no card: the CPU, nothing to say
    nvidia_smi(RTX_5070_TI)
    loaded = load_for_generation(path, "auto")
    assert loaded.device.type == "cpu" and "the NVIDIA GeForce RTX 5070 Ti" in loaded.cpu_because
    text = start_text({"device": "cpu", "step": 1, "cpu_because": loaded.cpu_because})
    assert "on the CPU, not the GPU" in text or "на процессоре, а не на видеокарте" in text
    with pytest.raises(ckpt.CheckpointError, match="RTX 5070 Ti"):
        load_for_generation(path, "cuda")


def test_python_m_trainer_cuda_build_says_the_verdict_in_one_line(nvidia_smi):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "trainer.plan.cuda_build"], env=env, cwd=ROOT, capture_output=True,
                          encoding="utf-8", timeout=600)
    assert (done.returncode, len(done.stdout.strip().splitlines())) == (0, 1), done.stderr
    assert "no NVIDIA card here, runs train on the CPU" in done.stdout
    nvidia_smi(RTX_5070_TI)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    index = subprocess.run([sys.executable, "-m", "trainer.plan.cuda_build", "--index"], env=env, cwd=ROOT,
                           capture_output=True, encoding="utf-8", timeout=600)
    assert index.stdout.strip() == "cu128"
    done = subprocess.run([sys.executable, "-m", "trainer.plan.cuda_build"], env=env, cwd=ROOT, capture_output=True,
                          encoding="utf-8", timeout=600)
    assert done.returncode == 1 and len(done.stdout.strip().splitlines()) == 1
    assert "RTX 5070 Ti" in done.stdout and "/whl/cu128" in done.stdout


@pytest.mark.parametrize(("torch_version", "spec"), [
    ("2.10.1+cu128", "triton-windows>=3.6,<3.7"),
    ("2.11.0+cu128", "triton-windows>=3.6,<3.7"),  # 2.11 kept 2.10's Triton
    ("2.12.0+cu130", "triton-windows>=3.7,<3.8"),
    ("2.6.0+cu126", "triton-windows>=3.2,<3.3"),
    ("2.13.0+cpu", None),  # the CPU build: nothing to compile for a card
    ("2.13.0", None),  # PyPI's Windows wheel is the CPU build
    ("2.99.0+cu128", None),  # a torch whose Triton the table does not know: compile off, said
])
def test_triton_windows_matches_the_torch_it_goes_beside(torch_version, spec):
    assert cuda_build.triton_windows_spec(torch_version) == spec
