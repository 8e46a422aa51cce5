"""NVML without surprises: one lazy, thread-safe session that never throws at its callers.

In the spirit of nvitop's libnvml: a missing library, an unloaded driver or a machine with no
card are normal states (reported, not raised); a field the card does not support is None and is
not asked again; a card that falls off the bus is "lost"; values that cannot change (name, UUID,
total memory, temperature thresholds, maximum clocks) are read once per card. Every pynvml
function is looked up on the module at call time, so tests can replace them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .samples import ERROR, NO_GPU, OK

log = logging.getLogger(__name__)

try:  # nvidia-ml-py is a dependency; a broken install must still not crash the window
    import pynvml
except ImportError:  # pragma: no cover - exercised only on a broken install
    pynvml = None  # type: ignore[assignment]

MIB = float(2**20)
# After a failure of NVML as a whole (e.g. the driver was reloaded under us) try again at most
# this often; a missing driver is not retried (a card does not appear while the lab runs).
RETRY_S = 10.0


def _error_class(name: str) -> type[BaseException]:
    """pynvml's NVMLError_* class, or a class nothing raises if this pynvml lacks it."""
    return getattr(pynvml, name, None) or type(name, (Exception,), {})


_UNSUPPORTED = (
    _error_class("NVMLError_NotSupported"),
    _error_class("NVMLError_FunctionNotFound"),
    _error_class("NVMLLibraryMismatchError"),  # pynvml's unversioned call on an older driver
    AttributeError,  # an older nvidia-ml-py without this function
)
_LOST = _error_class("NVMLError_GpuIsLost")
_BROKEN = (
    _error_class("NVMLError_Uninitialized"),
    _error_class("NVMLError_DriverNotLoaded"),
    _error_class("NVMLError_LibRmVersionMismatch"),
)


class Unsupported(Exception):
    """The card or driver does not provide this value (cached: not asked again)."""


class Lost(Exception):
    """The card fell off the bus."""


class SessionBroken(Exception):
    """NVML as a whole stopped answering (uninitialised, driver gone): re-initialise later."""


class FieldError(Exception):
    """One value failed this time (timeout, unknown error): None for this sample only."""


@dataclass
class StaticInfo:
    """What a card reports once: read on first sight, kept for the session."""

    name: str
    uuid: str | None
    mem_total_mb: float | None
    slowdown_c: float | None
    shutdown_c: float | None
    max_clock_sm_mhz: float | None
    max_clock_mem_mhz: float | None
    capability: tuple[int, int] | None = None  # CUDA compute capability; None: an old driver


