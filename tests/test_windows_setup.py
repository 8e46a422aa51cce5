"""The set-up's two commands (issue 22, item 3): lab.py, which `make run|test` and Windows'
`lab run|test` (lab.bat) both call, and its choice of torch. The install itself is CI's
`make test` (a fresh clone, TORCH_SPEC set); the check after it is trainer/plan/cuda_build.py's
(tests/test_cuda_build.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cuda_build import RTX_5070_TI, nvidia_smi  # noqa: F401 - the fixture

pytestmark = pytest.mark.windows
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def lab():
    spec = importlib.util.spec_from_file_location("lab_setup", ROOT / "lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torch_spec_overrides_the_choice(lab, monkeypatch):
    monkeypatch.setenv("TORCH_SPEC", "torch==2.13.0")
    assert lab.torch_args() == ["torch==2.13.0"]
    monkeypatch.setenv("TORCH_SPEC", "torch --index-url https://download.pytorch.org/whl/cu129")
    assert lab.torch_args() == ["torch", "--index-url", "https://download.pytorch.org/whl/cu129"]


def test_the_cuda_build_for_the_card_from_pytorchs_index_or_the_cpu_one(lab, monkeypatch, nvidia_smi, tmp_path):  # noqa: F811
    monkeypatch.delenv("TORCH_SPEC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no nvidia-smi: no card
    assert lab.torch_args() == ["torch", "--index-url", "https://download.pytorch.org/whl/cpu"]
    nvidia_smi(RTX_5070_TI)
    assert lab.torch_args() == ["torch", "--index-url", "https://download.pytorch.org/whl/cu128"]


def test_the_venv_layout_of_this_os(lab, tmp_path):
    py = lab.venv_python(tmp_path)
    assert py == tmp_path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def test_without_a_command_it_says_how_to_use_it():
    done = subprocess.run([sys.executable, "lab.py"], cwd=ROOT, capture_output=True, encoding="utf-8", timeout=120)
    assert done.returncode == 2 and "python lab.py run" in done.stderr


@pytest.mark.skipif(os.name != "nt", reason="lab.bat is Windows' launcher (cmd.exe)")
def test_lab_bat_finds_python_and_hands_it_the_command():
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    done = subprocess.run(["cmd", "/c", str(ROOT / "lab.bat")], cwd=ROOT, capture_output=True,
                          env={**os.environ, "PATH": path}, timeout=120)
    assert done.returncode == 2 and b"python lab.py run" in done.stderr


def test_the_python_it_needs_is_pyprojects(lab):
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        required = tomllib.load(f)["project"]["requires-python"]
    assert required == ">=" + ".".join(map(str, lab.min_python()))


def test_the_window_is_a_gui_script_and_tokenizers_has_encode_batch_fast():
    """A console script opened a console window beside the window on Windows (closing it
    killed the window); tokenizers 0.19 lacks the encode_batch_fast the data code calls."""
    import re
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["gui-scripts"] == {"ternit-lab": "ui.main:main"} and "ternit-lab" not in project["scripts"]
    pin = next(r for r in project["dependencies"] if r.startswith("tokenizers"))
    assert tuple(map(int, re.search(r">=(\d+)\.(\d+)", pin).groups())) >= (0, 20)


def test_a_python_that_cannot_make_a_venv_is_said_in_one_line(lab):
    """The embeddable Windows build has no venv; Debian's Python lacks ensurepip until
    python3-venv is installed: one line naming what to install, not a traceback."""
    import importlib.util

    can = all(importlib.util.find_spec(m) for m in ("venv", "ensurepip"))  # not the Wine kit's embeddable build
    assert (lab.venv_problem() is None) == can
    line = lab.venv_problem(lambda name: None if name == "ensurepip" else object())
    assert line is not None and "\n" not in line
    assert ("python.org" in line) if os.name == "nt" else ("-venv`" in line and "ensurepip" in line)


def test_an_unreachable_torch_index_is_given_up_in_seconds_and_pypi_said(lab, capsys):
    """A port that accepts and never answers: the index is given up within its timeout, and
    the set-up says in one line that PyPI's torch is installed instead, and why."""
    import socket
    import time

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/whl/cu128"
    try:
        start = time.monotonic()
        why = lab.index_reachable(url, timeout_s=0.5)
        assert why and time.monotonic() - start < 5
        chosen = lab.torch_source(["torch", "--index-url", url], reachable=lambda u: lab.index_reachable(u, 0.5))
    finally:
        silent.close()
    assert chosen == ["torch"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and url in err[0] and "PyPI" in err[0]
    with pytest.raises(SystemExit, match="TORCH_SPEC"):
        lab.torch_source(["torch", "--index-url", url], reachable=lambda u: "refused", explicit=True)
    assert lab.torch_source(["torch==2.13.0"]) == ["torch==2.13.0"]  # PyPI: nothing to ask
    assert "--timeout" in lab.PIP_PATIENCE and "--retries" in lab.PIP_PATIENCE


def test_the_set_up_installs_triton_windows_beside_a_cuda_torch_or_says_why_not(lab, monkeypatch, capsys):
    """lab.triton_for_windows (run by the set-up on Windows only): pip is asked for the
    triton-windows that this torch pins; for a torch the table does not know, one line why
    compile stays off. Under the Wine kit only the install and the import can be checked,
    never a compile on a card (there is none)."""
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(lab, "pip", lambda py, *args: asked.append(args))
    monkeypatch.setattr(lab, "installed_torch", lambda py: "2.12.0+cu128")
    lab.triton_for_windows(Path("python"))
    assert asked == [("triton-windows>=3.7,<3.8",)]
    monkeypatch.setattr(lab, "installed_torch", lambda py: "2.99.0+cu128")
    lab.triton_for_windows(Path("python"))
    assert len(asked) == 1 and "torch.compile stays off on the card" in capsys.readouterr().out
