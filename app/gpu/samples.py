"""What one look at the machine gives: plain dataclasses, JSON-ready.

A value the card does not report is None, and `GpuSample.na` says why ("not supported" or the
NVML error of this sample); views print it as "n/a". Memory is in MiB (2**20 bytes), the unit
the trainer uses for `mem_alloc_mb`, so the two numbers can stand side by side.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Snapshot.status
OK = "ok"
NO_GPU = "no_gpu"  # no driver, driver not loaded, or a driver with no card: a normal state
ERROR = "error"  # NVML is there but failing (driver updated without a reboot, no permission...)

# GpuSample.trainer_mem_note
TRAINER_MEM_OK = "ok"
TRAINER_MEM_NOT_REPORTED = "not_reported"  # the driver lists the process but not its memory (WDDM)
TRAINER_MEM_NOT_LISTED = "not_listed"  # the trainer is not among this card's processes
TRAINER_MEM_NA = "n/a"  # the card or driver cannot list processes
TRAINER_MEM_NO_TRAINER = "no_trainer"


@dataclass
class GpuSample:
    index: int
    name: str
    uuid: str | None = None
    lost: bool = False  # the card fell off the bus (NVML_ERROR_GPU_IS_LOST)
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None
    temp_c: float | None = None
    slowdown_c: float | None = None  # the card's own slowdown (throttling) threshold
    shutdown_c: float | None = None
    util_pct: float | None = None
    mem_util_pct: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    fan_pct: float | None = None
    clock_sm_mhz: float | None = None
    clock_mem_mhz: float | None = None
    clock_sm_max_mhz: float | None = None
    trainer_mem_mb: float | None = None
    trainer_mem_note: str = TRAINER_MEM_NO_TRAINER
    na: dict[str, str] = field(default_factory=dict)  # field -> why it is missing

    @property
    def mem_fraction(self) -> float | None:
        if self.mem_used_mb is None or not self.mem_total_mb:
            return None
        return self.mem_used_mb / self.mem_total_mb


@dataclass
class TrainerSample:
    pid: int
    alive: bool
    cpu_pct: float | None = None  # percent of ONE core, summed over the process and children
    rss_mb: float | None = None
    processes: int = 0  # the process plus its children (torchrun workers)


@dataclass
class HostSample:
    cpu_pct: float | None  # whole machine, 0..100
    cpu_count: int
    ram_used_mb: float
    ram_total_mb: float

    @property
    def ram_fraction(self) -> float:
        return self.ram_used_mb / self.ram_total_mb if self.ram_total_mb else 0.0


@dataclass
class Snapshot:
    time: float  # unix seconds
    status: str  # OK, NO_GPU or ERROR
    reason: str = ""  # why not OK: library_not_found, driver_not_loaded, no_devices, ...
    detail: str = ""  # NVML's own words, for the curious
    driver: str | None = None
    gpus: list[GpuSample] = field(default_factory=list)
    host: HostSample | None = None
    trainer: TrainerSample | None = None
    errors: list[str] = field(default_factory=list)  # NVML errors of this sample, "GPU 0 power: Timeout"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (the `ternit monitor --json` line, without the message)."""
        return asdict(self)
