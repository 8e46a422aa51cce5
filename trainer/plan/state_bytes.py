"""The training state's bytes per card — weights, gradients, optimizer moments — for each
step kind of the plan (trainer/plan/planner.py: "normal", or the lean state's "held", "fused",
"offload"; run.json `training.lean_state`, trainer/step/lean.py) and for the state sharded over
the cards (the plan's sharding "fsdp": FSDP2).

Normal: fp32 weights 4·P, fp32 gradients 4·P, AdamW's two fp32 moments 8·P.
Lean (trainer/step/lean.py, bitsandbytes' AdamW8bit):
  moments: a parameter of at least MIN_8BIT weights keeps two uint8 codes a weight, an
    fp32 absmax per block of BLOCK weights for each moment, and its two 256-entry fp32
    quantization maps (2·n + 8·⌈n/256⌉ + 2048 bytes); a smaller one keeps fp32 moments (8·n).
    Checked byte for byte against the trainer's storage count (tests/test_sizing_lean.py);
  weights: bf16 (2·P) where the precision is bf16, else fp32 (4·P, their own master copy);
  gradients: "held" keeps them in the weights' precision until the backward pass ends (2·P
    under bf16, 4·P in fp32; under fp16, a T4, the fp32 gradients wait for the
    GradScaler's check), then updates one parameter after another, freeing each
    gradient, with one parameter's temporaries at a time (update_temporaries); "fused" and
    "offload" update inside the second of two backward passes and free each gradient at
    once, so no set of them is held: what is held instead is the tied token embedding's
    gradient (V·d, its hook fires last) and, while one parameter is updated, that
    parameter's temporaries (the plan makes these steps only outside fp16);
  "offload": fused, and the moments live in the host's memory between steps; the card
    holds one parameter's at a time, a block matrix's at the peak (on the CPU it changes
    nothing).
"one_pass" (trainer/step/one_pass.py): the weights as the lean state's; no gradients held (each
  updated and freed in its hook inside the one backward pass; the tied embedding's waits, as
  "fused"'s); moments: an 8-bit first moment (n codes + 4 bytes a block of BLOCK, fp32 under
  MIN_8BIT weights) and a factored second (fp32 row and column means, 4·(rows + cols)); the
  update's temporaries are of one row slice of at most ONE_PASS_SLICE weights beside the
  parameter's gradient (one_pass_temporaries), counted by trainer.step.memory_count.
Sharded (FSDP2 over the target's cards): weights, gradients and moments are divided by the
cards; each card gathers one block's weights in the compute precision for its forward and
backward, one more ahead (prefetch), and reduces one block's fp32 gradients — in every
economical level too, whose blocks' own forward method FSDP is told of (trainer/parallel/sharding.py).
Measured on the CPU with two gloo processes at a small shape (tests/test_fsdp_memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.plan.planner import IN_BACKWARD_STEPS
from trainer.plan.shape import Shape

BLOCK = 256  # trainer.step.lean.BLOCK: bitsandbytes' block size
MIN_8BIT = 4096  # trainer.step.lean.MIN_8BIT: smaller parameters keep fp32 moments
ONE_PASS_SLICE = 1 << 20  # trainer.step.one_pass.SLICE_WEIGHTS: the update's row slice
# The one-pass update's temporaries of a slice, bytes a weight of it, at their peak (the
# quantization's nearest-code search): the dequantized first moment (fp32), its padded
# block copy, the int32 code indices, the gathered midpoints (fp32) and their comparison
# (bool) — 17, measured by StoragePeak on one matrix's update (tests/test_one_pass.py pins it).
ONE_PASS_SLICE_BYTES = 17


def param_sizes(s: Shape) -> list[int]:
    """Weights of each parameter of trainer/model/gpt.py's GPT, in its order."""
    d = s.width
    return [s.vocab * d, s.context * d] + [3 * d * d, d * d, 4 * d * d, 4 * d * d] * s.layers


def param_shapes(s: Shape) -> list[tuple[int, int]]:
    """(rows, columns) of each parameter of trainer/model/gpt.py's GPT, in its order."""
    d = s.width
    return [(s.vocab, d), (s.context, d)] + [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d)] * s.layers


