"""The NVML layer and the sampler against a fake NVML (real pynvml error classes)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pynvml
import pytest

from app.gpu import present
from app.gpu.nvml import NvmlSession
from app.gpu.sampler import Sampler, SamplerThread
from app.gpu.samples import (
    ERROR,
    NO_GPU,
    OK,
    TRAINER_MEM_NA,
    TRAINER_MEM_NOT_LISTED,
    TRAINER_MEM_NOT_REPORTED,
    TRAINER_MEM_OK,
)
from bench.fake_nvml import NOT_SUPPORTED, FakeCard, FakeNvml, two_cards


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake(monkeypatch) -> FakeNvml:
    nv = FakeNvml(two_cards())
    nv.install(monkeypatch)
    return nv


def make_sampler(clock: Clock | None = None) -> Sampler:
    return Sampler(NvmlSession(clock=clock or Clock()))


def test_two_gpus_every_field(fake):
    fake.cards[1].processes = [(os.getpid(), 3000.0), (999_999, 500.0)]
    sampler = make_sampler()
    sampler.set_trainer_pid(os.getpid())
    snap = sampler.sample()
    assert snap.status == OK and snap.driver == "550.54.14" and snap.errors == []
    g0, g1 = snap.gpus
    assert (g0.index, g0.name, g1.uuid) == (0, "Tesla T4", "GPU-t4-1")
    assert g0.mem_used_mb == 4200 and g0.mem_total_mb == 15360
    assert g0.temp_c == 62 and g0.slowdown_c == 85 and g0.shutdown_c == 90
    assert g0.util_pct == 97 and g0.power_w == 68 and g0.power_limit_w == 70
    assert g0.clock_sm_mhz == 1500 and g0.clock_sm_max_mhz == 3000
    # The trainer's own memory: found on card 1 only (other pids are not counted).
    assert g0.trainer_mem_note == TRAINER_MEM_NOT_LISTED and g0.trainer_mem_mb is None
    assert g1.trainer_mem_note == TRAINER_MEM_OK and g1.trainer_mem_mb == 3000
    assert snap.trainer.alive and snap.trainer.pid == os.getpid() and snap.trainer.rss_mb > 0
    assert snap.host.ram_total_mb > snap.host.ram_used_mb > 0


def test_unsupported_field_is_na_and_not_asked_again(fake):
    fake.cards[0].errors["nvmlDeviceGetPowerUsage"] = NOT_SUPPORTED
    fake.cards[0].errors["nvmlDeviceGetTemperatureThreshold"] = NOT_SUPPORTED
    sampler = make_sampler()
    for _ in range(3):
        snap = sampler.sample()
    g0, g1 = snap.gpus
    assert g0.fan_pct is None and g0.na["fan_pct"] == "not supported"
    assert g0.power_w is None and g0.na["power_w"] == "not supported"
    assert g0.slowdown_c is None and g0.na["slowdown_c"] == "not supported"
    assert g1.power_w == 66 and "power_w" not in g1.na
    assert snap.errors == []  # unsupported is not an error
    # Asked once per card, then remembered; supported fields are read every time.
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 2
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1 + 3
    # Static values (name, thresholds, max clocks) are read once per card.
    assert fake.calls["nvmlDeviceGetName"] == 2
    assert fake.calls["nvmlDeviceGetMaxClockInfo"] == 4
    assert fake.calls["nvmlDeviceGetTemperatureThreshold"] == 2 + 2  # slowdown + shutdown, once each
    view = present.gpu_view(g0, lang="en")
    assert "power n/a / 70 W" in view.load_text and "fan n/a" in view.load_text
    assert "slowdown at n/a" in view.temperature_text
    assert present.temperature_level(g0) == "normal"  # 62 °C against the default 80 °C


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded"),
    ],
)
def test_no_driver_is_a_normal_state(fake, code, reason):
    fake.init_error = code
    clock = Clock()
    sampler = make_sampler(clock)
    snap = sampler.sample()
    assert snap.status == NO_GPU and snap.reason == reason and snap.gpus == []
    assert snap.host is not None  # CPU and RAM still shown
    clock.now += 3600
    sampler.sample()
    assert fake.calls["nvmlInit"] == 1  # a missing driver is not retried every second
    assert present.status_text(snap, "en").startswith(
        "no NVIDIA GPU found: local training runs on the CPU")
    assert present.status_text(snap, "ru").startswith(
        "видеокарта NVIDIA не найдена: локальное обучение идёт на процессоре")


def test_driver_without_cards(fake):
    fake.cards = []
    snap = make_sampler().sample()
    assert (snap.status, snap.reason) == (NO_GPU, "no_devices")
    assert fake.calls["nvmlShutdown"] == 1


def test_driver_updated_without_reboot_is_an_error_with_advice(fake):
    fake.init_error = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    snap = make_sampler().sample()
    assert snap.status == ERROR and snap.reason == "driver_mismatch"
    assert "restart the computer" in present.status_text(snap, "en")


def test_lost_gpu_is_shown_lost_and_the_other_keeps_going(fake):
    sampler = make_sampler()
    sampler.sample()
    fake.cards[1].lost = True
    snap = sampler.sample()
    g0, g1 = snap.gpus
    assert not g0.lost and g0.temp_c == 62
    assert g1.lost and g1.name == "Tesla T4" and g1.temp_c is None
    alerts = present.warnings(snap, lang="en")
    assert [a.kind for a in alerts] == ["lost"] and "GPU 1 is lost" in alerts[0].text
    # Nothing trains here: the warning does not speak of a training that stopped.
    assert "training on it has stopped" not in alerts[0].text
    assert "restart the computer before training on it" in alerts[0].text
    watch = present.RunWatch()
    watch.attach(os.getpid(), snap.time)
    text = present.warnings(snap, watch, lang="ru")[0].text
    assert "обучение на ней остановилось" in text and "последнего чекпоинта" in text
    assert "lost" in present.gpu_view(g1, lang="en").title
    # A card lost before the lab started (no handle, no name) is still listed, by index.
    fresh = make_sampler().sample()
    assert fresh.status == OK and not fresh.gpus[0].lost
    assert fresh.gpus[1].lost and fresh.gpus[1].name == "GPU 1"


def test_nvml_errors_mid_run_then_recovery(fake):
    clock = Clock()
    sampler = make_sampler(clock)
    assert sampler.sample().status == OK
    # One call fails this time: that field is n/a for this sample, named in errors.
    fake.cards[0].errors["nvmlDeviceGetTemperature"] = pynvml.NVML_ERROR_UNKNOWN
    snap = sampler.sample()
    assert snap.status == OK and snap.gpus[0].temp_c is None and snap.gpus[1].temp_c == 58
    assert snap.errors == ["GPU 0 temp_c: NVMLError_Unknown: Unknown Error"]
    del fake.cards[0].errors["nvmlDeviceGetTemperature"]
    assert sampler.sample().gpus[0].temp_c == 62  # transient errors are not cached
    # The driver goes away under us: an error state, then a retry after RETRY_S.
    fake.broken = pynvml.NVML_ERROR_UNINITIALIZED
    snap = sampler.sample()
    assert snap.status == ERROR and snap.reason == "nvml_lost" and snap.gpus == []
    assert "retrying" in present.status_text(snap, "en")
    fake.broken = None
    clock.now += 1
    assert sampler.sample().status == ERROR  # not yet: at most every RETRY_S
    clock.now += 10
    snap = sampler.sample()
    assert snap.status == OK and len(snap.gpus) == 2 and fake.calls["nvmlInit"] == 2


def test_trainer_memory_not_reported_by_the_driver(fake):
    fake.cards[0].processes = [(os.getpid(), None)]  # WDDM: usedGpuMemory is None
    fake.cards[1].errors["nvmlDeviceGetComputeRunningProcesses"] = NOT_SUPPORTED
    fake.cards[1].errors["nvmlDeviceGetComputeRunningProcesses_v2"] = NOT_SUPPORTED
    sampler = make_sampler()
    sampler.set_trainer_pid(os.getpid())
    g0, g1 = sampler.sample().gpus
    assert g0.trainer_mem_note == TRAINER_MEM_NOT_REPORTED and g0.trainer_mem_mb is None
    assert g1.trainer_mem_note == TRAINER_MEM_NA
    watch = present.RunWatch()
    watch.attach(os.getpid(), 0.0)
    text = present.trainer_memory_text(g0, watch, lang="en")
    assert "not reported by the driver" in text


def test_process_list_falls_back_to_v2_on_older_drivers(fake):
    # pynvml's unversioned call raises NVMLLibraryMismatchError when the driver lacks _v3.
    def old_driver(handle):
        raise pynvml.NVMLLibraryMismatchError("no _v3")

    fake.nvmlDeviceGetComputeRunningProcesses = old_driver
    pynvml.nvmlDeviceGetComputeRunningProcesses = old_driver  # restored by monkeypatch
    fake.cards[0].processes = [(os.getpid(), 1234.0)]
    sampler = make_sampler()
    sampler.set_trainer_pid(os.getpid())
    g0 = sampler.sample().gpus[0]
    assert g0.trainer_mem_note == TRAINER_MEM_OK and g0.trainer_mem_mb == 1234


def test_trainer_children_count_and_exit(fake):
    # A real process tree: a parent (as torchrun) with a child (a worker) holding the GPU.
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import sys; sys.stdin.read()'])"
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    try:
        import psutil

        proc = psutil.Process(parent.pid)
        children = []
        for _ in range(200):
            children = proc.children()
            if children:
                break
            threading.Event().wait(0.01)
        assert children, "the child process did not start"
        fake.cards[0].processes = [(children[0].pid, 2048.0)]
        sampler = make_sampler()
        sampler.set_trainer_pid(parent.pid)
        snap = sampler.sample()
        assert snap.trainer.alive and snap.trainer.processes == 2
        assert snap.gpus[0].trainer_mem_mb == 2048
    finally:
        parent.stdin.close()
        parent.wait(10)
    snap = sampler.sample()
    assert not snap.trainer.alive
    assert "exited" in present.trainer_text(snap.trainer, "en")


def test_lazy_init_runs_once_across_threads(fake):
    session = NvmlSession()
    barrier = threading.Barrier(8)
    results = []

    def worker():
        barrier.wait()
        results.append(session.ensure())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [OK] * 8 and fake.calls["nvmlInit"] == 1


def test_sampler_thread_delivers_and_stops(fake):
    got = []
    done = threading.Event()

    def on_sample(snap):
        got.append(snap)
        if len(got) == 3:
            done.set()
        if len(got) == 1:
            raise RuntimeError("a broken receiver must not end the sampler")

    thread = SamplerThread(make_sampler(), on_sample, interval_s=0.01)
    thread.start()
    assert done.wait(5)
    thread.stop()
    assert not thread.is_alive() and thread.samples >= 3 and thread.cpu_s > 0
    assert "broken receiver" in thread.last_error


def test_real_pynvml_on_this_machine_never_raises():
    """Against whatever this machine has (usually nothing): a status, never an exception."""
    snap = Sampler(NvmlSession()).sample()
    assert snap.status in (OK, NO_GPU, ERROR)
    if snap.status != OK:
        assert snap.gpus == [] and present.status_text(snap, "en")


def test_warm_and_hot_levels_follow_the_cards_threshold():
    from app.gpu.samples import GpuSample

    g = GpuSample(index=0, name="x", temp_c=80, slowdown_c=90, mem_used_mb=7900,
                  mem_total_mb=8192)
    assert present.temperature_level(g) == "normal"
    g.temp_c = 82
    assert present.temperature_level(g) == "warm"
    g.temp_c = 90
    assert present.temperature_level(g) == "hot"
    assert present.memory_level(g) == "full"
    g.mem_used_mb = 7500
    assert present.memory_level(g) == "high"


def test_memory_warning_only_while_the_run_starts():
    from app.gpu.samples import GpuSample, Snapshot

    card = FakeCard()
    g = GpuSample(index=0, name=card.name, mem_used_mb=7900, mem_total_mb=8192, temp_c=70,
                  slowdown_c=93)
    snap = Snapshot(time=100.0, status=OK, gpus=[g])
    assert present.warnings(snap, None) == []  # no run: a full card is someone else's
    watch = present.RunWatch()
    watch.attach(1234, now=100.0)
    alerts = present.warnings(snap, watch, lang="en")
    assert [a.kind for a in alerts] == ["memory_full"]
    assert "lower “Batch per card”, or the run fails with “CUDA out of memory”" in alerts[0].text
    assert "уменьшите «Батч на карту»" in present.warnings(snap, watch, lang="ru")[0].text
    for step in range(present.STARTING_STEPS):
        watch.on_step({"event": "step", "step": step, "mem_alloc_mb": 5000.0})
    assert present.warnings(snap, watch, now=100.0 + present.STARTING_S + 1) == []
    g.temp_c = 93
    assert [a.kind for a in present.warnings(snap, watch, now=1000.0)] == ["slowdown"]
