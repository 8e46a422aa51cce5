"""The economical mode: keep fewer activations for the backward pass, recompute the rest.

Levels (run.json `training.economical`: false = "off", true = "selective", or a name):
- "off": the normal mode; autograd keeps everything the backward pass reads.
- "selective": the attention keeps what is expensive to make — the q/k/v projection and
  the attention kernel's output — and its norm is recomputed; the MLP, whose 4·d-wide
  activations are the largest thing a block holds, keeps only its input and recomputes
  norm, up-projection and GELU in the backward pass, in slices of rows (`_TiledMLP`;
  see `mlp_chunks`), so its wide temporaries are never all alive at once.
- "full": the attention is recomputed too (activation checkpointing, non-reentrant):
  a block keeps only its input and its mid-block residual. The least memory; q/k/v and
  the attention kernel run twice (the checkpoint stops before the output projection,
  whose output the backward pass does not need).

In both economical levels the loss is `chunked_lm_loss`: the tied output layer and the
cross-entropy are evaluated a slice of rows at a time, and the gradients with respect
to the hidden states and the embedding are formed right there, so the (batch·time,
vocab) logits and their softmax are never held for the backward pass. It does the same
three matrix products as the normal loss: no recomputation.

The recomputation is written out (two small autograd functions) rather than left to
torch.utils.checkpoint's selective policies, which held more of the normal peak and
cost Python work per operator in both passes (docs/PERF.md, «Figures the code's docstrings carried»). The block's forward is restated here
(trainer.model.gpt.Block: x + attn(norm(x)), then x + mlp(norm(x))); the tests compare the
modes' losses and gradients, so a change to one that the other lacks fails them.

On a fast GPU a step of the lab's small models waits mostly for kernel launches, so the
written-out passes launch as few as they can: no zero-filled accumulators, no copies a
single slice does not need, few loss slices (`loss_slices`). bench.opcount counts a
step's launches and FLOPs; tests/test_opcount.py holds the selective level to ≤ 1.3× the
normal step's launches and to exactly the FLOPs it says it redoes (the count at the lab's
default model: docs/PERF.md).

The parameters and their names are untouched: a checkpoint from one mode continues in
the other. Every operation is deterministic where the kernels are, so a resumed run
matches an uninterrupted one bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from trainer.config.run_config import ECONOMICAL_LEVELS
from trainer.model.functional import GELU_APPROXIMATE, lm_loss, norm

# What each level costs, printed with the benchmark's report (figures: docs/PERF.md). On a
# GPU the step time is not measured for this version: the extra arithmetic (what a busy
# card such as a T4 feels) and the extra kernel launches (what an H200 at these sizes
# feels) are counted (bench.opcount), at the lab's default model.
ABOUT = {
    "off": "all activations kept: the most memory, the normal speed",
    "selective": "MLP and norms recomputed, attention kept: 0.39x the peak memory at the "
    "normal step time on the CPU; +7.9% arithmetic and +25% kernel launches per step at "
    "the lab's default model",
    "full": "attention recomputed as well: 0.22x the peak memory at 1.13x the step time on "
    "the CPU; +22% arithmetic and +32% kernel launches at the lab's default model",
}

# The MLP's rows are cut into slices (see _TiledMLP): (forward, backward) counts.
MLP_CHUNKS = (1, 2)


def mlp_chunks(layers: int) -> tuple[int, int]:
    """Slices for the tiled MLP. Every slice costs a dozen more operator calls, and on a
    CPU shared with other programs each call can wait for a descheduled thread (seen
    here: 4 slices 1.10×, 2 slices 1.04×, 1 slice 1.02× the normal step under load), so
    slices are few: the forward pass runs whole (its 9·rows·width of MLP temporaries
    live only while the block runs), and the backward pass in two slices while the
    depth is small (below 8 layers), where one block's temporaries would otherwise
    stand out against what all the layers keep (about 6·rows·width each)."""
    return (1, 2 if layers < 8 else 1)


_EPS = 1e-5  # F.layer_norm's default, as trainer.model.gpt.norm uses


def _precision(t: torch.Tensor) -> tuple[torch.dtype, torch.dtype]:
    """(matrix-product dtype, norm dtype) as autocast would choose them for `t`."""
    kind = t.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind), torch.float32  # layer_norm runs in fp32
    return t.dtype, t.dtype


def _layer_norm(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.native_layer_norm(x, (x.size(-1),), None, None, _EPS)


def _layer_norm_backward(
    grad: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor
) -> torch.Tensor:
    return torch.ops.aten.native_layer_norm_backward(
        grad, x, [x.size(-1)], mean, rstd, None, None, [True, False, False]
    )[0]


def _accumulate(acc: torch.Tensor | None, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """acc + a @ b in fp32 (acc None: the first term). Products in 16-bit are added to the
    fp32 sum by one mixed-dtype add (no separate cast), and the first one is only cast:
    no zero-filled accumulator, a kernel launch fewer per term on a GPU."""
    if acc is None:
        return torch.mm(a, b).to(torch.float32)
    if a.dtype == acc.dtype:
        return acc.addmm_(a, b)
    return acc.add_(torch.mm(a, b))


class _NormLinear(torch.autograd.Function):
    """linear(layer_norm(x), weight), keeping x (and the norm's statistics) rather than
    the normed copy: the norm is recomputed in the backward pass."""

    @staticmethod
    def forward(ctx, x, weight):  # noqa: ANN001, ANN205
        mm_dtype, ln_dtype = _precision(x)
        with torch.autocast(x.device.type, enabled=False):
            xin = x.to(ln_dtype)
            n, mean, rstd = _layer_norm(xin)
            out = F.linear(n.to(mm_dtype), weight.to(mm_dtype))
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.dtypes = (mm_dtype, ln_dtype)
        return out

    @staticmethod
    def backward(ctx, grad_out):  # noqa: ANN001, ANN205
        x, weight, mean, rstd = ctx.saved_tensors
        mm_dtype, ln_dtype = ctx.dtypes
        d = x.size(-1)
        xin = x.to(ln_dtype)
        n = _layer_norm(xin)[0].to(mm_dtype)
        go = grad_out.to(mm_dtype).reshape(-1, grad_out.size(-1))
        grad_w = None
        if ctx.needs_input_grad[1]:
            grad_w = torch.mm(go.t(), n.reshape(-1, d)).to(weight.dtype)
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_n = torch.mm(go, weight.to(mm_dtype)).to(ln_dtype).view(x.shape)
            grad_x = _layer_norm_backward(grad_n, xin, mean, rstd).to(x.dtype)
        return grad_x, grad_w


class _TiledMLP(torch.autograd.Function):
    """down(gelu(up(layer_norm(x)))) a slice of rows at a time, keeping only x: the
    backward pass recomputes each slice's norm, up-projection and GELU just before it
    needs them (the down-projection's output is never needed again)."""

    @staticmethod
    def forward(ctx, x, w_up, w_down, chunks):  # noqa: ANN001, ANN205
        mm_dtype, ln_dtype = _precision(x)
        d = x.size(-1)
        flat = x.reshape(-1, d)
        out = torch.empty(flat.size(0), w_down.size(0), dtype=mm_dtype, device=x.device)
        with torch.autocast(x.device.type, enabled=False):
            wu, wd = w_up.to(mm_dtype), w_down.to(mm_dtype)
            rows = _rows(flat.size(0), chunks[0])
            for part, dest in zip(flat.split(rows), out.split(rows), strict=True):
                n = _layer_norm(part.to(ln_dtype))[0].to(mm_dtype)
                # GELU in place: the forward pass needs no pre-activation copy.
                g = torch.ops.aten.gelu_(torch.mm(n, wu.t()), approximate=GELU_APPROXIMATE)
                torch.mm(g, wd.t(), out=dest)
        ctx.save_for_backward(x, w_up, w_down)
        ctx.dtypes, ctx.chunks = (mm_dtype, ln_dtype), chunks
        return out.view(*x.shape[:-1], w_down.size(0))

    @staticmethod
    def backward(ctx, grad_out):  # noqa: ANN001, ANN205
        x, w_up, w_down = ctx.saved_tensors
        mm_dtype, ln_dtype = ctx.dtypes
        d = x.size(-1)
        flat = x.reshape(-1, d)
        rows = _rows(flat.size(0), ctx.chunks[1])
        go_all = grad_out.reshape(-1, grad_out.size(-1)).to(mm_dtype)
        wu, wd = w_up.to(mm_dtype), w_down.to(mm_dtype)
        slices = list(zip(flat.split(rows), go_all.split(rows), strict=True))
        # One slice (the usual case from 8 layers up) writes its gradient as it is made;
        # several fill a buffer. Either way no zero-filled accumulators (see _accumulate).
        grad_x = torch.empty_like(flat) if len(slices) > 1 else None
        grad_wu = grad_wd = None
        # One slice: each weight's gradient is one product, made in the weights' dtype at once
        # (the same values as through an fp32 sum: a 16-bit product widened and narrowed back
        # is itself). Under bf16 weights that spares two fp32 copies of the MLP's matrices
        # beside their casts — at the lab's full model 160 MiB at the one-pass step's peak.
        single = len(slices) == 1
        start = 0
        for part, go in slices:
            xin = part.to(ln_dtype)
            n, mean, rstd = _layer_norm(xin)
            n = n.to(mm_dtype)
            u = torch.mm(n, wu.t())
            g = F.gelu(u, approximate=GELU_APPROXIMATE)
            grad_wd = torch.mm(go.t(), g).to(w_down.dtype) if single else _accumulate(grad_wd, go.t(), g)
            del g
            # GELU's backward in place in its incoming gradient's buffer (an elementwise
            # kernel may write over its input exactly): one slice-sized buffer less.
            grad_g = torch.mm(go, wd)
            grad_u = torch.ops.aten.gelu_backward.grad_input(
                grad_g, u, approximate=GELU_APPROXIMATE, grad_input=grad_g
            )
            del u
            grad_wu = torch.mm(grad_u.t(), n).to(w_up.dtype) if single else _accumulate(grad_wu, grad_u.t(), n)
            grad_n = torch.mm(grad_u, wu).to(ln_dtype)
            gx = _layer_norm_backward(grad_n, xin, mean, rstd)
            if grad_x is None:
                grad_x = gx
            else:
                grad_x[start : start + part.size(0)].copy_(gx)
            start += part.size(0)
        assert grad_x is not None and grad_wu is not None and grad_wd is not None
        return (
            grad_x.to(x.dtype).view(x.shape),
            grad_wu.to(w_up.dtype),
            grad_wd.to(w_down.dtype),
            None,
        )


def _rows(total: int, chunks: int) -> int:
    """Rows per slice when `total` rows are cut into `chunks` slices."""
    return max(1, -(-total // chunks))


def tiled_mlp(
    x: torch.Tensor,
    w_up: torch.Tensor,
    w_down: torch.Tensor,
    chunks: tuple[int, int] = MLP_CHUNKS,
) -> torch.Tensor:
    return _TiledMLP.apply(x, w_up, w_down, chunks)


def _attention(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """block.attn(norm(x)) (trainer.model.gpt.Attention) with the norm recomputed, not kept."""
    attn = block.attn
    b, t, d = x.shape
    qkv = _NormLinear.apply(x, attn.qkv.weight)
    q, k, v = qkv.view(b, t, 3, attn.heads, d // attn.heads).unbind(2)
    y = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    )
    return attn.proj(y.transpose(1, 2).reshape(b, t, d))


def _recomputed_attention(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    # The model has no dropout, so no random state needs restoring for recomputation.
    return checkpoint(
        lambda x: block.attn(norm(x)), x, use_reentrant=False, preserve_rng_state=False
    )


def block_forward(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A trainer.model.gpt.Block's forward pass in its economical level (`block.level`, with
    its MLP's row slices `block.mlp_chunks`), for the training step; the block's own
    forward calls it (so FSDP's hooks on the block gather its weights around it as
    around the normal pass)."""
    x = x + _attention_of(block.level)(block, x)
    return x + tiled_mlp(x, block.mlp.up.weight, block.mlp.down.weight, block.mlp_chunks)


def _attention_of(level: str) -> Callable[[nn.Module, torch.Tensor], torch.Tensor]:
    if level == "selective":
        return _attention
    if level == "full":
        return _recomputed_attention
    raise ValueError(f"unknown economical level {level!r} (known: {', '.join(ECONOMICAL_LEVELS)})")


# ---- the loss without the full logits ------------------------------------------------


def loss_slices(vocab: int, width: int, layers: int) -> int:
    """How many row slices the loss is cut into: enough that one slice's temporaries
    (fp32 log-probabilities and their 16-bit copy, ~12–14 bytes per logit) stay under
    half of what the blocks keep for the backward pass (≥ 16·d bytes per token and
    layer in the selective level): 1.75·V / (d·L) slices, 1 to 16. Every slice costs ten
    kernel launches, which a GPU at the lab's sizes feels (docs/PERF.md), so slices are as
    few as that memory bound allows; with few layers the logits are relatively large and
    get more slices."""
    return max(1, min(16, math.ceil(1.75 * vocab / (width * max(1, layers)))))


def chunk_rows(rows: int, vocab: int, width: int, layers: int) -> int:
    """Rows per slice of the loss (see loss_slices)."""
    return -(-rows // loss_slices(vocab, width, layers))


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    """mean cross-entropy of h @ weightᵀ, with its gradient formed in the forward pass.

    For each slice: logits (in the compute precision), their log-softmax in fp32, the
    picked log-probabilities; then softmax − one-hot gives the slice's gradient of the
    logits, which two matrix products turn into the gradients of h (kept in the compute
    precision, as the normal mode's matrix product makes it) and of the weight (summed in
    fp32). The backward pass only scales those by the incoming gradient and 1/N, in fp32."""

    @staticmethod
    def forward(ctx, h, weight, targets, rows, compute_dtype):  # noqa: ANN001, ANN205
        d = h.size(-1)
        h2 = h.reshape(-1, d)
        t = targets.reshape(-1)
        n = h2.size(0)
        hc = h2.to(compute_dtype)
        wc = weight.to(compute_dtype)
        grad_h = torch.empty(n, d, dtype=compute_dtype, device=h.device)
        grad_w = None
        picked = torch.empty(n, 1, dtype=torch.float32, device=h.device)
        minus_one = torch.full((min(rows, n), 1), -1.0, dtype=torch.float32, device=h.device)
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            hs, ts = hc[start:stop], t[start:stop, None]
            # One fused kernel for the row-wise log-softmax (fp32, as the normal loss).
            logp = torch.log_softmax(torch.mm(hs, wc.t()).float(), dim=1)
            torch.gather(logp, 1, ts, out=picked[start:stop])
            # softmax − one-hot, in place in the log-probabilities' buffer.
            grad = logp.exp_().scatter_add_(1, ts, minus_one[: stop - start])
            gc = grad.to(compute_dtype)
            torch.mm(gc, wc, out=grad_h[start:stop])
            grad_w = _accumulate(grad_w, gc.t(), hs)
        ctx.save_for_backward(grad_h, grad_w)
        ctx.shape, ctx.n = h.shape, n
        ctx.dtypes = (h.dtype, weight.dtype)
        return picked.sum().div_(-n)

    @staticmethod
    def backward(ctx, grad_loss):  # noqa: ANN001, ANN205
        grad_h, grad_w = ctx.saved_tensors
        h_dtype, weight_dtype = ctx.dtypes
        scale = grad_loss.float() / ctx.n
        gh = grad_h.to(torch.float32)
        # A fresh fp32 copy is scaled in place; the saved tensor itself never changes.
        gh = gh.mul_(scale) if gh is not grad_h else gh * scale
        return (
            gh.to(h_dtype).view(ctx.shape),
            (grad_w * scale).to(weight_dtype),
            None,
            None,
            None,
        )


def chunked_lm_loss(
    h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, layers: int = 1
) -> torch.Tensor:
    """The same value as trainer.model.gpt.lm_loss, without holding the (N, V) logits.
    `layers` is the model's depth (it sets the slices: loss_slices)."""
    device_type = h.device.type
    if torch.is_autocast_enabled(device_type):
        compute_dtype = torch.get_autocast_dtype(device_type)
    else:
        compute_dtype = torch.promote_types(h.dtype, weight.dtype)
    if not torch.is_grad_enabled() or not (h.requires_grad or weight.requires_grad):
        return lm_loss(h, weight, targets)
    rows = chunk_rows(h.numel() // h.size(-1), weight.size(0), h.size(-1), layers)
    with torch.autocast(device_type, enabled=False):
        return _ChunkedLinearCrossEntropy.apply(h, weight, targets, rows, compute_dtype)
