"""Whether this torch can drive this PC's NVIDIA cards, and what to install when it cannot.

One rule for the set-up (lab.py: which build to install, and the check after installing)
and for the trainer (a local run on a card is refused before training, never trained on the
CPU instead). Standard library at import; torch only inside `problem()`.

- PyPI's torch for Windows is the CPU build; CUDA builds come from PyTorch's own index,
  one per CUDA version (https://download.pytorch.org/whl/cu128, …).
- A build runs a card when its architecture list (`torch.cuda.get_arch_list()`) has the
  card's: a binary for the same major version at or below its minor (sm_86 runs sm_80's
  code), or PTX at or below it, which the driver compiles. RTX 50-series cards (sm_120)
  need a CUDA 12.8 build or newer; CUDA 12.8+ builds no longer carry the oldest cards
  (Maxwell, Pascal, Volta), which CUDA 12.6's still do.
- The cards are found with `nvidia-smi` (installed with every NVIDIA driver), as desktop
  trainers' installers do; torch is the authority after installing.

`python -m trainer.plan.cuda_build` prints the verdict in one line (exit 0: fine, 1: the line
says what to install); `--index` prints which build the set-up installs for this PC.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

INDEX_URL = "https://download.pytorch.org/whl/"
CPU_INDEX = "cpu"
# (oldest compute capability, build), newest build first: the first a card reaches is installed.
BUILDS = (((7, 5), "cu128"), ((5, 0), "cu126"))


@dataclass(frozen=True)
class Card:
    index: int
    name: str
    capability: tuple[int, int] | None  # None: a driver too old to say (nvidia-smi's compute_cap)
    uuid: str = ""
    driver: str = ""

    @property
    def sm(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}" if self.capability else "sm_?"


# torch.compile on a CUDA card needs Triton. Linux's torch wheels bring it; on Windows it is
# the triton-windows package (PyPI), whose minor version must match the one torch was built
# with: the Triton minor a torch minor pins (triton-windows' README and release notes:
# "Triton 3.6 only works with PyTorch >= 2.10"; torch 2.10 and 2.11 use "<3.7", 2.12 "<3.8").
# A torch not in the table gets none: the plan then says compile is off, and why.
TRITON_WINDOWS = {(2, 6): (3, 2), (2, 7): (3, 3), (2, 8): (3, 4), (2, 9): (3, 5), (2, 10): (3, 6),
                  (2, 11): (3, 6), (2, 12): (3, 7)}


def triton_windows_spec(torch_version: str) -> str | None:
    """pip's requirement of triton-windows for the installed torch `torch_version`
    ("2.10.1+cu128" → "triton-windows>=3.6,<3.7"); None for a CPU build (nothing to
    compile for) or a torch whose Triton the table does not know."""
    m = re.match(r"(\d+)\.(\d+)", torch_version)
    local = torch_version.partition("+")[2]
    if m is None or not local.startswith("cu"):
        return None
    triton = TRITON_WINDOWS.get((int(m[1]), int(m[2])))
    if triton is None:
        return None
    major, minor = triton
    return f"triton-windows>={major}.{minor},<{major}.{minor + 1}"


def _nvidia_smi() -> str | None:
    found = shutil.which("nvidia-smi")
    if found or os.name != "nt":
        return found
    # Older Windows drivers put it here, off PATH.
    legacy = os.path.join(os.environ.get("ProgramFiles", r"C:\Program Files"), "NVIDIA Corporation", "NVSMI", "nvidia-smi.exe")
    return legacy if os.path.isfile(legacy) else None


def find_cards() -> list[Card]:
    """This PC's NVIDIA cards in nvidia-smi's (PCI bus) order; [] without a card or driver."""
    smi = _nvidia_smi()
    if smi is None:
        return []
    fields = "index,uuid,name,compute_cap,driver_version"
    try:
        done = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                              creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:  # a driver too old for compute_cap: ask for less
        try:
            done = subprocess.run([smi, "--query-gpu=index,uuid,name", "--format=csv,noheader,nounits"],
                                  capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                                  creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
        except (OSError, subprocess.SubprocessError):
            return []
    cards = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        cap = re.fullmatch(r"(\d+)\.(\d+)", parts[3]) if len(parts) > 3 else None
        cards.append(Card(int(parts[0]), parts[2], (int(cap[1]), int(cap[2])) if cap else None, parts[1],
                          parts[4] if len(parts) > 4 else ""))
    return cards


def visible(cards: list[Card], env: dict[str, str] | None = None) -> list[Card]:
    """The cards a process with this environment's CUDA_VISIBLE_DEVICES sees (numbers are
    nvidia-smi's, as the lab sets them with CUDA_DEVICE_ORDER=PCI_BUS_ID; or GPU UUIDs)."""
    ids = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if ids is None:
        return list(cards)
    seen = []
    for x in (i.strip() for i in ids.split(",")):
        match = [c for c in cards if (x.isdigit() and c.index == int(x)) or (x and c.uuid.startswith(x))]
        if not match:  # "", "-1" or an unknown id hides it and every one after it
            break
        seen.append(match[0])
    return seen


