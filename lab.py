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
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# pip's own defaults (15 s a request, 5 retries with back-off) make an unreachable index cost
# minutes of warnings; the index is asked first in seconds, and pip given less patience.
INDEX_TIMEOUT_S = 5.0
PIP_PATIENCE = ("--timeout", "15", "--retries", "1")


def min_python() -> tuple[int, int]:
    """pyproject.toml's requires-python (read as text: tomllib is newer than some Pythons this
    must still say "too old" to)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r'requires-python\s*=\s*">=\s*(\d+)\.(\d+)', text)
    return (int(found[1]), int(found[2])) if found else (3, 0)


def venv_problem(find_spec=importlib.util.find_spec) -> str | None:
    """The one line to say when this Python cannot make a venv (None: it can). The
    embeddable Windows build has no `venv`; Debian's and Ubuntu's Python has it without
    `ensurepip` until python3-venv is installed (venv then fails half-way)."""
    if find_spec("venv") is not None and find_spec("ensurepip") is not None:
        return None
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if os.name == "nt":
        return (f"lab: this Python ({sys.executable}) cannot make a virtual environment (no venv module: "
                "the embeddable build?): install Python from https://www.python.org/downloads/ and run "
                "`py lab.py run` again")
    return (f"lab: this Python ({sys.executable}) cannot make a virtual environment (no "
            f"{'venv' if find_spec('venv') is None else 'ensurepip'}): on Debian or Ubuntu "
            f"`sudo apt-get install python{version}-venv`, then run it again")


def index_url(args: list[str]) -> str | None:
    """The --index-url among pip's arguments (None: PyPI)."""
    for i, arg in enumerate(args):
        if arg == "--index-url" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--index-url="):
            return arg.split("=", 1)[1]
    return None


def index_reachable(url: str, timeout_s: float = INDEX_TIMEOUT_S) -> str | None:
    """None when the package index answers within `timeout_s`, else why not, in words."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/torch/", timeout=timeout_s):
            return None
    except urllib.error.HTTPError as e:
        return None if e.code < 500 else f"HTTP {e.code}"
    except (OSError, ValueError) as e:  # URLError, a timeout, a refused connection, a bad URL
        reason = getattr(e, "reason", None) or e
        return str(reason) or type(e).__name__


def torch_source(torch: list[str], reachable=index_reachable, explicit: bool = False) -> list[str]:
    """The torch arguments to install with: as chosen, or PyPI's torch when the index the
    set-up chose cannot be reached (said in one line: which, and what it means). An index
    TORCH_SPEC names (`explicit`) is the user's choice: unreachable, the set-up stops."""
    url = index_url(torch)
    if url is None:
        return torch
    print(f"lab: asking {url} for torch…", flush=True)
    why = reachable(url)
    if why is None:
        return torch
    if explicit:
        raise SystemExit(f"lab: {url} (TORCH_SPEC) cannot be reached ({why}): check the network or the URL")
    cpu_only = " (CPU-only on Windows and macOS)" if os.name == "nt" or sys.platform == "darwin" else ""
    print(f"lab: {url} cannot be reached ({why}): installing PyPI's torch instead{cpu_only}; "
          "TORCH_SPEC=... and the set-up again picks another build", file=sys.stderr, flush=True)
    return ["torch"]


def installed_torch(py: Path) -> str:
    done = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                          capture_output=True, text=True, cwd=ROOT)
    return done.stdout.strip() or "?"


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
    subprocess.run([str(py), "-m", "pip", "install", "-q", *PIP_PATIENCE, *args], check=True, cwd=ROOT)


def triton_for_windows(py: Path) -> None:
    """torch.compile's Triton beside a CUDA build of torch on Windows: triton-windows at the
    version that torch pins (trainer/plan/cuda_build.py's table), or a line saying why
    compile stays off (the plan says it again: compile_no_triton)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from trainer.plan.cuda_build import triton_windows_spec  # standard library only

    version = installed_torch(py)
    spec = triton_windows_spec(version)
    if spec is None:
        if "+cu" in version:
            print(f"lab: no triton-windows known for torch {version}: torch.compile stays off on the card "
                  "(pip install triton-windows at the version that torch pins turns it on)", flush=True)
        return
    try:
        pip(py, spec)
    except subprocess.CalledProcessError:  # the lab runs without it: compile off, the plan says why
        print(f"lab: {spec} could not be installed: torch.compile stays off on the card", file=sys.stderr,
              flush=True)
        return
    print(f"lab: {spec} installed for torch {version} (torch.compile on the card)", flush=True)


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
        problem = venv_problem()
        if problem:
            raise SystemExit(problem)
        print(f"lab: making {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip(py, "--upgrade", "pip")
    was = stamp.read_text(encoding="utf-8").strip() if stamp.exists() else ""
    chosen = torch_source(torch, explicit=bool(os.environ.get("TORCH_SPEC", "").strip()))
    # Another build of the same version (2.x+cpu → 2.x+cu128) counts as installed to pip.
    pip(py, *(["--force-reinstall"] if was and was != key else []), *chosen)
    pip(py, "-e", ".[dev]")
    print(f"lab: torch {installed_torch(py)} installed"
          + (" from PyPI: PyTorch's index could not be reached" if chosen != torch else ""), flush=True)
    if chosen != torch:
        key = ""  # not the build chosen: the next set-up tries PyTorch's index again
    if os.name == "nt":
        triton_for_windows(py)
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