class NvmlSession:
    """The lab's one connection to NVML. All methods are safe to call from any thread."""

    def __init__(self, retry_s: float = RETRY_S, clock: Callable[[], float] = time.monotonic):
        self._lock = threading.RLock()
        self._clock = clock
        self._retry_s = retry_s
        self._initialised = False
        self._tried_at: float | None = None
        self.status = NO_GPU
        self.reason = "not_started"
        self.detail = ""
        self.driver: str | None = None
        self._handles: list[Any] = []
        self._static: dict[int, StaticInfo] = {}
        self._unsupported: set[tuple[int, str]] = set()

    # -- the session ---------------------------------------------------------------------------

    def ensure(self) -> str:
        """Initialise NVML on first use (or again after a failure, at most every retry_s).

        Returns the status: OK (cards present), NO_GPU (normal: no driver or no card), ERROR.
        """
        if self._initialised:
            return OK
        with self._lock:
            if self._initialised:
                return OK
            now = self._clock()
            if self._tried_at is not None:
                if self.status == NO_GPU or now - self._tried_at < self._retry_s:
                    return self.status
            self._tried_at = now
            self._init_locked()
            return self.status

    def _init_locked(self) -> None:
        if pynvml is None:
            self._set(NO_GPU, "nvml_missing", "the nvidia-ml-py package is not installed")
            return
        try:
            pynvml.nvmlInit()
        except _error_class("NVMLError_LibraryNotFound") as exc:
            self._set(NO_GPU, "library_not_found", str(exc))
            return
        except _error_class("NVMLError_DriverNotLoaded") as exc:
            self._set(NO_GPU, "driver_not_loaded", str(exc))
            return
        except _error_class("NVMLError_LibRmVersionMismatch") as exc:
            self._set(ERROR, "driver_mismatch", str(exc))
            return
        except _error_class("NVMLError_NoPermission") as exc:
            self._set(ERROR, "no_permission", str(exc))
            return
        except Exception as exc:  # any other NVMLError, or a broken library: report, never raise
            log.warning("NVML did not start", exc_info=True)
            self._set(ERROR, "nvml_error", f"{type(exc).__name__}: {exc}")
            return
        try:
            count = int(pynvml.nvmlDeviceGetCount())
            handles = [self._handle(i) for i in range(count)]
        except Exception as exc:  # NVML started but cannot list its cards: report, never raise
            log.warning("NVML could not list the cards", exc_info=True)
            self._shutdown_quietly()
            self._set(ERROR, "nvml_error", f"{type(exc).__name__}: {exc}")
            return
        try:
            self.driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except Exception as exc:  # only shown beside the cards: none is no failure
            log.info("NVML gave no driver version: %s: %s", type(exc).__name__, exc)
            self.driver = None
        self._handles = handles
        self._static.clear()
        self._unsupported.clear()
        if not handles:
            self._shutdown_quietly()
            self._set(NO_GPU, "no_devices", "the NVIDIA driver is loaded but reports no GPU")
            return
        self._initialised = True
        self._set(OK, "", "")

    @staticmethod
    def _handle(index: int) -> Any:
        """The card's handle; None for a card already lost (listed, shown as lost)."""
        try:
            return pynvml.nvmlDeviceGetHandleByIndex(index)
        except _LOST:
            return None

    def _set(self, status: str, reason: str, detail: str) -> None:
        self.status, self.reason, self.detail = status, reason, detail

    def _shutdown_quietly(self) -> None:
        try:
            pynvml.nvmlShutdown()
        except Exception as exc:  # a session going away anyway: nothing left to do
            log.debug("nvmlShutdown failed: %s: %s", type(exc).__name__, exc)

    def mark_broken(self, exc: BaseException) -> None:
        """NVML stopped answering mid-run: report it, and re-initialise after retry_s."""
        with self._lock:
            if not self._initialised:
                return
            self._initialised = False
            self._handles = []
            self._tried_at = self._clock()
            self._shutdown_quietly()
            self._set(ERROR, "nvml_lost", f"{type(exc).__name__}: {exc}")

    @property
    def count(self) -> int:
        return len(self._handles) if self._initialised else 0

    # -- queries -------------------------------------------------------------------------------

    def call(self, index: int, field: str, fn_name: str, *args: Any) -> Any:
        """Call pynvml.<fn_name>(handle of card `index`, *args), translating its errors.

        Raises Unsupported (cached for this card and field), Lost, SessionBroken or FieldError;
        never an NVMLError.
        """
        if (index, field) in self._unsupported:
            raise Unsupported(field)
        try:
            handle = self._handles[index]
        except IndexError:
            raise SessionBroken("NVML was re-initialised") from None
        if handle is None:
            raise Lost("the card was lost before NVML gave a handle for it")
        try:
            return getattr(pynvml, fn_name)(handle, *args)
        except _UNSUPPORTED as exc:
            self._unsupported.add((index, field))
            raise Unsupported(field) from exc
        except _LOST as exc:
            raise Lost(str(exc)) from exc
        except _BROKEN as exc:
            raise SessionBroken(str(exc)) from exc
        except Exception as exc:  # Timeout, Unknown, NoData, a decode error...: this sample only
            raise FieldError(f"{type(exc).__name__}: {exc}") from exc

    def static(self, index: int) -> StaticInfo:
        """The card's unchanging values, read once. Raises Lost or SessionBroken."""
        info = self._static.get(index)
        if info is not None:
            return info

        def read(field: str, fn: str, *args: Any, scale: float = 1.0) -> Any:
            try:
                value = self.call(index, field, fn, *args)
            except (Unsupported, FieldError):
                return None
            return value if isinstance(value, str) or value is None else value / scale

        name = read("name", "nvmlDeviceGetName")
        memory = capability = None
        try:
            memory = self.call(index, "memory", "nvmlDeviceGetMemoryInfo")
        except (Unsupported, FieldError):
            pass
        try:
            major, minor = self.call(index, "capability", "nvmlDeviceGetCudaComputeCapability")
            capability = (int(major), int(minor))
        except (Unsupported, FieldError, TypeError, ValueError):
            pass
        info = StaticInfo(
            name=_text(name) if name is not None else f"GPU {index}",
            uuid=_text(read("uuid", "nvmlDeviceGetUUID")),
            mem_total_mb=memory.total / MIB if memory is not None else None,
            slowdown_c=read(
                "slowdown_c",
                "nvmlDeviceGetTemperatureThreshold",
                getattr(pynvml, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
            ),
            shutdown_c=read(
                "shutdown_c",
                "nvmlDeviceGetTemperatureThreshold",
                getattr(pynvml, "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0),
            ),
            max_clock_sm_mhz=read(
                "max_clock_sm", "nvmlDeviceGetMaxClockInfo", getattr(pynvml, "NVML_CLOCK_SM", 1)
            ),
            max_clock_mem_mhz=read(
                "max_clock_mem", "nvmlDeviceGetMaxClockInfo", getattr(pynvml, "NVML_CLOCK_MEM", 2)
            ),
            capability=capability,
        )
        # A name or total memory that failed only this time is worth another look next time.
        if name is not None and (memory is not None or (index, "memory") in self._unsupported):
            self._static[index] = info
        return info


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


_session: NvmlSession | None = None
_session_lock = threading.Lock()


def session() -> NvmlSession:
    """The process's shared NVML session (created on first use)."""
    global _session
    if _session is None:
        with _session_lock:
            if _session is None:
                _session = NvmlSession()
    return _session
