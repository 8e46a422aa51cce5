"""The lab's version and the torch build it trains with, for «О программе», `ternit
--version` and `ternit run show --json` (what a bug report needs first).

Read from the installed packages' metadata, never by importing torch: the window and the
CLI stay light, and the build is in torch's version itself ("2.13.0+cu128": a local
version tag names the CUDA build; "+cpu", or none on PyPI's Windows and macOS wheels, is a
CPU-only build).
"""

from __future__ import annotations

from importlib import metadata

from .i18n import t

PACKAGE = "ternit-lab"


def lab_version() -> str:
    """The installed lab's version ("0.1.0"); "?" when it runs from a folder not installed."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "?"


def torch_version() -> str | None:
    """torch's version with its build tag ("2.13.0+cu128"), None when torch is not installed."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def torch_build_text(version: str | None = None, lang: str | None = None) -> str:
    """What the torch build drives, in words: «2.13.0+cu128 (CUDA 12.8)», «2.13.0+cpu (только
    процессор)», «не установлен»."""
    version = torch_version() if version is None else version
    if not version:
        return t("не установлен", "not installed", lang)
    _, _, tag = version.partition("+")
    if tag.startswith("cu") and tag[2:].isdigit() and len(tag) >= 4:
        digits = tag[2:]
        return f"{version} (CUDA {digits[:-1]}.{digits[-1]})"
    if tag.startswith("rocm"):
        return f"{version} (ROCm {tag[4:]})"
    if tag in ("", "cpu"):
        # PyPI's Linux wheel has no tag and drives CUDA; its Windows and macOS wheels have
        # none either and drive only the CPU: without the tag the build cannot be told here.
        return f"{version} ({t('только процессор', 'CPU only', lang)})" if tag == "cpu" else version
    return version


def version_lines(lang: str | None = None) -> list[str]:
    """`ternit --version` and the top of «О программе»: the lab's version, then torch's build."""
    return [f"Ternit Lab {lab_version()}",
            "PyTorch " + torch_build_text(lang=lang)]


def version_record() -> dict[str, str | None]:
    """The versions as `run show --json` carries them (keys stay: a bug report's fields)."""
    return {"ternit_lab": lab_version(), "torch": torch_version()}
