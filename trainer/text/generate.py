"""Text from the lab's GPT: key/value-cached sampling, and the loss of a checkpoint on a file.

The cache: each block's keys and values of the tokens seen so far are kept, so a new token
costs one position's forward pass, not the whole context's (nanoGPT's `generate` re-runs the
context per token; `ternit bench sample` measures the two side by side). `forward_cached`
restates trainer.model.gpt.Block's forward for that (x + attn(norm(x)), then x + mlp(norm(x)));
tests/test_generate.py compares it with the model's own forward, token for token.

The context window: a prompt longer than the model's context keeps its last `context` tokens
(the caller is told how many were dropped). When the window fills up during generation, its
last half is kept and run again from position 0 (the positions are learned, so a window
cannot slide by one without recomputing it); the no-cache reference follows the same rule.

Randomness comes from a torch.Generator of its own, seeded by the caller: the global random
streams (the training's) are never read or advanced, so samples taken during training leave
a run bit-exact, and the same seed gives the same text.
"""

from __future__ import annotations

import math
import mmap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from trainer.config.run_config import ModelConfig
from trainer.model.functional import GELU_APPROXIMATE
from trainer.model.gpt import GPT, norm
from trainer.plan import cuda_build
from trainer.state import checkpoint as ckpt
from trainer.state.checkpoint_index import CheckpointError
from trainer.step.optim import autocast, pick_precision
from trainer.text.sampling import Sampling


class Cache:
    """Keys and values per block, (batch, heads, context, head_dim), made at the first write
    in the dtype the attention computes in (bf16/fp16 under autocast on a GPU)."""

    def __init__(self, model: GPT) -> None:
        self.model = model
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.length = 0

    def clear(self) -> None:
        self.length = 0

    def store(self, i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + k.size(2)
        if len(self.k) <= i:
            shape = (k.size(0), k.size(1), self.model.cfg.context, k.size(3))
            self.k.append(k.new_empty(shape))
            self.v.append(v.new_empty(shape))
        self.k[i][:, :, self.length : end] = k
        self.v[i][:, :, self.length : end] = v
        return self.k[i][:, :, :end], self.v[i][:, :, :end]


@dataclass
class Packed:
    """The weights as generation multiplies them: each linear layer's weight as (in, out), the
    output layer as (width, vocab). On the CPU a one-time copy made per generation (a single
    token's row times an (in, out) matrix runs ≈ 9 % faster than times nn.Linear's (out, in) on
    one thread), all of them in one buffer in the order a token's pass reads them (`weights_buffer`);
    on a GPU the transposed views, no copy. The checkpoint and the model are not changed."""

    layers: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]  # qkv, proj, up, down
    head: torch.Tensor

    def matrices(self) -> list[torch.Tensor]:
        """Every weight in the order a token's pass reads them (on the CPU, their order in memory)."""
        return [m for layer in self.layers for m in layer] + [self.head]


HUGE_PAGE = 2 << 20  # bytes: below one huge page the advice has nothing to give


def weights_buffer(numel: int, dtype: torch.dtype) -> torch.Tensor:
    """A flat tensor of `numel` elements for the packed weights. A token's pass at batch 1 streams
    every weight once (≈ 110 MB at the default model) and is bound by how fast one core reads
    memory: one buffer read front to back instead of 33 separate allocations, and on Linux a
    private anonymous mapping advised for transparent huge pages (2 MiB pages: 512× fewer
    page-table walks over the stream), made the default model's decode ≈ 10 % faster on one thread
    (docs/PERF.md). Where the OS has no such advice (Windows, macOS) an ordinary tensor. The
    mapping is unmapped when the last tensor viewing it is freed."""
    nbytes = numel * dtype.itemsize
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or nbytes < HUGE_PAGE:
        return torch.empty(numel, dtype=dtype)
    # MAP_PRIVATE: Python's default for an anonymous map is MAP_SHARED, which is shared memory
    # (shmem), whose huge pages follow another switch that is off by default
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        region.madvise(advice)
    except OSError:  # a kernel built without transparent huge pages (EINVAL): 4 KiB pages then
        pass
    return torch.frombuffer(region, dtype=dtype)


