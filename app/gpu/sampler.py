"""One look at the machine (`Sampler.sample`) and a thread that looks once a second.

The sampler never raises: NVML trouble becomes a status, an "n/a" field or a lost card;
psutil trouble (the trainer exited) becomes `alive=False`. The thread is a plain
`threading.Thread` handing each Snapshot to a callback; the window bridges that to a Qt signal
(ui/monitor/bridge.py), so app/ stays free of Qt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from . import nvml
from .nvml import MIB, FieldError, Lost, NvmlSession, SessionBroken, Unsupported
from .samples import (
    NO_GPU,
    OK,
    TRAINER_MEM_NA,
    TRAINER_MEM_NOT_LISTED,
    TRAINER_MEM_NOT_REPORTED,
    TRAINER_MEM_OK,
    GpuSample,
    HostSample,
    Snapshot,
    TrainerSample,
)

log = logging.getLogger(__name__)

_NOT_SUPPORTED = "not supported"
# Finding a process's children reads every process in /proc (~1.5 ms for 100 processes, the
# bulk of a sample's cost); the trainer's workers start with it, so look again only this often.
CHILDREN_REFRESH_S = 10.0


class Sampler:
    """Reads NVML (all cards) and psutil (the machine, and the trainer process if set)."""

    def __init__(self, session: NvmlSession | None = None, wall: Callable[[], float] = time.time):
        self.session = session if session is not None else nvml.session()
        self._wall = wall
        self._trainer_pid: int | None = None
        self._trainer_procs: dict[int, psutil.Process] = {}
        self._children_at: float | None = None
        self._lock = threading.Lock()
        # psutil measures CPU between two calls: the first call only starts the clock.
        psutil.cpu_percent(interval=None)
        self._cpu_count = psutil.cpu_count() or 1

    def set_trainer_pid(self, pid: int | None) -> None:
        """Follow this process (and its children: torchrun's workers); None to stop."""
        with self._lock:
            if pid == self._trainer_pid:
                return
            self._trainer_pid = pid
            self._trainer_procs = {}
            self._children_at = None
            if pid is not None:
                self._trainer_tree()  # start psutil's CPU clocks now

    @property
    def trainer_pid(self) -> int | None:
        return self._trainer_pid

    # -- one sample ----------------------------------------------------------------------------

    def sample(self) -> Snapshot:
        with self._lock:
            trainer, trainer_pids = self._sample_trainer()
            snap = Snapshot(time=self._wall(), status=NO_GPU, host=self._sample_host(),
                            trainer=trainer)
            self._sample_gpus(snap, trainer_pids)
            return snap

    def _sample_gpus(self, snap: Snapshot, trainer_pids: set[int]) -> None:
        session = self.session
        status = session.ensure()
        if status == OK:
            try:
                for index in range(session.count):
                    snap.gpus.append(self._sample_gpu(index, trainer_pids, snap.errors))
            except SessionBroken as exc:
                session.mark_broken(exc)
                snap.gpus = []
        snap.status, snap.reason, snap.detail = session.status, session.reason, session.detail
        snap.driver = session.driver if session.status == OK else None

    def _sample_gpu(self, index: int, trainer_pids: set[int], errors: list[str]) -> GpuSample:
        session = self.session
        try:
            static = session.static(index)
        except Lost:
            return GpuSample(index=index, name=f"GPU {index}", lost=True)
        gpu = GpuSample(
            index=index,
            name=static.name,
            uuid=static.uuid,
            mem_total_mb=static.mem_total_mb,
            slowdown_c=static.slowdown_c,
            shutdown_c=static.shutdown_c,
            clock_sm_max_mhz=static.max_clock_sm_mhz,
        )
        if static.slowdown_c is None:
            gpu.na["slowdown_c"] = _NOT_SUPPORTED

        def read(field: str, fn: str, *args: Any) -> Any:
            try:
                return session.call(index, field, fn, *args)
            except Unsupported:
                gpu.na[field] = _NOT_SUPPORTED
            except FieldError as exc:
                gpu.na[field] = str(exc)
                errors.append(f"GPU {index} {field}: {exc}")
            return None

        try:
            memory = read("mem_used_mb", "nvmlDeviceGetMemoryInfo")
            if memory is not None:
                gpu.mem_used_mb = memory.used / MIB
                gpu.mem_total_mb = memory.total / MIB
            gpu.temp_c = _num(read("temp_c", "nvmlDeviceGetTemperature",
                                   getattr(nvml.pynvml, "NVML_TEMPERATURE_GPU", 0)))
            util = read("util_pct", "nvmlDeviceGetUtilizationRates")
            if util is not None:
                gpu.util_pct, gpu.mem_util_pct = float(util.gpu), float(util.memory)
            gpu.power_w = _num(read("power_w", "nvmlDeviceGetPowerUsage"), 1000.0)  # mW
            gpu.power_limit_w = _num(read("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit"),
                                     1000.0)
            gpu.fan_pct = _num(read("fan_pct", "nvmlDeviceGetFanSpeed"))
            gpu.clock_sm_mhz = _num(read("clock_sm_mhz", "nvmlDeviceGetClockInfo",
                                         getattr(nvml.pynvml, "NVML_CLOCK_SM", 1)))
            gpu.clock_mem_mhz = _num(read("clock_mem_mhz", "nvmlDeviceGetClockInfo",
                                          getattr(nvml.pynvml, "NVML_CLOCK_MEM", 2)))
            if trainer_pids:
                self._trainer_gpu_memory(gpu, trainer_pids, read)
        except Lost:
            return GpuSample(index=index, name=static.name, uuid=static.uuid, lost=True,
                             mem_total_mb=static.mem_total_mb, slowdown_c=static.slowdown_c,
                             shutdown_c=static.shutdown_c)
        return gpu

    def _trainer_gpu_memory(self, gpu: GpuSample, pids: set[int], read: Callable) -> None:
        procs = read("processes", "nvmlDeviceGetComputeRunningProcesses")
        if procs is None and gpu.na.get("processes") == _NOT_SUPPORTED:
            # pynvml's unversioned call needs a recent driver; older ones have the _v2 call.
            procs = read("processes_v2", "nvmlDeviceGetComputeRunningProcesses_v2")
            if procs is not None:
                gpu.na.pop("processes", None)
        if procs is None:
            gpu.trainer_mem_note = TRAINER_MEM_NA
            return
        mine = [p for p in procs if getattr(p, "pid", None) in pids]
        if not mine:
            gpu.trainer_mem_note = TRAINER_MEM_NOT_LISTED
        elif any(getattr(p, "usedGpuMemory", None) is None for p in mine):
            # Windows (WDDM) lists the process but does not report its memory: never guess.
            gpu.trainer_mem_note = TRAINER_MEM_NOT_REPORTED
        else:
            gpu.trainer_mem_note = TRAINER_MEM_OK
            gpu.trainer_mem_mb = sum(p.usedGpuMemory for p in mine) / MIB

    # -- psutil --------------------------------------------------------------------------------

    def _sample_host(self) -> HostSample:
        vm = psutil.virtual_memory()
        return HostSample(
            cpu_pct=psutil.cpu_percent(interval=None),
            cpu_count=self._cpu_count,
            ram_used_mb=(vm.total - vm.available) / MIB,
            ram_total_mb=vm.total / MIB,
        )

    def _trainer_tree(self) -> list[psutil.Process]:
        """The trainer process and its children, keeping Process objects (their CPU clocks)."""
        pid = self._trainer_pid
        if pid is None:
            return []
        root = self._trainer_procs.get(pid)
        now = time.monotonic()
        try:
            if root is None:
                root = psutil.Process(pid)
                root.cpu_percent(None)
                self._trainer_procs = {pid: root}
            if self._children_at is not None and now - self._children_at < CHILDREN_REFRESH_S:
                # The root first (its liveness is the trainer's), then the children still running.
                return [root, *(p for q, p in self._trainer_procs.items()
                                if q != pid and p.is_running())]
            tree = [root, *root.children(recursive=True)]
            self._children_at = now
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            self._trainer_procs = {}
            return []
        known: dict[int, psutil.Process] = {}
        for proc in tree:
            kept = self._trainer_procs.get(proc.pid)
            if kept is None:
                kept = proc
                try:
                    kept.cpu_percent(None)
                except psutil.Error:
                    continue
            known[proc.pid] = kept
        self._trainer_procs = known
        return list(known.values())

    def _sample_trainer(self) -> tuple[TrainerSample | None, set[int]]:
        pid = self._trainer_pid
        if pid is None:
            return None, set()
        tree = self._trainer_tree()
        if not tree or not _alive(tree[0]):
            return TrainerSample(pid=pid, alive=False), set()
        cpu = rss = 0.0
        pids: set[int] = set()
        for proc in tree:
            try:
                with proc.oneshot():
                    cpu += proc.cpu_percent(None)
                    rss += proc.memory_info().rss
                pids.add(proc.pid)
            except psutil.Error:
                continue  # a child that just exited
        return TrainerSample(pid=pid, alive=True, cpu_pct=cpu, rss_mb=rss / MIB,
                             processes=len(pids)), pids


def _alive(proc: psutil.Process) -> bool:
    # An exited child of the window stays a zombie until reaped: that is not alive.
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _num(value: Any, scale: float = 1.0) -> float | None:
    return None if value is None else float(value) / scale


class SamplerThread(threading.Thread):
    """Calls `sampler.sample()` every `interval_s` and hands the snapshot to `on_sample`.

    Waits on an Event, so `stop()` ends it at once; a callback that raises does not kill it.
    `cpu_s` is the thread's own CPU time spent sampling (for `ternit bench monitor`).
    """

    def __init__(self, sampler: Sampler, on_sample: Callable[[Snapshot], None],
                 interval_s: float = 1.0):
        super().__init__(name="ternit-gpu-sampler", daemon=True)
        self.sampler = sampler
        self.on_sample = on_sample
        self.interval_s = interval_s
        self._stop_event = threading.Event()
        self.samples = 0
        self.cpu_s = 0.0
        self.last_error: str | None = None

    def run(self) -> None:
        next_at = time.monotonic()
        while not self._stop_event.is_set():
            started = time.thread_time()
            try:
                snap = self.sampler.sample()
            except Exception as exc:  # a bug must not silently end the monitor
                error = f"{type(exc).__name__}: {exc}"
                if error != self.last_error:  # once, not every second while it lasts
                    log.exception("a GPU sample failed")
                self.last_error = error
                snap = None
            self.cpu_s += time.thread_time() - started
            if snap is not None:
                self.samples += 1
                try:
                    self.on_sample(snap)
                except Exception as exc:  # the listener's bug: the sampling goes on
                    error = f"{type(exc).__name__}: {exc}"
                    if error != self.last_error:
                        log.exception("the GPU sample's listener failed")
                    self.last_error = error
            # Fixed rate without drift; after a long stall, skip the missed ticks.
            next_at += self.interval_s
            now = time.monotonic()
            if next_at < now:
                next_at = now + self.interval_s
            self._stop_event.wait(next_at - now)

    def request_stop(self) -> None:
        """Ask the thread to end after the current sample (from any thread, no waiting)."""
        self._stop_event.set()

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)
