"""The CPU memory tracker counts live storages exactly: allocations, frees, views, peaks."""

from __future__ import annotations

import torch

from trainer.memory import StoragePeak, measure_step, model_tensors, optimizer_tensors

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