def pack(model: GPT, buffer: Callable[[int, torch.dtype], torch.Tensor] = weights_buffer) -> Packed:
    """`buffer(numel, dtype)`: where the CPU's copy lies (bench.sample --layouts compares others)."""
    blocks = [(b.attn.qkv.weight, b.attn.proj.weight, b.mlp.up.weight, b.mlp.down.weight) for b in model.blocks]
    head = model.tok.weight
    if head.device.type != "cpu":
        return Packed([tuple(m.detach().t() for m in layer) for layer in blocks], head.detach().t())
    every = [m for layer in blocks for m in layer] + [head]
    flat = buffer(sum(m.numel() for m in every), head.dtype)
    out, at = [], 0
    for m in every:  # (out, in) -> (in, out), each right after the one a token's pass reads before it
        out.append(flat[at : at + m.numel()].view(m.size(1), m.size(0)).copy_(m.detach().t()))
        at += m.numel()
    return Packed([tuple(out[i : i + 4]) for i in range(0, len(out) - 1, 4)], out[-1])


def _one_query(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               later: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of one query per head over the cached positions, as two batched products:
    SDPA's fused CPU kernel costs ≈ 0.1 ms a call to set up for one row. `later`: the
    positions not written yet, masked out (the fixed-shape step attends over the whole cache)."""
    scores = torch.matmul(q, keys.transpose(-1, -2)).mul_(1 / math.sqrt(q.size(-1)))
    if later is not None:
        scores.masked_fill_(later, float("-inf"))
    return torch.matmul(scores.softmax(-1), values)


Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _blocks(model: GPT, w: Packed, x: torch.Tensor, b: int, t: int, attend: Attend) -> torch.Tensor:
    """Every block's forward over `x` (b·t, width): trainer.model.gpt.Block's, restated over the
    packed weights; `attend(i, q, k, v)` (each (b, heads, t, head_dim)) stores block i's keys
    and values in its cache and returns the attention."""
    d, heads = x.size(-1), model.cfg.heads
    for i, (wqkv, wproj, wup, wdown) in enumerate(w.layers):
        q, k, v = torch.mm(norm(x), wqkv).view(b, t, 3, heads, -1).unbind(2)
        y = attend(i, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + torch.mm(y.transpose(1, 2).reshape(b * t, d), wproj)
        x = x + torch.mm(F.gelu(torch.mm(norm(x), wup), approximate=GELU_APPROXIMATE), wdown)
    return x


def forward_cached(model: GPT, idx: torch.Tensor, cache: Cache, w: Packed | None = None) -> torch.Tensor:
    """Logits of the last position, (batch, vocab), for `idx` following what `cache` holds.
    Either a whole window from position 0 or one new token."""
    w = w or pack(model)
    b, t = idx.shape
    start = cache.length
    assert t == 1 or start == 0, "a window is run from position 0, later tokens one at a time"
    x = model.tok(idx) + model.pos(torch.arange(start, start + t, device=idx.device))
    d = x.size(-1)

    def attend(i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        keys, values = cache.store(i, k, v)
        if t == 1:
            return _one_query(q, keys, values)
        return F.scaled_dot_product_attention(q, keys, values, is_causal=True)  # a window from 0 is causal

    x = _blocks(model, w, x.view(b * t, d), b, t, attend)
    cache.length = start + t
    return torch.mm(norm(x.view(b, t, d)[:, -1]), w.head)


# ---- the decode step with fixed shapes (a CUDA graph on a card) ----------------------

# One new token's forward pass with every shape fixed, so that on a card it is captured once
# as a CUDA graph and replayed per token: one launch instead of ≈ 15 kernels a layer, which is
# what a small model's decode at batch 1 costs on a GPU (each kernel a few microseconds of
# launch against a fraction of that in arithmetic).
#
# Fixed shapes: the keys and values of the whole context are preallocated, the new token's are
# written at a position held in a device tensor, and the query attends to every position with
# the later ones masked out (-inf before the softmax, so they weigh exactly 0). The token and its
# position are copied into the graph's input tensors before each replay. On the CPU the same
# step runs eagerly (no graph): tests/test_generate.py holds it against `forward_cached` token
# for token there; the graph itself is checked on a card by scripts/gpu_checks.sh part `sample`.

CACHE_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class StaticStep:
    """The decode step over preallocated tensors. `cache` is the ordinary Cache whose tensors
    are these, so a window run from position 0 by `forward_cached` fills them in place."""

    def __init__(self, model: GPT, w: Packed, precision: str, batch: int = 1) -> None:
        cfg, device = model.cfg, model.tok.weight.device
        self.model, self.w, self.precision, self.device = model, w, precision, device
        shape = (batch, cfg.heads, cfg.context, cfg.width // cfg.heads)
        # what the products compute in: autocast's 16-bit type, else the weights' own
        dtype = CACHE_DTYPES.get(precision, model.tok.weight.dtype)
        self.cache = Cache(model)
        self.cache.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in model.blocks]
        self.cache.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in model.blocks]
        self.token = torch.zeros((batch, 1), dtype=torch.long, device=device)
        self.position = torch.zeros((1,), dtype=torch.long, device=device)
        self.positions = torch.arange(cfg.context, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None

    def _forward(self) -> torch.Tensor:
        b = self.token.size(0)
        later = self.positions > self.position  # (context,): the positions not written yet

        def attend(i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            keys, values = self.cache.k[i], self.cache.v[i]
            keys.index_copy_(2, self.position, k)
            values.index_copy_(2, self.position, v)
            return _one_query(q, keys, values, later)

        x = (self.model.tok(self.token) + self.model.pos(self.position)).view(b, -1)
        return torch.mm(norm(_blocks(self.model, self.w, x, b, 1, attend)), self.w.head)

    def _capture(self) -> None:
        """Warm-up on a side stream (cuBLAS picks its kernels and workspaces there), then the
        capture. Both write the current token's keys and values at the current position,
        the same values the replay writes, so capturing changes no state."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side), autocast(self.precision, self.device):
            for _ in range(2):
                self._forward()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), autocast(self.precision, self.device):
            self.logits = self._forward()

    def __call__(self, token: int) -> torch.Tensor:
        """The logits after `token`, written at the cache's next position, (batch, vocab)."""
        if self.cache.length >= self.model.cfg.context:
            raise ValueError("the cache is full: the window is run again from position 0 first")
        self.token.fill_(token)
        self.position.fill_(self.cache.length)
        if self.device.type == "cuda":
            if self.graph is None:
                self._capture()
            self.graph.replay()
            out = self.logits
        else:
            with autocast(self.precision, self.device):
                out = self._forward()
        self.cache.length += 1
        return out


