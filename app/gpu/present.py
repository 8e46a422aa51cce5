"""What the monitor says: texts (RU/EN), colour levels and warnings, decided here, not in ui/.

Two memory numbers are kept apart on purpose: what the trainer *allocated* (its own
`mem_alloc_mb` / `mem_peak_mb`, from events.jsonl) and what the card reports as *used*
(NVML: the trainer's tensors plus the CUDA context, the allocator's cache and every other
program on the card). The second is always larger; the texts say which is which.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from app.base.i18n import t

from ..base.numbers import decimal_text, percent_text
from .samples import (
    ERROR,
    NO_GPU,
    TRAINER_MEM_NA,
    TRAINER_MEM_NOT_LISTED,
    TRAINER_MEM_NOT_REPORTED,
    TRAINER_MEM_OK,
    GpuSample,
    HostSample,
    Snapshot,
    TrainerSample,
)

# Temperature colour: "warm" this many degrees below the card's slowdown threshold; when the
# card does not report a threshold, fixed values typical of desktop cards (and no "hot").
WARM_MARGIN_C = 8.0
WARM_DEFAULT_C = 80.0
# Memory: "high" from 90 % used, "full" (the warning while a run starts) within 5 % of full.
MEM_HIGH = 0.90
MEM_FULL = 0.95
# A run counts as "starting" for its first STARTING_STEPS step events and STARTING_S seconds,
# whichever lasts longer: that is when a too-large batch runs out of memory.
STARTING_STEPS = 10
STARTING_S = 120.0

NA = "n/a"


def mb(value: float, lang: str | None = None) -> str:
    """1234.5 -> '1 235 MB' (grouped like the guide's figures)."""
    return f"{value:,.0f}".replace(",", " ") + " " + t("МБ", "MB", lang)


def no_gpu_text(lang: str | None = None) -> str:
    return t(
        "видеокарта NVIDIA не найдена: локальное обучение идёт на процессоре",
        "no NVIDIA GPU found: local training runs on the CPU",
        lang,
    )


_REASONS = {
    "library_not_found": ("драйвер NVIDIA не установлен", "the NVIDIA driver is not installed"),
    "driver_not_loaded": ("драйвер NVIDIA не загружен", "the NVIDIA driver is not loaded"),
    "no_devices": ("драйвер есть, но видеокарт он не видит", "the driver is there but sees no GPU"),
    "nvml_missing": ("не установлен пакет nvidia-ml-py", "the nvidia-ml-py package is missing"),
}


def no_permission_text(detail: str, lang: str | None = None, windows: bool = os.name == "nt") -> str:
    """NVML refused to read the card: who may, on this OS."""
    if windows:
        return t(f"нет прав читать видеокарту через NVML ({detail}): запустите лабораторию из своей учётной "
                 "записи на этом компьютере (не службой и не в удалённом сеансе без доступа к видеокарте)",
                 f"no permission to read the GPU through NVML ({detail}): start the lab from your own "
                 "account on this PC (not as a service, nor in a remote session without the GPU)", lang)
    return t(f"нет прав читать видеокарту через NVML ({detail}): запустите лабораторию от пользователя с "
             "доступом к /dev/nvidia*",
             f"no permission to read the GPU through NVML ({detail}): run the lab as a user with access "
             "to /dev/nvidia*", lang)


def status_text(snap: Snapshot, lang: str | None = None) -> str:
    """One line on the state of NVML: empty when all is well."""
    if snap.status == NO_GPU:
        why = _REASONS.get(snap.reason)
        return no_gpu_text(lang) + (f" ({t(*why, lang)})" if why else "")
    if snap.status == ERROR:
        if snap.reason == "driver_mismatch":
            return t(
                "драйвер NVIDIA обновлён, но не перезапущен: перезагрузите компьютер",
                "the NVIDIA driver was updated but not reloaded: restart the computer",
                lang,
            )
        if snap.reason == "no_permission":
            return no_permission_text(snap.detail, lang)
        if snap.reason == "nvml_lost":
            return t(
                f"NVML перестал отвечать ({snap.detail}); пробую снова. Если не пройдёт — "
                "проверьте драйвер командой nvidia-smi",
                f"NVML stopped answering ({snap.detail}); retrying. If it persists, check the "
                "driver with nvidia-smi",
                lang,
            )
        return t(
            f"ошибка NVML ({snap.detail}): проверьте драйвер командой nvidia-smi",
            f"NVML error ({snap.detail}): check the driver with nvidia-smi",
            lang,
        )
    return ""


# -- levels --------------------------------------------------------------------------------------


def warm_threshold(gpu: GpuSample) -> float:
    return gpu.slowdown_c - WARM_MARGIN_C if gpu.slowdown_c is not None else WARM_DEFAULT_C


def temperature_level(gpu: GpuSample) -> str:
    """'unknown', 'normal', 'warm' (nearing slowdown) or 'hot' (at the slowdown threshold)."""
    if gpu.lost or gpu.temp_c is None:
        return "unknown"
    if gpu.slowdown_c is not None and gpu.temp_c >= gpu.slowdown_c:
        return "hot"
    if gpu.temp_c >= warm_threshold(gpu):
        return "warm"
    return "normal"


def memory_level(gpu: GpuSample) -> str:
    """'unknown', 'normal', 'high' (≥ 90 %) or 'full' (within 5 % of full)."""
    frac = gpu.mem_fraction
    if gpu.lost or frac is None:
        return "unknown"
    if frac >= MEM_FULL:
        return "full"
    if frac >= MEM_HIGH:
        return "high"
    return "normal"


# -- the run being watched -------------------------------------------------------------------------


@dataclass
class RunWatch:
    """What the monitor knows of the trainer: its pid and its latest `step` event."""

    pid: int | None = None
    attached_at: float | None = None
    steps_seen: int = 0
    last_step: dict[str, Any] | None = None

    def attach(self, pid: int | None, now: float) -> None:
        self.pid, self.attached_at = pid, (now if pid is not None else None)
        self.steps_seen, self.last_step = 0, None

    def on_step(self, event: dict[str, Any]) -> None:
        if event.get("event", "step") != "step":
            return
        self.steps_seen += 1
        self.last_step = dict(event)

    def starting(self, now: float) -> bool:
        if self.attached_at is None:
            return False
        return self.steps_seen < STARTING_STEPS or now - self.attached_at < STARTING_S

    def allocated_mb(self) -> tuple[float | None, float | None]:
        ev = self.last_step or {}
        return _f(ev.get("mem_alloc_mb")), _f(ev.get("mem_peak_mb"))


def _f(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) else None


# -- one card's texts ------------------------------------------------------------------------------


@dataclass
class GpuView:
    index: int
    title: str
    lost: bool
    memory_text: str
    memory_fraction: float | None
    memory_level: str
    temperature_text: str
    temperature_level: str
    load_text: str
    trainer_text: str  # both memory numbers, labelled; empty when no trainer is watched
    na_fields: list[str] = field(default_factory=list)
    shows_allocated: bool = False  # trainer_text carries the trainer's own allocated figure


def gpu_view(gpu: GpuSample, watch: RunWatch | None = None, single_gpu: bool = True,
             lang: str | None = None) -> GpuView:
    def tr(ru: str, en: str) -> str:
        return t(ru, en, lang)

    n_a = t("н/д", NA, lang)
    title = f"GPU {gpu.index} · {gpu.name}"
    if gpu.lost:
        lost = tr("карта потеряна (отвалилась от шины)", "lost (fell off the bus)")
        return GpuView(gpu.index, f"{title} — {lost}", True, n_a, None, "unknown", n_a,
                       "unknown", n_a, "", sorted(gpu.na))
    if gpu.mem_used_mb is not None and gpu.mem_total_mb:
        frac = gpu.mem_used_mb / gpu.mem_total_mb
        memory = f"{mb(gpu.mem_used_mb, lang)} / {mb(gpu.mem_total_mb, lang)} ({frac:.0%})"
    else:
        frac, memory = None, n_a
    memory = tr("занято на карте: ", "used on the card: ") + memory

    if gpu.temp_c is not None:
        temp = f"{gpu.temp_c:.0f} °C"
    else:
        temp = n_a
    slowdown = f"{gpu.slowdown_c:.0f} °C" if gpu.slowdown_c is not None else n_a
    temp += tr(f" (замедление с {slowdown})", f" (slowdown at {slowdown})")

    parts = [tr("загрузка ", "load ") + (f"{gpu.util_pct:.0f}%" if gpu.util_pct is not None
                                         else n_a)]
    power = f"{gpu.power_w:.0f}" if gpu.power_w is not None else n_a
    limit = f"{gpu.power_limit_w:.0f}" if gpu.power_limit_w is not None else n_a
    parts.append(tr("мощность ", "power ") + f"{power} / {limit} " + tr("Вт", "W"))
    parts.append(tr("вентилятор ", "fan ") + (f"{gpu.fan_pct:.0f}%" if gpu.fan_pct is not None
                                            else n_a))
    mhz = tr("МГц", "MHz")
    sm = f"{gpu.clock_sm_mhz:.0f}" if gpu.clock_sm_mhz is not None else n_a
    mem_clock = f"{gpu.clock_mem_mhz:.0f}" if gpu.clock_mem_mhz is not None else n_a
    parts.append(tr("частоты ", "clocks ") + f"SM {sm} / {tr('память', 'mem')} {mem_clock} {mhz}")
    return GpuView(
        index=gpu.index,
        title=title,
        lost=False,
        memory_text=memory,
        memory_fraction=frac,
        memory_level=memory_level(gpu),
        temperature_text=temp,
        temperature_level=temperature_level(gpu),
        load_text=" · ".join(parts),
        trainer_text=trainer_memory_text(gpu, watch, single_gpu, lang),
        na_fields=sorted(gpu.na),
        shows_allocated=_allocated_on_card(gpu, watch, single_gpu),
    )


def trainer_memory_text(gpu: GpuSample, watch: RunWatch | None, single_gpu: bool = True,
                        lang: str | None = None) -> str:
    """'allocated by the trainer: … · used on the card by the trainer (incl. …): …'."""
    if watch is None or watch.pid is None:
        return ""
    parts = []
    alloc, peak = watch.allocated_mb()
    if _allocated_on_card(gpu, watch, single_gpu):
        text = t("выделено тренером: ", "allocated by the trainer: ", lang) + mb(alloc, lang)
        if peak is not None:
            text += t(f" (пик {mb(peak, lang)})", f" (peak {mb(peak, lang)})", lang)
        parts.append(text)
    label = t("занято на карте процессом тренера (вкл. контекст CUDA и кэш): ",
              "used on the card by the trainer's process (incl. CUDA context and cache): ", lang)
    note = gpu.trainer_mem_note
    if note == TRAINER_MEM_OK and gpu.trainer_mem_mb is not None:
        parts.append(label + mb(gpu.trainer_mem_mb, lang))
    elif note == TRAINER_MEM_NOT_REPORTED:
        parts.append(label + t("драйвер не сообщает (так бывает в Windows)",
                               "not reported by the driver (usual on Windows)", lang))
    elif note == TRAINER_MEM_NA:
        parts.append(label + t("драйвер не перечисляет процессы",
                               "the driver does not list processes", lang))
    elif note == TRAINER_MEM_NOT_LISTED and single_gpu:
        parts.append(label + t("тренера нет среди процессов карты",
                               "the trainer is not among the card's processes", lang))
    return " · ".join(parts)


def _allocated_on_card(gpu: GpuSample, watch: RunWatch | None, single_gpu: bool) -> bool:
    """The trainer's own figure is per card (rank 0's): shown on the card it runs on."""
    if watch is None or watch.pid is None or watch.allocated_mb()[0] is None or gpu.lost:
        return False
    return gpu.trainer_mem_note == TRAINER_MEM_OK or (
        single_gpu and gpu.trainer_mem_note != TRAINER_MEM_NOT_LISTED)


# -- the machine -------------------------------------------------------------------------------


def host_text(host: HostSample | None, lang: str | None = None) -> str:
    if host is None:
        return ""
    cpu = f"{host.cpu_pct:.0f}%" if host.cpu_pct is not None else t("н/д", NA, lang)
    ram = f"{mb(host.ram_used_mb, lang)} / {mb(host.ram_total_mb, lang)} ({host.ram_fraction:.0%})"
    return t(f"Компьютер: процессор {cpu} (ядер: {host.cpu_count}) · память {ram}",
             f"Machine: CPU {cpu} ({host.cpu_count} cores) · RAM {ram}", lang)


def trainer_text(trainer: TrainerSample | None, lang: str | None = None) -> str:
    if trainer is None:
        return t("Тренер: не запущен", "Trainer: not running", lang)
    if not trainer.alive:
        return t(f"Тренер (pid {trainer.pid}): процесс завершился",
                 f"Trainer (pid {trainer.pid}): the process has exited", lang)
    cpu = f"{trainer.cpu_pct:.0f}%" if trainer.cpu_pct is not None else t("н/д", NA, lang)
    rss = mb(trainer.rss_mb, lang) if trainer.rss_mb is not None else t("н/д", NA, lang)
    procs = ""
    if trainer.processes > 1:
        procs = t(f", процессов: {trainer.processes}", f", {trainer.processes} processes", lang)
    return t(f"Тренер (pid {trainer.pid}{procs}): процессор {cpu} одного ядра · память {rss}",
             f"Trainer (pid {trainer.pid}{procs}): CPU {cpu} of one core · RAM {rss}", lang)


# -- warnings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    kind: str  # memory_full, slowdown, lost
    gpu: int
    text: str


def warnings(snap: Snapshot, watch: RunWatch | None = None, now: float | None = None,
             lang: str | None = None) -> list[Alert]:
    """What the user should act on now."""
    out: list[Alert] = []
    starting = watch is not None and watch.starting(snap.time if now is None else now)
    for gpu in snap.gpus:
        if gpu.lost:
            if watch is not None and watch.pid is not None:
                text = t(
                    f"GPU {gpu.index} потеряна (отвалилась от шины): обучение на ней остановилось. "
                    "Перезагрузите компьютер; продолжить можно с последнего чекпоинта",
                    f"GPU {gpu.index} is lost (fell off the bus): training on it has stopped. "
                    "Restart the computer; continue from the latest checkpoint", lang)
            else:  # nothing trains here: no training to have stopped
                text = t(f"GPU {gpu.index} потеряна (отвалилась от шины): перезагрузите компьютер, "
                         "прежде чем обучать на ней",
                         f"GPU {gpu.index} is lost (fell off the bus): restart the computer before "
                         "training on it", lang)
            out.append(Alert("lost", gpu.index, text))
            continue
        if starting and memory_level(gpu) == "full":
            out.append(Alert("memory_full", gpu.index, t(
                f"GPU {gpu.index}: память почти заполнена ({percent_text(gpu.mem_fraction, 'ru')}) при старте "
                "прогона — уменьшите «Батч на карту», иначе будет «CUDA out of memory»",
                f"GPU {gpu.index}: memory is almost full ({percent_text(gpu.mem_fraction, 'en')}) as the run "
                "starts — lower “Batch per card”, or the run fails with “CUDA out of memory”", lang)))
        if temperature_level(gpu) == "hot":
            out.append(Alert("slowdown", gpu.index, t(
                f"GPU {gpu.index}: {decimal_text(gpu.temp_c, 0, 'ru')} °C — порог замедления карты "
                f"({decimal_text(gpu.slowdown_c, 0, 'ru')} °C): она снижает частоты. Улучшите охлаждение или "
                "включите защиту от перегрева",
                f"GPU {gpu.index}: {decimal_text(gpu.temp_c, 0, 'en')} °C — the card's slowdown threshold "
                f"({decimal_text(gpu.slowdown_c, 0, 'en')} °C): it is cutting its clocks. Improve cooling or turn "
                "on the heat guard", lang)))
    return out