def one_pass_moment_bytes(rows: int, cols: int) -> int:
    """The one-pass state of a matrix: 8-bit m with its block scales (fp32 under MIN_8BIT
    weights) and the factored second moment's rows and columns."""
    n = rows * cols
    m = n + 4 * (-(-n // BLOCK)) if n >= MIN_8BIT else 4 * n
    return m + 4 * (rows + cols)


def one_pass_temporaries(rows: int, cols: int, precision: str) -> int:
    """Bytes one parameter's one-pass update holds: its gradient (in the weights' precision)
    and one row slice's temporaries (ONE_PASS_SLICE_BYTES a weight, its blocks' scales), the
    rows' and columns' means."""
    n = rows * cols
    per = max(1, ONE_PASS_SLICE // cols)
    grad = (2 if precision == "bf16" else 4) * n
    part = min(n, per * cols)
    return grad + ONE_PASS_SLICE_BYTES * part + 4 * -(-part // BLOCK) + 4 * (rows + cols)  # + block scales


def moment_bytes(n: int) -> int:
    """Both 8-bit moments of one parameter with their block scales and maps."""
    if n < MIN_8BIT:
        return 8 * n
    return 2 * n + 8 * (-(-n // BLOCK)) + 2 * 256 * 4


def weights_bf16(step: str, precision: str) -> bool:
    """The lean state keeps bf16 weights (no fp32 master) under bf16 only."""
    return step != "normal" and precision == "bf16"


def update_temporaries(n: int, precision: str, device: str) -> int:
    """Bytes one parameter's update holds while it runs (n weights), in the lean state.

    bf16: the fp32 copy of the weight and of its gradient the library updates (8·n; the
    gradient's copy is freed before the stochastic rounding's one int32 temporary, 4·n, so
    8·n at most) and the bf16 gradient itself (2·n) — counted by trainer.step.memory_count.
    On the CPU bitsandbytes' update dequantizes both moments to fp32 and makes fp32 copies
    of the gradient and the denominator: about 4 more fp32 tensors (16·n). On a GPU its
    kernel works in place."""
    bf16 = 10 * n if precision == "bf16" else 4 * n  # fp32 weights: only the gradient
    return bf16 + (16 * n if device == "cpu" else 0)


@dataclass(frozen=True)
class State:
    """Bytes per card of the training state (and the moments kept in host memory)."""

    weights: int
    gradients: int
    optimizer: int
    optimizer_host: int
    # Held during the backward pass on top of the saved tensors, lean state only: the tied
    # embedding's gradient plus one parameter's update temporaries.
    in_backward: int
    sharded_buffers: int  # FSDP2's gathered weights and reduced gradients of a block
    # Held during the step after the backward pass on top of the gradients ("on", and the
    # lean state under fp16): one parameter's update temporaries.
    in_step: int = 0


def training_state(s: Shape, precision: str, step: str = "normal", cards: int = 1, sharding: str = "none",
                   device: str = "gpu") -> State:
    """The training state of shape `s` per card for the plan's `step` kind and `sharding`
    (see the module's note)."""
    sizes = param_sizes(s)
    p = sum(sizes)
    split = cards if sharding == "fsdp" and cards > 1 else 1
    in_step = 0
    if step == "normal":
        w, g, opt, in_bw = 4 * p, 4 * p, 8 * p, 0
    elif step == "one_pass":
        w = (2 if weights_bf16(step, precision) else 4) * p
        shapes = param_shapes(s)
        opt, g = sum(one_pass_moment_bytes(r, c) for r, c in shapes), 0
        # The embedding's gradient waits through the pass; a block matrix is updated beside it.
        in_bw = w // p * s.vocab * s.width + max(one_pass_temporaries(r, c, precision) for r, c in shapes[2:6])
    else:
        w = (2 if weights_bf16(step, precision) else 4) * p
        opt = sum(moment_bytes(n) for n in sizes)
        if step in IN_BACKWARD_STEPS:
            g = 0
            # The first hook: the last block's MLP matrix, while the embedding's gradient waits.
            block_max = 4 * s.width * s.width
            in_bw = w // p * s.vocab * s.width + update_temporaries(block_max, precision, device)
        else:
            g, in_bw = w, 0  # held in the weights' precision (fp32 under fp16)
            # One parameter updated at a time, the largest's temporaries; its held bf16
            # gradient, which update_temporaries counts, is already in g.
            n = max(sizes)
            in_step = update_temporaries(n, precision, device) - (2 * n if precision == "bf16" else 0)
    host = 0
    if step == "offload" and device != "cpu":
        # One parameter's moments visit the card at a time. At the peak, while the blocks
        # are differentiated, that is a block's largest matrix's (4·d²); the embedding's
        # hook fires last, when the saved tensors are gone (trainer.step.memory_count).
        host, opt = opt, moment_bytes(4 * s.width * s.width)
        host //= split
    shard = 0
    if split > 1:
        a = 4 if precision == "fp32" else 2
        block = 12 * s.width * s.width
        shard = 2 * a * block + 4 * block  # this block and the next gathered, one block's gradients
        w, g = w // split, g // split
        opt = opt if step == "offload" and device != "cpu" else opt // split
    return State(w, g, opt, host, in_bw, shard, in_step)


# What torch.save adds to a checkpoint beside the tensors' bytes: the payload's other
# entries (config, RNG states, data position) and each tensor's record, taken a little above
# what was measured (docs/PERF.md, «A checkpoint's size on disk»).
CHECKPOINT_EXTRA_BYTES = 40 * 1024
# Per parameter: a .pt file needs ≈ 1.2 KB, a sharded run's .dcp folder over two processes
# ≈ 16 KB (each of a tensor's three states written per process, and its metadata): the
# larger, since the sizing does not know which form a Kaggle run will write.
CHECKPOINT_BYTES_PER_TENSOR = 18 * 1024


def checkpoint_bytes(s: Shape, precision: str, lean: str = "off") -> int:
    """One checkpoint's size on disk, a .pt file or a sharded run's .dcp folder alike: the
    training state without its gradients — the weights (fp32, or bf16 under the lean state
    in bf16) and the optimizer's moments, whole (every shard of a sharded run) — plus
    torch.save's records: 12 bytes a weight normally, 6 with the lean state's 8-bit moments."""
    # Any lean step keeps the same weights and moments (only where the gradients live differs).
    kind = {"off": "normal", "one_pass": "one_pass"}.get(lean, "held")
    whole = training_state(s, precision, kind, cards=1, device="gpu")
    tensors = len(param_sizes(s))
    return whole.weights + whole.optimizer + whole.optimizer_host + CHECKPOINT_EXTRA_BYTES + \
        CHECKPOINT_BYTES_PER_TENSOR * tensors