def crop(prompt: list[int], context: int) -> tuple[list[int], int]:
    """The prompt's last `context` tokens, and how many were dropped from its start."""
    dropped = max(0, len(prompt) - context)
    return prompt[dropped:], dropped


def pick(logits: torch.Tensor, s: Sampling, gen: torch.Generator, allowed: int) -> int:
    """The next token from one row of logits: greedy at temperature 0, else one draw from
    the tempered, top-k/top-p-limited distribution (inverse CDF on the CPU generator, one
    uniform number per token, so the same seed gives the same tokens on any device)."""
    logits = logits.float()[:allowed]
    if s.temperature == 0:
        return int(torch.argmax(logits))
    logits = (logits / s.temperature).cpu()
    if 0 < s.top_k < logits.numel():
        kth = torch.topk(logits, s.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits.double(), dim=0)
    if s.top_p < 1:
        ordered, order = torch.sort(probs, descending=True)
        before = torch.cumsum(ordered, 0) - ordered  # mass of the likelier tokens
        ordered[before >= s.top_p] = 0  # the smallest set reaching top_p stays
        probs = torch.zeros_like(probs).scatter_(0, order, ordered)
    cdf = torch.cumsum(probs, 0)
    u = torch.rand((), generator=gen, dtype=torch.float64) * cdf[-1]
    return min(int(torch.searchsorted(cdf, u, right=True)), allowed - 1)


NextLogits = Callable[[list[int], bool], torch.Tensor]


def _tokens(model: GPT, prompt: list[int], new: int, s: Sampling, seed: int, stop: int | None,
            allowed: int, next_logits: NextLogits) -> Iterator[int]:
    """The shared loop: `next_logits(window, fresh)` gives the last logits of `window`,
    `fresh` when the window was (re)started. Stops before `stop` (end of text)."""
    n = model.cfg.context
    gen = torch.Generator().manual_seed(seed)
    seq, start = list(prompt), 0
    fresh = True
    for _ in range(new):
        if len(seq) - start >= n:  # the window is full: keep its last half, run it again
            start = len(seq) - max(1, n // 2)
            fresh = True
        token = pick(next_logits(seq[start:], fresh)[0], s, gen, allowed)
        fresh = False
        if token == stop:
            return
        seq.append(token)
        yield token


@torch.no_grad()
def generate(model: GPT, prompt: list[int], new: int, s: Sampling, seed: int, stop: int | None = None,
             allowed: int | None = None, precision: str = "fp32", weights: Packed | None = None,
             static: bool = False) -> Iterator[int]:
    """New token ids one at a time (the prompt already cropped to the context), with the cache;
    `weights`: pack(model) made once for several calls (else made here); `static`: each new
    token through StaticStep (one CUDA graph on a card; eager fixed shapes on the CPU)."""
    if not prompt:
        raise ValueError("the prompt needs at least one token")
    device = model.tok.weight.device
    w = weights or pack(model)
    step = StaticStep(model, w, precision) if static else None
    cache = step.cache if step else Cache(model)

    def next_logits(window: list[int], fresh: bool) -> torch.Tensor:
        if fresh:
            cache.clear()
            idx = torch.tensor([window], device=device)
        elif step:
            return step(window[-1])
        else:
            idx = torch.tensor([window[-1:]], device=device)
        with autocast(precision, device):
            return forward_cached(model, idx, cache, w)

    yield from _tokens(model, prompt, new, s, seed, stop, allowed or model.cfg.vocab, next_logits)


@torch.no_grad()
def generate_reference(model: GPT, prompt: list[int], new: int, s: Sampling, seed: int,
                       stop: int | None = None, allowed: int | None = None) -> Iterator[int]:
    """The same without a cache: the model's own forward over the whole window per token."""
    device = model.tok.weight.device

    def next_logits(window: list[int], fresh: bool) -> torch.Tensor:
        return model(torch.tensor([window], device=device))[:, -1]

    yield from _tokens(model, prompt, new, s, seed, stop, allowed or model.cfg.vocab, next_logits)


# ---- loading a checkpoint for generation ----------------------------------------------


@dataclass
class Loaded:
    model: GPT
    device: torch.device
    precision: str
    step: int
    data: dict[str, Any]
    cpu_because: str | None = None  # device auto on the CPU although there is a card: why


def _model_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Weights under the model's own names, in fp32 (a compiled or wrapped model saves
    `_orig_mod.`/`module.` prefixes; a lean checkpoint may keep 16-bit weights)."""
    out = {}
    for name, value in state.items():
        for prefix in ("_orig_mod.", "module."):
            name = name.removeprefix(prefix)
        out[name] = value.float() if value.is_floating_point() else value
    return out


def load_for_generation(path: Path, device: str = "auto") -> Loaded:
    """The checkpoint's model alone (its optimizer state is dropped at once), in eval mode,
    on the CPU or a GPU; the economical level does not matter (it changes no weights)."""
    try:
        kind, cpu_because = cuda_build.pick(device)
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    dev = torch.device(kind)
    payload = ckpt.load(Path(path))
    payload.pop("optimizer", None)
    try:
        model = GPT(ModelConfig(**payload["config"]["model"]))
        model.load_state_dict(_model_state(payload["model"]))
    except (KeyError, TypeError, RuntimeError, ValueError) as e:
        raise CheckpointError(f"{path} holds no model this version can load ({type(e).__name__}: {e})") from None
    model.to(dev).eval()
    return Loaded(model, dev, pick_precision("auto", dev), int(payload.get("step", 0)), dict(payload.get("data") or {}),
                  cpu_because)


# ---- the loss on a text ---------------------------------------------------------------


@dataclass
class FileScore:
    loss: float  # nats per token
    loss_ci95: tuple[float, float]
    bits_per_byte: float
    bpb_ci95: tuple[float, float]
    tokens: int
    bytes: int
    segments: int

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)


def _ratio_ci(num: list[float], den: list[float]) -> tuple[float, tuple[float, float]]:
    """Σnum/Σden and its 95 % interval over segments (the ratio estimator's standard error)."""
    r = sum(num) / sum(den)
    k = len(num)
    if k < 2:
        return r, (float("nan"), float("nan"))
    resid = [a - r * b for a, b in zip(num, den, strict=True)]
    se = math.sqrt(sum(e * e for e in resid) / (k - 1)) / (math.sqrt(k) * (sum(den) / k))
    return r, (r - 1.96 * se, r + 1.96 * se)


@torch.no_grad()
def score_tokens(loaded: Loaded, ids: list[int], byte_counts: list[int], batch: int = 8) -> FileScore:
    """Loss of every token of `ids[1:]` given those before it, in segments of the context
    (each segment starts where the last one's targets ended); `byte_counts[i]` is how many
    bytes of text token i stands for."""
    model, n = loaded.model, loaded.model.cfg.context
    starts = list(range(0, len(ids) - 1, n))
    nats, tokens, nbytes = [], [], []
    for i in range(0, len(starts), batch):
        group = starts[i : i + batch]
        # segments of one length share a batch; only the file's last one may be shorter
        for length in sorted({min(n, len(ids) - 1 - s) for s in group}):
            rows = [s for s in group if min(n, len(ids) - 1 - s) == length]
            t = torch.tensor([ids[s : s + length + 1] for s in rows], device=loaded.device)
            with autocast(loaded.precision, loaded.device):
                seg = model.segment_losses(t[:, :-1], t[:, 1:])
            for s, loss in zip(rows, seg.double().cpu().tolist(), strict=True):
                nats.append(loss * length)
                tokens.append(length)
                nbytes.append(sum(byte_counts[s + 1 : s + length + 1]))
    loss, loss_ci = _ratio_ci(nats, [float(x) for x in tokens])
    bpb, bpb_ci = _ratio_ci(nats, [b * math.log(2) for b in nbytes])
    return FileScore(loss, loss_ci, bpb, bpb_ci, sum(tokens), sum(nbytes), len(nats))


# ---- samples during training ------------------------------------------------------------


@torch.no_grad()
def training_samples(model: GPT, prompts: list[list[int]], new: int, seed: int, precision: str,
                     decode: Callable[[list[int]], str], stop: int | None, allowed: int) -> list[dict[str, Any]]:
    """One short continuation per prompt at a fixed seed (the same seed at every step, so
    the samples of a run differ only by what the model learned). The model's training mode
    is restored; no global random stream is touched."""
    was_training = model.training
    model.eval()
    out = []
    w = pack(model)  # once for all the prompts (the weights do not change between them)
    try:
        for i, prompt in enumerate(prompts):
            prompt, _ = crop(prompt, model.cfg.context)
            began = time.perf_counter()
            ids = list(generate(model, prompt, new, Sampling(), seed + i, stop, allowed, precision, w))
            seconds = time.perf_counter() - began
            out.append({"prompt": decode(prompt), "text": decode(ids), "tokens": len(ids),
                        "tokens_per_s": round(len(ids) / seconds, 1) if seconds > 0 else None,
                        "seconds": round(seconds, 3)})
    finally:
        model.train(was_training)
    return out