def build_for(cards: list[Card]) -> str:
    """The build the set-up installs: the newest CUDA one the PC's newest card reaches (a card
    too old to say its capability counts as new), else the CPU one. (An RTX 50 beside a GTX
    10: no one build drives both; the newer card is the one to train on.)"""
    if not cards:
        return CPU_INDEX
    newest = max((c.capability or (99, 0)) for c in cards)
    for floor, build in BUILDS:
        if newest >= floor:
            return build
    return CPU_INDEX  # older than Maxwell: no current build drives it


def install_line(cards: list[Card], python: str | None = None) -> str:
    """The command that installs the right build into this Python."""
    build = build_for(cards)
    py = python or sys.executable
    return f'"{py}" -m pip install --force-reinstall torch --index-url {INDEX_URL}{build}'


def runs_on(capability: tuple[int, int], arch_list: list[str]) -> bool:
    """Whether a build with these architectures has code for a card of this capability."""
    major, minor = capability
    for arch in arch_list:
        m = re.fullmatch(r"(sm|compute)_(\d+?)(\d)([a-z]?)", arch)
        if not m:
            continue
        kind, a_major, a_minor, suffix = m[1], int(m[2]), int(m[3]), m[4]
        if suffix:  # sm_90a & co: that exact card only
            if (a_major, a_minor) == capability:
                return True
        elif kind == "sm" and a_major == major and a_minor <= minor:
            return True
        elif kind == "compute" and (a_major, a_minor) <= capability:
            return True
    return False


def verdict(cards: list[Card], cuda_available: bool, arch_list: list[str], torch_version: str,
            cuda_version: str | None, python: str | None = None) -> str | None:
    """None when this torch drives every card, else one line: what is wrong, what to install.
    `cards` are the ones the run would use (with their capability as torch or nvidia-smi says)."""
    if not cards:
        return None
    card = cards[0]
    name = card.name + (f" and {len(cards) - 1} more" if len(cards) > 1 else "")
    if cuda_version is None:
        return (f"torch {torch_version} is a CPU-only build and cannot use the {name}: install the CUDA "
                f"build: {install_line(cards, python)}")
    if not cuda_available:
        return (f"torch {torch_version} (CUDA {cuda_version}) cannot reach the {name} (driver "
                f"{card.driver or 'unknown'}): update the NVIDIA driver, or install the build for this "
                f"card: {install_line(cards, python)}")
    for c in cards:
        if c.capability and not runs_on(c.capability, arch_list):
            return (f"torch {torch_version} (CUDA {cuda_version}) has no code for the {c.name} ({c.sm}; "
                    f"this build has {' '.join(arch_list) or 'none'}): install the build for it: "
                    f"{install_line(cards, python)}")
    return None


def problem(python: str | None = None) -> str | None:
    """This torch against the cards this process sees: None when it drives them all (or there
    are none), else the one line. Imports torch."""
    import torch

    if torch.cuda.is_available():  # torch's own numbering and facts: no nvidia-smi needed
        cards = [Card(i, torch.cuda.get_device_name(i), torch.cuda.get_device_capability(i))
                 for i in range(torch.cuda.device_count())]
        return verdict(cards, True, torch.cuda.get_arch_list(), torch.__version__, torch.version.cuda, python)
    return verdict(visible(find_cards()), False, [], torch.__version__, torch.version.cuda, python)


NO_CARD = ("--device cuda was asked for, but there is no NVIDIA card this process can see (none in "
           "nvidia-smi, or CUDA_VISIBLE_DEVICES hides it): install the NVIDIA driver, or train on the CPU "
           "(target.gpu cpu, --device cpu)")


def pick(requested: str) -> tuple[str, str | None]:
    """The device type for `--device auto|cpu|cuda` and, where auto fell back to the CPU
    although there is a card, why. Raises ValueError with the one line where cuda was asked
    for and this torch cannot drive the card (never trained on the CPU instead)."""
    if requested == "cpu":
        return "cpu", None
    import torch

    line = problem()
    if requested == "cuda" and (line or not torch.cuda.is_available()):
        raise ValueError(line or NO_CARD)
    if line:
        return "cpu", line
    return ("cuda" if torch.cuda.is_available() else "cpu"), None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--index"]:
        print(build_for(find_cards()))
        return 0
    line = problem()
    if line:
        print(line)
        return 1
    import torch

    cards = find_cards()
    build = f"torch {torch.__version__} (CUDA {torch.version.cuda or 'none'})"
    if cards:
        print(f"{build} drives the " + ", ".join(f"{c.name} ({c.sm})" for c in cards))
    else:
        print(f"{build}: no NVIDIA card here, runs train on the CPU")
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()
    sys.exit(main())
