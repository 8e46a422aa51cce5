"""`ternit bench monitor` runs end to end (tiny windows; the figures are in docs/PERF.md)."""

from __future__ import annotations

import json

from bench import monitor as bench


def test_bench_against_two_fake_gpus(capsys):
    assert bench.main(["--seconds", "0.05", "--rounds", "2", "--interval", "0.01",
                       "--fake-gpus", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "ok" and result["gpus"] == 2 and result["fake_gpus"] == 2
    assert [w["kind"] for w in result["windows"]] == ["idle", "sampling", "sampling", "idle"]
    assert result["sample_ms"]["n"] >= 2 and result["sample_ms"]["median"] > 0
    assert result["sampler_thread_pct"]["median"] > 0


def test_bench_report_text(capsys):
    assert bench.main(["--seconds", "0.05", "--rounds", "1", "--interval", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "GPU monitor sampling cost" in out and "budget: under 1% of one core" in out


def test_bench_rejects_bad_arguments(capsys):
    assert bench.main(["--rounds", "0"]) == 2
