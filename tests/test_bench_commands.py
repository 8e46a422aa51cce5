"""Every `ternit bench NAME` runs end to end at a tiny shape, through the dispatcher a user
types (app.cli.bench), so a benchmark that no longer runs (as `ternit bench trainer` once
failed with `take_plan() first`) fails here. No figure is asserted: the figures are in
docs/PERF.md. The benchmarks tested elsewhere at a tiny shape are named in ELSEWHERE."""

from __future__ import annotations

import json

import pytest

from app.cli import bench as bench_cli

# name -> the test that runs it end to end at a tiny shape.
ELSEWHERE = {
    "economical": "tests/test_economical.py::test_benchmark_writes_the_report",
    "sample": "tests/test_bench_sample.py::test_bench_sample_tiny",
    "monitor": "tests/test_bench_monitor.py::test_bench_against_two_fake_gpus",
    "sizing-gpu": "tests/test_sizing_probe.py",
}
HERE = {"trainer", "data", "sizing", "window", "memory", "one-pass"}


def test_every_benchmark_has_a_smoke_test():
    assert set(bench_cli.BENCHES) == HERE | set(ELSEWHERE)


def test_bench_trainer_tiny(tmp_path):
    out = tmp_path / "step.json"
    args = ["--context", "32", "--width", "32", "--heads", "2", "--layers", "2", "--vocab", "300",
            "--batch", "2", "--steps", "2", "--warmup", "1", "--series", "2", "--device", "cpu", "--json", str(out)]
    assert bench_cli.main(["trainer", *args]) == 0  # its own process, as the user's command
    r = json.loads(out.read_text())
    assert r["trainer"]["n"] == r["plain"]["n"] == 4 and r["ratio_median"] > 0


def test_bench_data_tiny(capsys):
    assert bench_cli.main(["data", "--mb", "0.05", "--repeats", "1", "--vocab", "300", "--context", "64"]) == 0
    assert "ratio_lab_vs_encode_fast_best" in capsys.readouterr().out


def test_bench_data_a_round_under_one_cpu_tick_has_no_cpu_rate(capsys, monkeypatch):
    """psutil counts CPU time in clock ticks: a tiny round can read 0 CPU-s (a fresh clone's .ci/run
    divided by it). Such a round prints why it has no rate, and the JSON says None."""
    from app.data import bench as data_bench

    monkeypatch.setattr(data_bench, "_cpu", lambda: 7.0)  # the clock never ticks
    assert bench_cli.main(["data", "--mb", "0.05", "--repeats", "1", "--vocab", "300", "--context", "64"]) == 0
    out = capsys.readouterr().out
    assert "CPU time under one clock tick" in out
    result = json.loads(out[out.index("{"):out.rindex("}") + 1])
    assert result["lab"]["median_mb_per_cpu_s"] is None and result["ratio_lab_vs_encode_cpu"] is None
    assert result["lab"]["median_mb_s"] > 0


def test_bench_sizing_one_size(tmp_path):
    out = tmp_path / "sizing.json"
    args = ["--sizes", "A", "--steps", "3", "--rounds", "1", "--threads", "1", "--out", str(out)]
    assert bench_cli.main(["sizing", *args]) == 0
    r = json.loads(out.read_text())
    assert [m["size"] for m in r["memory"]] == ["A"] and r["memory"][0]["measured_mb"] > 0


def test_bench_sizing_refuses_an_unknown_size(capsys):
    with pytest.raises(SystemExit) as e:  # argparse's usage error
        bench_cli.main(["sizing", "--sizes", "A,Z"])
    assert e.value.code == 2
    assert "--sizes" in capsys.readouterr().err


def test_bench_window_plot_once(capfd, monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert bench_cli.main(["window", "plot", "1"]) == 0  # its own process: Qt stays out of this one
    assert "downsampled: median" in capfd.readouterr().out


def test_bench_memory_tiny(tmp_path):
    out = tmp_path / "grid.json"
    args = ["--layers", "1", "--width", "32", "--heads", "2", "--context", "16", "--vocab", "64", "--batch", "1",
            "--machines", "t4x2", "--json", str(out)]
    assert bench_cli.main(["memory", *args]) == 0  # its own process, as the user's command
    rows = json.loads(out.read_text())
    # DDP: 3 levels × lean state off or on, counted; FSDP: the normal state's 3, estimated only.
    assert len(rows) == 9 and all("estimate_mib" in r for r in rows)
    assert sum("peak_mb" in r for r in rows) == 6


def test_bench_one_pass_tiny(capfd):
    args = ["--layers", "1", "--width", "32", "--heads", "2", "--context", "16", "--vocab", "64",
            "--batch", "2", "--rounds", "2"]
    assert bench_cli.main(["one-pass", *args]) == 0  # its own process, as the user's command
    r = json.loads(capfd.readouterr().out)
    assert r["rounds"] == 2 and r["ratio_median"] > 0 and r["shape"]["width"] == 32
