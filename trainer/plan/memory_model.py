"""Memory of one training step on one card, part by part, from the model in trainer/model/gpt.py.

The lab's one memory model, torch-free: the plan room keeps it, so that what a run
executes and what it needs are decided in one room; app/sizing reads it from here.

Static (alive for the whole run), bytes:
  weights 4·P (fp32 master weights; autocast casts them on the fly), gradients 4·P,
  AdamW exp_avg + exp_avg_sq 8·P (fp32), DDP's gradient buckets 4·P on 2 cards (DDP's
  default keeps its flat buckets apart from .grad).
Saved for the backward pass (B batch per card, T = n, d width, h heads, V vocabulary,
a = 2 bytes under bf16/fp16 autocast, 4 in fp32), per block:
  the block input x (fp32 residual)                4·BTd
  layer-norm input of the MLP half (fp32)          4·BTd
  the two norm outputs as the linears keep them    2·a·BTd  (cast copies under autocast)
  fused qkv output (SDPA keeps q, k, v as views)   3·a·BTd
  attention output                                   a·BTd  (its transpose back is a view)
  MLP up output (GELU's input), GELU output        8·a·BTd
  norm statistics 2 × 2 × 4·BT, attention log-sum-exp 4·h·BT
  → 36·BTd (16-bit) or 64·BTd (fp32) + (16 + 4h)·BT. The fused/memory-efficient attention
  kernels (and the CPU's flash kernel PyTorch picks for this model) keep no n×n matrix.
Head: final norm input 4·BTd + its output as the output layer keeps it a·BTd +
  log-softmax of the fp32 logits 4·BTV. Backward of the loss holds two more B·T·V fp32
  tensors (8·BTV) while all of the above is alive: that is the step's peak for most sizes.
Under autocast the 16-bit copies of the matrices (2·(12·L·d² + V·d)) stay saved too.
Economical mode (trainer/model/economical.py): the attention half and the MLP half of a block
  keep their inputs only (the MLP recomputed in row slices). "selective" keeps per block the
  two halves' inputs (x and x + attention, 8·BTd fp32), the qkv output (3·a·BTd), the
  attention output (a·BTd), norm statistics and log-sum-exp; "full" only the two inputs.
  The backward pass then holds one block's recomputation and gradients: a measured
  constant per B·T·d (recompute_bytes). The loss is chunked: no B·T·V tensor is kept;
  it keeps grad_h (4·BTd) and the output layer's gradient (4·V·d), and while it runs a
  slice of logits and the previous slice's gradient are alive.
The peak is the largest of: the loss's forward, the start of the backward pass (static +
everything saved + the loss's backward or one block's recomputation) and the optimizer
step (static + gradients). On the CPU the trainer measures
the FIRST step, before AdamW has its state: `first_step_peak` models that.
Framework (not counted by the allocator, shown apart): CUDA context and kernels plus the
caching allocator's slack (facts in app.sizing.gpus).
The lean training state and the sharded state: trainer/plan/state_bytes.py. With bf16 weights (lean,
bf16) the residual stream is bf16 too: where the saved residual inputs keep it as it comes
(the economical levels' blocks; on the CPU the layer norms too) they keep 2 bytes a value
instead of 4 (_residual_16bit); on a GPU the normal level's layer norms save an fp32 copy
(CUDA autocast runs layer_norm in fp32), so there nothing is saved (counted by
trainer.step.memory_count, tests/test_sizing_count.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The levels and their one reader are run.json's contract (trainer.config.run_config).
from trainer.config.run_config import economical_level
from trainer.plan.planner import FUSED_STEPS, IN_BACKWARD_STEPS
from trainer.plan.shape import Shape, param_count
from trainer.plan.state_bytes import training_state, weights_bf16

MiB = 2**20


# Where a count stands behind this estimate: the machines (app.sizing's names, the plan's
# known machines) and their shardings at which tests/test_sizing_count.py holds every
# combination the plan offers within 5 % of trainer.step.memory_count's count of the
# trainer's own step. The test reads this table, so a machine is named here only with its
# proof; the form reads it to say «подсчитано» (the window never imports torch, so it cannot
# count live). FSDP is not counted (the counter refuses it), nor the CPU.
COUNTED: dict[str, tuple[str, ...]] = {"rtx5070ti": ("none",), "t4x2": ("ddp",)}


def counted_behind(machine: str, sharding: str) -> bool:
    """Whether the estimate for `machine` with the plan's `sharding` is one the count holds
    within 5 % (COUNTED); otherwise it is the formula alone."""
    return sharding in COUNTED.get(machine, ())


def act_bytes(precision: str) -> int:
    return 4 if precision == "fp32" else 2


@dataclass(frozen=True)
class Memory:
    """Bytes of each part, per card. `peak` is what the trainer's mem_peak_mb measures on a
    GPU (every step); `first_step_peak` what it measures on the CPU (its first step)."""

    weights: int
    gradients: int
    optimizer: int
    ddp_buckets: int
    autocast_copies: int
    activations: int  # saved for the backward pass, blocks and head
    loss_backward: int  # held on top of that while the loss is differentiated
    loss_forward: int  # held on top of the blocks' saved part while the loss is computed
    recompute: int  # economical mode: one block recomputed in the backward pass
    peak: int
    first_step_peak: int
    peak_phase: str  # "backward" or "optimizer"
    cublas_workspace: int = 0  # on a GPU: see cublas_workspace_bytes
    optimizer_host: int = 0  # lean_state "offload": the moments kept in the host's memory
    sharded_buffers: int = 0  # FSDP2: a block's gathered weights and reduced gradients

    def mib(self) -> dict[str, float]:
        return {k: v / MiB for k, v in self.__dict__.items() if isinstance(v, int)}


def block_saved(s: Shape, precision: str, level: str) -> int:
    a, bt, d = act_bytes(precision), s.batch * s.context, s.width
    if level == "off":
        return bt * d * (8 + 14 * a) + (16 + 4 * s.heads) * bt
    # Economical: the attention half and the MLP half are checkpointed apart, so each
    # keeps its input (x and x + attention, fp32); selective also keeps qkv and the
    # attention output with its log-sum-exp.
    if level == "selective":
        return bt * d * (8 + 4 * a) + (8 + 4 * s.heads) * bt
    return bt * d * 8


def head_saved(s: Shape, precision: str, level: str) -> int:
    a, bt, d, v = act_bytes(precision), s.batch * s.context, s.width, s.vocab
    if level == "off":
        return bt * (4 * d + a * d + 4 * v) + 8 * bt
    # chunked loss: norm input (fp32), grad_h (in the compute precision) and the output
    # layer's gradient (fp32).
    return bt * (4 + a) * d + 8 * bt + 4 * v * d


def loss_backward(s: Shape, precision: str, level: str) -> int:
    bt, d, v = s.batch * s.context, s.width, s.vocab
    if level == "off":
        return 8 * bt * v
    # the chunked loss's backward scales its two saved gradients into new tensors.
    return 4 * bt * d + 4 * v * d


def loss_slices(vocab: int, width: int, layers: int) -> int:
    """Row slices of the chunked loss, as trainer.model.economical.loss_slices: 1.75·V / (d·L),
    1 to 16 (a slice's temporaries stay under half of what the blocks keep)."""
    return max(1, min(16, math.ceil(1.75 * vocab / (width * max(1, layers)))))


def chunk_rows(rows: int, vocab: int, width: int, layers: int) -> int:
    """Rows per slice of the chunked loss, as trainer.model.economical.chunk_rows."""
    return -(-rows // loss_slices(vocab, width, layers))


def mlp_slices(layers: int) -> int:
    """Row slices of the tiled MLP's backward pass, as trainer.model.economical.mlp_chunks: 2 below
    8 layers, else 1 (its forward pass runs whole)."""
    return 2 if layers < 8 else 1


def loss_forward(s: Shape, precision: str, level: str, bf16_weights: bool = False) -> int:
    """Held beyond the saved tensors while the loss's forward runs. With bf16 weights (the
    lean state under bf16) nothing is cast: the output layer reads the normed h and the
    weight as they are."""
    a, bt, d, v = act_bytes(precision), s.batch * s.context, s.width, s.vocab
    a16 = 0 if bf16_weights or a == 4 else a
    casts = a16 * bt * d  # the normed h as the output layer reads it
    if level == "off":
        # h (fp32), the logits (16-bit, then fp32) and the log-softmax output.
        return 4 * bt * d + casts + bt * v * (8 + (a if a == 2 else 0))
    # A slice's fp32 logits and their log-softmax (8 bytes a cell) while the previous
    # slice's gradient (4, and its 16-bit copy) is still bound; the weight cast once.
    r = min(bt, chunk_rows(bt, v, d, s.layers))
    per_cell = 12 if a == 4 else 14
    return 4 * bt * d + casts + a16 * v * d + r * v * per_cell


# Economical levels: what the backward pass holds beyond the saved tensors while one
# block is differentiated, in units of B·T·d bytes. The tiled MLP's backward holds the
# gradient flowing in (4, fp32) and out (4), its 16-bit copy (a, under autocast) and one
# slice's recomputed norm, up-projection and GELU with their gradients ((9·a + 4) / slices);
# the attention's backward holds a part measured per level and precision (the recomputed
# attention of "full" in fp32 is the largest). Measured with the trainer's own storage
# count (trainer.step.memory) on the CPU, shapes 2×64 … 16×64, n 64–256, V 300–3000
# (trainer/model/economical.py as of 30 Nov 00:40 UTC).
ATTENTION_BACKWARD_PER_BTD = {("selective", 4): 16, ("selective", 2): 12, ("full", 4): 33, ("full", 2): 18}


def recompute_bytes(s: Shape, precision: str, level: str) -> int:
    """What one block's backward holds beyond its saved part in an economical level."""
    if level == "off":
        return 0
    a = act_bytes(precision)
    mlp = 8 + (a if a == 2 else 0) + (9 * a + 4) / mlp_slices(s.layers)
    per_btd = max(mlp, ATTENTION_BACKWARD_PER_BTD[(level, a)])
    return int(per_btd * s.batch * s.context * s.width)


def _residual_16bit(s: Shape, level: str, device: str) -> int:
    """Bytes FSDP's 16-bit gathered embeddings save off the residual stream (16-bit, not
    fp32, from the first block on). The economical levels' own functions keep a block's
    two inputs as they come (2 bytes a value less each). Layer norms keep what autocast
    gives them: on a GPU an fp32 copy of a 16-bit input (no saving: the normal level's
    blocks and the final norm), on the CPU the 16-bit input itself."""
    on_cpu = device == "cpu"
    if level == "off" and not on_cpu:
        return 0
    return (4 * s.layers + (2 if on_cpu else 0)) * s.batch * s.context * s.width


def cublas_workspace_bytes(compute_capability: tuple[int, int] | None) -> int:
    """cuBLAS workspaces, which the CUDA caching allocator counts as allocated (so they are
    in the trainer's mem_peak_mb). PyTorch gives each cuBLAS handle — one per thread and
    stream: the forward pass on the main thread, the backward on autograd's own — 32 MiB on
    compute capability 9.0 and 4096·2 + 16·8 KiB elsewhere (its CublasHandlePool default).
    Without this term the model fell short on an H200 by about these two handles
    (docs/PERF.md, «Estimates against measurements»). `None` means no GPU: 0."""
    if compute_capability is None:
        return 0
    per_handle = 32 * MiB if tuple(compute_capability) == (9, 0) else (4096 * 2 + 16 * 8) * 1024
    return 2 * per_handle


def estimate_memory(s: Shape, precision: str, cards: int = 1, economical: bool | str = False,
                    workspace: int = 0, step: str = "normal", sharding: str | None = None,
                    device: str = "gpu") -> Memory:
    """Bytes per card of one training step's parts and peak; `workspace` is the GPU's
    cuBLAS share (cublas_workspace_bytes), alive through the whole step. The plan's `step`
    kind and `sharding` (trainer/plan/planner.py: "none", "ddp", or "fsdp" over `cards`; None:
    DDP on several cards) shape the training state (trainer.plan.state_bytes); `device` is "cpu"
    or "gpu" (the lean update's temporaries differ)."""
    level = economical_level(economical)
    if sharding is None:
        sharding = "ddp" if cards > 1 else "none"
    sharded = sharding == "fsdp" and cards > 1
    st = training_state(s, precision, step, cards, sharding, device)
    weights, grads, opt = st.weights, st.gradients, st.optimizer
    p = param_count(s.layers, s.width, s.context, s.vocab)
    matrices = 12 * s.layers * s.width**2 + s.vocab * s.width
    ddp = 4 * p if sharding == "ddp" and cards > 1 else 0
    # Normal mode: the linears keep their 16-bit weight copies for the backward pass. In
    # the economical levels the blocks recompute them, and autocast's cache is gone once
    # the forward's autocast region closes. bf16 weights need no copies. Nor do weights
    # sharded by FSDP under bf16/fp16: each block's are gathered already in 16 bits
    # (MixedPrecisionPolicy; autocast's cast of them is no copy), freed after the
    # block's forward and gathered again for its backward (trainer/parallel/sharding.py, in every
    # level): those gathered blocks are st.sharded_buffers.
    bf16_weights = weights_bf16(step, precision)
    gathered_16bit = sharded and cards > 1 and precision != "fp32"
    copies = 2 * matrices if (precision != "fp32" and level == "off" and not bf16_weights
                              and not gathered_16bit) else 0
    saved = s.layers * block_saved(s, precision, level) + head_saved(s, precision, level)
    if bf16_weights or gathered_16bit:
        # bf16 embeddings make the residual stream bf16 (FSDP's 16-bit gathered ones too):
        # the saved inputs that keep it as it comes keep 2 bytes a value.
        saved -= _residual_16bit(s, level, device)
    lb = loss_backward(s, precision, level)
    rc = recompute_bytes(s, precision, level)
    lf = loss_forward(s, precision, level, bf16_weights)
    # While the loss's forward runs, everything is saved but (normal mode) the
    # log-softmax output, which `lf` counts; the chunked loss has made grad_h and the
    # output layer's gradient already.
    log_softmax = 4 * s.batch * s.context * s.vocab if level == "off" else 0
    held = max(saved - log_softmax + copies + lf, saved + copies + max(lb, rc))
    if step in IN_BACKWARD_STEPS:
        in_backward = saved + copies + st.in_backward
        if level != "off" and step == "one_pass":
            # The chunked loss's fp32 output-layer gradient (in head_saved) has gone into the
            # embedding's gradient, which st.in_backward counts, before the first block's
            # hook (the fused steps' first pass keeps it: its graph is kept for the second).
            in_backward -= 4 * s.vocab * s.width
        held = max(held, in_backward)
        if level != "off" and step in FUSED_STEPS:
            # The fused step's first backward pass keeps its graph for the second, and with
            # it the chunked loss's gradients (formed in the forward pass, in the compute
            # precision) beside the blocks' recomputation: a·(BTd + Vd) more (counted by
            # trainer.step.memory_count).
            held += act_bytes(precision) * (s.batch * s.context * s.width + s.vocab * s.width)
    # FSDP's gathered blocks are counted in the optimizer step too, where they are freed:
    # they stand for what that step and the backward pass hold beyond the model here —
    # the per-parameter AdamW's temporaries (trainer.parallel.sharding.make_optimizer) and the
    # sharded gradients that build up while the backward pass goes on (the measured peak
    # is 1.02–1.05× this on the CPU, two gloo processes: tests/test_fsdp_memory.py).
    static = weights + opt + ddp + st.sharded_buffers
    backward = static + held
    optimizer = static + grads + st.in_step
    if gathered_16bit:
        # Under FSDP the peak of a level comes late in the backward pass (measured): the
        # sharded gradients have built up while the first block is still differentiated.
        optimizer += rc
    elif level != "off" and grads:
        # Late in the backward pass of a level, where the gradients are held: nearly all of
        # them have built up while the first block is recomputed and differentiated beside
        # its saved part (counted by trainer.step.memory_count).
        optimizer = max(optimizer, static + grads + rc + block_saved(s, precision, level))
    peak = max(backward, optimizer) + workspace
    # First step: no optimizer state until the update creates it (then weights + grads + state).
    first = max(weights + ddp + held, weights + ddp + grads + opt + st.in_step) + st.sharded_buffers + workspace
    return Memory(
        weights, grads, opt, ddp, copies, saved, lb, lf, rc, peak, first,
        "backward" if backward >= optimizer else "optimizer", workspace, st.optimizer_host, st.sharded_buffers,
    )
