"""`ternit monitor`: a real subprocess on this machine, and the fake NVML in-process."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.gpu import cli, nvml, settings
from bench.fake_nvml import FakeNvml, two_cards

ROOT = Path(__file__).resolve().parent.parent


def nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1" if sys.platform != "win32" else "nvml.dll")
    except OSError:
        return False
    return True


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_monitor_once_json_as_a_real_process(lang):
    env = dict(os.environ, TERNIT_LANG=lang)
    proc = subprocess.run([sys.executable, "-m", "app.cli", "monitor", "--once", "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert data["host"]["ram_total_mb"] > 0
    if nvml_library_present():
        pytest.skip("this machine has the NVIDIA driver: the no-GPU answer cannot be checked")
    assert data["status"] == "no_gpu" and data["gpus"] == []
    expected = {"en": "no NVIDIA GPU found: local training runs on the CPU",
                "ru": "видеокарта NVIDIA не найдена: локальное обучение идёт на процессоре"}
    assert data["message"].startswith(expected[lang])


def test_monitor_text_and_json_with_two_fake_gpus(monkeypatch, capsys):
    fake = FakeNvml(two_cards())
    fake.install(monkeypatch)
    fake.cards[0].processes = [(os.getpid(), 3000.0)]
    monkeypatch.setattr(nvml, "_session", None)  # a fresh shared session on the fake
    monkeypatch.setattr(cli, "CPU_WINDOW_S", 0.0)
    monkeypatch.setenv("TERNIT_LANG", "en")
    assert cli.main(["--once", "--pid", str(os.getpid())]) == 0
    out = capsys.readouterr().out
    assert "GPU 0 · Tesla T4" in out and "GPU 1 · Tesla T4" in out
    assert "used on the card: 4 200 MB / 15 360 MB (27%)" in out
    assert "62 °C (slowdown at 85 °C)" in out and "fan n/a" in out
    assert "the --pid process on the card: 3 000 MB" in out
    # "(pid N)" or "(pid N, K processes)": earlier tests may have left children to this process.
    assert f"Trainer (pid {os.getpid()})" in out or f"Trainer (pid {os.getpid()}, " in out
    assert cli.main(["--json", "--count", "2", "--interval", "0.01"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and all(r["status"] == "ok" and len(r["gpus"]) == 2 for r in rows)
    assert rows[0]["gpus"][0]["na"] == {"fan_pct": "not supported"}


def test_monitor_rejects_a_bad_interval(capsys):
    assert cli.main(["--interval", "0"]) == 2
    assert "--interval" in capsys.readouterr().err


def test_settings_round_trip_and_damaged_file():
    s = settings.load()
    assert s.heat_guard is False and s.guard_threshold_c == 83
    s.heat_guard, s.guard_threshold_c, s.guard_hold_s = True, 80, 45
    settings.save(s)
    assert settings.load() == s
    settings.settings_path().write_text('{"heat_guard": "yes", "guard_hold_s": true}')
    assert settings.load() == settings.MonitorSettings()  # bad values fall back to defaults
    settings.settings_path().write_text("not json")
    assert settings.load() == settings.MonitorSettings()
