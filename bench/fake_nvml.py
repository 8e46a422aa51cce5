"""A fake NVML for the GPU monitor's tests and for `ternit bench monitor --fake-gpus N`.

It replaces the pynvml functions the lab calls (module attributes, so the real pynvml error
classes and constants stay): cards with settable values, unsupported fields, a lost card,
errors on chosen calls, no driver. Lives in bench/ (the lab's
measuring tools, never shipped to a kernel); app/, ui/ and trainer/ never import it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

MIB = 2**20

FUNCTIONS = (
    "nvmlInit",
    "nvmlShutdown",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetTemperatureThreshold",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetCudaComputeCapability",
)


def err(code: int) -> pynvml.NVMLError:
    """The real pynvml exception for an NVML error code (e.g. NVMLError_NotSupported)."""
    return pynvml.NVMLError(code)


NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED


@dataclass
class FakeCard:
    name: str = "NVIDIA GeForce RTX 3050"
    uuid: str = "GPU-00000000-fake"
    total_mb: float = 8192
    used_mb: float = 1024
    temp: int = 55
    slowdown: int = 93
    shutdown: int = 98
    util: int = 40
    mem_util: int = 20
    power_mw: int = 60_000
    power_limit_mw: int = 130_000
    fan: int = 35
    clock_sm: int = 1500
    clock_mem: int = 7000
    processes: list[tuple[int, float | None]] = field(default_factory=list)  # (pid, MiB|None)
    capability: tuple[int, int] = (8, 6)  # CUDA compute capability (an RTX 30x0)
    lost: bool = False
    # pynvml function name -> NVML error code raised by that call on this card
    errors: dict[str, int] = field(default_factory=dict)


class FakeNvml:
    def __init__(self, cards: list[FakeCard] | None = None, driver: str = "550.54.14"):
        self.cards = cards if cards is not None else []
        self.driver = driver
        self.init_error: int | None = None  # e.g. NVML_ERROR_LIBRARY_NOT_FOUND
        self.broken: int | None = None  # every device call raises this (driver went away)
        self.calls: Counter[str] = Counter()

    # -- install -------------------------------------------------------------------------------

    def install(self, monkeypatch: Any = None) -> None:
        """Put the fake functions on pynvml (through monkeypatch when given)."""
        self._saved = {name: getattr(pynvml, name, None) for name in FUNCTIONS}
        for name in FUNCTIONS:
            fake = getattr(self, name)
            if monkeypatch is not None:
                monkeypatch.setattr(pynvml, name, fake, raising=False)
            else:
                setattr(pynvml, name, fake)

    def uninstall(self) -> None:
        for name, value in self._saved.items():
            setattr(pynvml, name, value)

    # -- the fake API --------------------------------------------------------------------------

    def _card(self, fn: str, handle: Any) -> FakeCard:
        self.calls[fn] += 1
        if self.broken is not None:
            raise err(self.broken)
        card = self.cards[handle.index]
        if card.lost:
            raise err(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in card.errors:
            raise err(card.errors[fn])
        return card

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise err(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1

    def nvmlDeviceGetCount(self) -> int:
        self.calls["nvmlDeviceGetCount"] += 1
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self.calls["nvmlDeviceGetHandleByIndex"] += 1
        if self.cards[index].lost:
            raise err(pynvml.NVML_ERROR_GPU_IS_LOST)
        return SimpleNamespace(index=index)

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetName(self, h: Any) -> str:
        return self._card("nvmlDeviceGetName", h).name

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return self._card("nvmlDeviceGetUUID", h).uuid

    def nvmlDeviceGetMemoryInfo(self, h: Any, version: Any = None) -> Any:
        c = self._card("nvmlDeviceGetMemoryInfo", h)
        total, used = int(c.total_mb * MIB), int(c.used_mb * MIB)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        return self._card("nvmlDeviceGetTemperature", h).temp

    def nvmlDeviceGetTemperatureThreshold(self, h: Any, which: int) -> int:
        c = self._card("nvmlDeviceGetTemperatureThreshold", h)
        if which == pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            return c.slowdown
        if which == pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
            return c.shutdown
        raise err(NOT_SUPPORTED)

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        c = self._card("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(gpu=c.util, memory=c.mem_util)

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return self._card("nvmlDeviceGetPowerUsage", h).power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: Any) -> int:
        return self._card("nvmlDeviceGetEnforcedPowerLimit", h).power_limit_mw

    def nvmlDeviceGetFanSpeed(self, h: Any) -> int:
        return self._card("nvmlDeviceGetFanSpeed", h).fan

    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:
        c = self._card("nvmlDeviceGetClockInfo", h)
        return c.clock_sm if kind == pynvml.NVML_CLOCK_SM else c.clock_mem

    def nvmlDeviceGetMaxClockInfo(self, h: Any, kind: int) -> int:
        c = self._card("nvmlDeviceGetMaxClockInfo", h)
        return 2 * c.clock_sm if kind == pynvml.NVML_CLOCK_SM else c.clock_mem

    def _procs(self, fn: str, h: Any) -> list[Any]:
        c = self._card(fn, h)
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=None if mb is None else int(mb * MIB))
            for pid, mb in c.processes
        ]

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetComputeRunningProcesses", h)

    def nvmlDeviceGetCudaComputeCapability(self, h: Any) -> tuple[int, int]:
        return self._card("nvmlDeviceGetCudaComputeCapability", h).capability

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h: Any) -> list[Any]:
        return self._procs("nvmlDeviceGetComputeRunningProcesses_v2", h)


def two_cards() -> list[FakeCard]:
    """Kaggle's 2×T4, as NVML describes it."""
    return [
        FakeCard(name="Tesla T4", uuid="GPU-t4-0", total_mb=15360, used_mb=4200, temp=62,
                 slowdown=85, shutdown=90, util=97, power_mw=68_000, power_limit_mw=70_000,
                 fan=0, errors={"nvmlDeviceGetFanSpeed": NOT_SUPPORTED}, capability=(7, 5)),
        FakeCard(name="Tesla T4", uuid="GPU-t4-1", total_mb=15360, used_mb=4100, temp=58,
                 slowdown=85, shutdown=90, util=95, power_mw=66_000, power_limit_mw=70_000,
                 fan=0, errors={"nvmlDeviceGetFanSpeed": NOT_SUPPORTED}, capability=(7, 5)),
    ]


def pc_with_cards(monkeypatch: Any, cards: list[FakeCard]) -> FakeNvml:
    """This PC as NVML sees it: `cards`, every one visible to a trainer (conftest hides them
    all) and the lab's NVML session made anew."""
    from app.gpu import nvml

    fake = FakeNvml(cards)
    fake.install(monkeypatch)
    monkeypatch.setattr(nvml, "_session", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake
