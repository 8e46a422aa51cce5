"""Advice that names this OS's way (issue 22, item 7): NVML's permission and a file's read
access said the Linux way (/dev/nvidia*, chmod) on Windows too; the CPU's AVX-512 was read
from /proc/cpuinfo, which Windows has not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.data.library import unreadable_text
from app.gpu.present import no_permission_text
from app.sizing.gpus import cpu_has_avx512

pytestmark = pytest.mark.windows


def test_nvml_permission_advice_fits_the_os():
    windows, linux = no_permission_text("Insufficient Permissions", "en", windows=True), \
        no_permission_text("Insufficient Permissions", "en", windows=False)
    assert "/dev/nvidia" in linux and "/dev/nvidia" not in windows and "your own account" in windows
    assert no_permission_text("Insufficient Permissions", "en") == (windows if os.name == "nt" else linux)


def test_read_access_advice_fits_the_os():
    path = Path("D:/тексты/сказка.txt")
    assert "chmod" in unreadable_text(path, windows=False)
    windows = unreadable_text(path, windows=True)
    assert "chmod" not in windows and ("Properties → Security" in windows or "Свойства → Безопасность" in windows)


def test_the_cpus_avx512_is_asked_of_this_os():
    assert isinstance(cpu_has_avx512(), bool)  # on Windows: IsProcessorFeaturePresent, no /proc
