"""The CPU memory tracker counts live storages exactly: allocations, frees, views, peaks."""

from __future__ import annotations

import torch

from trainer.step.memory import StoragePeak, measure_step, model_tensors, optimizer_tensors

MB = 1 << 20


def test_known_tensor_bytes_appear_exactly_and_free_returns_to_baseline():
    seed = torch.zeros(1000)  # 4000 bytes alive before entering
    with StoragePeak(alive=[seed]) as sp:
        assert sp.baseline_bytes == 4000
        for _ in range(50):
            a = torch.empty(3, 5, dtype=torch.float64)  # 120 bytes
            assert sp.live_bytes == 4000 + 120
            del a
            assert sp.live_bytes == 4000
        x = torch.ones(256, 256)
        assert sp.live_bytes == 4000 + 256 * 256 * 4
        del x
    assert sp.live_bytes == sp.baseline_bytes == 4000
    assert sp.peak_bytes == 4000 + 256 * 256 * 4


def test_views_and_in_place_results_are_not_counted_twice():
    with StoragePeak() as sp:
        y = torch.ones(100, 10)  # 4000
        v = y[2:].t()
        v.mul_(3)
        y.add_(1)
        w = y.view(-1)
        assert sp.live_bytes == 4000
        del y
        assert sp.live_bytes == 4000  # the views keep the storage alive
        del v, w
        assert sp.live_bytes == 0


def test_peak_is_the_high_water_mark_not_the_sum():
    with StoragePeak() as sp:
        a = torch.empty(MB, dtype=torch.uint8)
        b = torch.empty(2 * MB, dtype=torch.uint8)
        del a
        c = torch.empty(MB, dtype=torch.uint8)
        del b, c
    assert sp.peak_bytes == 3 * MB
    assert sp.live_bytes == 0


def test_measure_step_counts_forward_backward_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256, bias=False), torch.nn.GELU(), torch.nn.Linear(256, 8, bias=False)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    x = torch.randn(512, 64)
    param_bytes = sum(p.numel() * 4 for p in model.parameters())

    def step() -> torch.Tensor:
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    # First step: the optimizer's two moments are created inside it and stay.
    _, first = measure_step(step, alive=[*model_tensors(model), x], forward_of=model)
    assert first["baseline_bytes"] == param_bytes + x.numel() * 4
    assert first["end_bytes"] - first["baseline_bytes"] >= 2 * param_bytes
    # The forward keeps at least the 512×256 hidden pre-activation for GELU's backward.
    assert first["activation_bytes"] >= 512 * 256 * 4
    # At the peak the gradients (param_bytes) and the activations coexist at some point.
    assert first["peak_bytes"] >= first["baseline_bytes"] + param_bytes

    alive = [*model_tensors(model), *optimizer_tensors(opt), x]
    _, second = measure_step(step, alive=alive, forward_of=model)
    assert second["baseline_bytes"] >= 3 * param_bytes
    # Nothing leaks from one step to the next: the step returns to its baseline, plus the
    # returned 0-d loss.
    assert second["end_bytes"] - second["baseline_bytes"] <= 16
    assert second["peak_bytes"] > second["baseline_bytes"] + second["activation_bytes"] - 1


def test_the_step_events_peak_is_the_highest_over_every_step_so_far(tmp_path, tiny_data):
    """The first step creates AdamW's moments: every later step starts with them alive and
    peaks higher. The events say the peak so far (never the first step's alone), and what is
    live after each step."""
    from tests.trainer_run import events, run_trainer, write_run

    run = write_run(tmp_path / "run", tiny_data, steps_to=4)
    assert run_trainer(run).returncode == 0
    peaks = [e["mem_peak_mb"] for e in events(run, "step")]
    assert all(isinstance(p, float) for p in peaks) and peaks == sorted(peaks)  # a running peak
    assert peaks[1] > peaks[0], peaks  # step 2 peaks above step 1, and says so


def test_step_memory_keeps_the_highest_peak_and_the_latest_live_bytes():
    from pytest import approx

    from trainer.step.memory import StepMemory

    mem = StepMemory(torch.device("cpu"))
    keep: list[torch.Tensor] = []

    def first() -> None:  # 1 MiB made and kept, 2 MiB more for a moment
        keep.append(torch.zeros(1 << 18))
        torch.zeros(1 << 19).sum()

    mem.step(first, alive=list)
    assert mem.peak_mb == approx(3.0, abs=1e-3) and mem.alloc_mb == approx(1.0, abs=1e-3)
    mem.step(lambda: torch.zeros(1 << 16).sum(), alive=lambda: keep)  # a smaller step: 1.25 MiB
    assert mem.peak_mb == approx(3.0, abs=1e-3) and mem.alloc_mb == approx(1.0, abs=1e-3)
    mem.step(lambda: torch.zeros(1 << 20).sum(), alive=lambda: keep)  # 1 MiB alive + 4 MiB more
    assert mem.peak_mb == approx(5.0, abs=1e-3)


def test_the_cpu_count_stops_at_the_steady_state_and_looks_again_now_and_then():
    """Counted until a step peaks exactly as the one before; then one in RECOUNT_EVERY, and a
    step that peaks otherwise makes every step counted again."""
    from trainer.step.memory import StepMemory

    mem = StepMemory(torch.device("cpu"))
    size = {"n": 1 << 16}
    work = lambda: torch.zeros(size["n"]).sum()  # noqa: E731
    for _ in range(5):
        mem.step(work, alive=list)
    assert mem.counted == 2  # the second step repeated the first's peak: steady
    while mem.steps < mem.RECOUNT_EVERY - 1:
        mem.step(work, alive=list)
    assert mem.counted == 2
    size["n"] = 1 << 18  # the step grows: seen at the next recount, then counted again
    mem.step(work, alive=list)
    assert mem.counted == 3 and mem.peak_mb >= 1.0
    mem.step(work, alive=list)
    assert mem.counted == 4  # the repeat: steady again
    mem.step(work, alive=list)
    assert mem.counted == 4
