"""The lab's set-up and its two commands, the same on every OS (standard library only):

    python lab.py run     # sets up .venv on first use, installs the lab, opens the window
    python lab.py test    # the same set-up, then ruff and the whole test suite
    python lab.py setup   # the set-up alone (again after pyproject.toml changes)

`make run` / `make test` call it on Linux and macOS, `lab run` / `lab test` (lab.bat) on
Windows. The set-up makes .venv with the Python that runs this file, installs PyTorch first,
then the lab (`pip install -e .[dev]`), and checks that the torch it installed drives this
PC's NVIDIA card (trainer/plan/cuda_build.py, which the trainer asks too before a run on a card).

Which torch: TORCH_SPEC when set (pip arguments, e.g. `torch==2.13.0`, or `torch
--index-url URL`); otherwise the build for this PC's newest NVIDIA card from PyTorch's own
index (PyPI's Windows torch is CPU-only; an RTX 50 needs CUDA 12.8+), or the CPU build when
there is no card. The set-up runs again only when pyproject.toml or that choice changed.
Env: VENV (default .venv), TORCH_SPEC, TEST_WORKERS (pytest-xdist's -n, default auto).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def min_python() -> tuple[int, int]:
    """pyproject.toml's requires-python (read as text: tomllib is newer than some Pythons this
    must still say "too old" to)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r'requires-python\s*=\s*">=\s*(\d+)\.(\d+)', text)
    return (int(found[1]), int(found[2])) if found else (3, 0)


def venv_dir() -> Path:
    return ROOT / (os.environ.get("VENV") or ".venv")


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def torch_args() -> list[str]:
    """What `pip install` gets for torch: TORCH_SPEC, else the build for this PC's cards."""
    spec = os.environ.get("TORCH_SPEC", "").strip()
    if spec:
        return shlex.split(spec, posix=os.name != "nt")
    sys.path.insert(0, str(ROOT))
    from trainer.plan.cuda_build import INDEX_URL, build_for, find_cards  # standard library only

    cards = find_cards()
    build = build_for(cards)
    said = ", ".join(f"{c.name} ({c.sm})" for c in cards) or "no NVIDIA card"
    print(f"lab: {said}: torch from {INDEX_URL}{build}", flush=True)
    return ["torch", "--index-url", f"{INDEX_URL}{build}"]


def pip(py: Path, *args: str) -> None:
    subprocess.run([str(py), "-m", "pip", "install", "-q", *args], check=True, cwd=ROOT)


def setup() -> Path:
    """Make or update the venv; returns its Python."""
    need = min_python()
    if sys.version_info < need:
        raise SystemExit(f"lab: Python {need[0]}.{need[1]} or newer is needed (this is "
                         f"{sys.version.split()[0]}): install it from https://www.python.org/downloads/")
    venv = venv_dir()
    py = venv_python(venv)
    torch = torch_args()
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + " ".join(torch).encode()).hexdigest()
    stamp = venv / ".installed"
    if py.exists() and stamp.exists() and stamp.read_text(encoding="utf-8").strip() == key:
        return py
    if not py.exists():
        print(f"lab: making {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip(py, "--upgrade", "pip")
    was = stamp.read_text(encoding="utf-8").strip() if stamp.exists() else ""
    # Another build of the same version (2.x+cpu → 2.x+cu128) counts as installed to pip.
    pip(py, *(["--force-reinstall"] if was and was != key else []), *torch)
    pip(py, "-e", ".[dev]")
    check = subprocess.run([str(py), "-m", "trainer.plan.cuda_build"], cwd=ROOT)
    if check.returncode != 0:  # its one line says what to install; the lab still opens (Kaggle, the CPU)
        print("lab: this torch cannot drive the card above; local runs on it are refused until it is "
              "installed (TORCH_SPEC=... then the set-up again)", file=sys.stderr, flush=True)
    stamp.write_text(key + "\n", encoding="utf-8")
    return py


def run(py: Path) -> int:
    return subprocess.run([str(py), "-m", "ui.main"], cwd=ROOT).returncode


def test(py: Path) -> int:
    ruff = subprocess.run([str(py), "-m", "ruff", "check", "."], cwd=ROOT)
    if ruff.returncode != 0:
        return ruff.returncode
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    workers = os.environ.get("TEST_WORKERS") or "auto"
    return subprocess.run([str(py), "-m", "pytest", "-q", "-n", workers, "--dist", "worksteal"],
                          cwd=ROOT, env=env).returncode


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    if command not in ("run", "test", "setup"):
        print("\n\n".join(__doc__.split("\n\n")[:2]) + "\n", file=sys.stderr)
        return 2
    py = setup()
    if command == "run":
        return run(py)
    if command == "test":
        return test(py)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
