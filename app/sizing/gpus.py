"""What the lab knows about each card it can train on: memory, speed, precision.

Speeds are tokens per second of the DEFAULT model (8 layers, d 512, n 1024, V 4000, batch
6 per card), for all the card(s) together. Only the two Kaggle figures are measurements
(the lab's own, shared/GUIDE.md); the home cards are estimates from their specifications
against one T4, and every estimate says so where it is shown. Once the lab has measured
runs on a card, those replace these figures (app.sizing.speed).

Memory is per card, in MiB, as NVML reports the card's total; what the framework itself
takes (CUDA context, the caching allocator's slack) is modelled in trainer.plan.memory_model and
shown apart. A card's processes, memory and compute capability are the run.json
contract's catalogue (trainer.plan.planner.KNOWN_CARDS: what the plan decides from, and what
`python -m trainer.config --machine` knows); this table adds the lab's speeds and words.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from trainer.plan.planner import (
    KAGGLE_LIBRARIES,
    KNOWN_CARDS,
    Card,
    Libraries,
    Machine,
    installed_libraries,
    machine_of,
)
from trainer.plan.step_cost import CACHE_SLACK, CONTEXT_MB, NOTE_MS_PER_STEP, NOTE_SHAPE

from .formulas import Shape

log = logging.getLogger(__name__)

DEFAULT_SHAPE = Shape()
# The lab's full model (shared/GUIDE.md's note; issue 13): 26 layers, d 2304, 18 heads,
# n 1024, V 4000 = 1,667,801,088 weights, batch 1.
FULL_SHAPE = NOTE_SHAPE

# One T4 on Kaggle, default model: about 49,000 tokens/s (the lab's measurement).
T4_TOKENS_PER_S = 49_000.0


@dataclass(frozen=True)
class LargeReference:
    """A measured speed at a large model, used for shapes nearer to it than to the
    default model (the card's small-model figure is launch-bound there)."""

    shape: Shape
    tokens_per_s: float
    basis: dict[str, str]


# The lab's note: ≈ 149 ms a step of 1,024 tokens at 1.67 B weights on an RTX 5070 Ti
# (≈ 6,900 tokens/s), in its economical mode at "practically the normal speed".
NOTE_5070TI = LargeReference(
    FULL_SHAPE, FULL_SHAPE.context / (NOTE_MS_PER_STEP / 1000),
    {"ru": "оценка по замеру большой модели: 1,67 млрд весов на RTX 5070 Ti шли ≈ 149 мс на шаг "
           "(заметка лаборатории)",
     "en": "an estimate from a large model's measurement: 1.67 B weights on an RTX 5070 Ti took ≈ 149 ms a step "
           "(the lab's note)"},
)


# The user's own card: one process on a CUDA card whose memory and capability NVML gives.
LOCAL_CARD = Card(1, "cuda", None, None)


@dataclass(frozen=True)
class GpuFacts:
    name: str
    label: dict[str, str]
    card: Card  # processes, device, memory (MiB per card; None: asked at estimate time), capability
    # Tokens/s of DEFAULT_SHAPE on all cards; None for the CPU (computed from a FLOP rate).
    tokens_per_s: float | None
    measured: bool  # tokens_per_s is a measurement (True) or an estimate from specifications
    basis: dict[str, str]  # where the speed comes from, in words
    # Framework memory not counted by the allocator: CUDA context and kernels (MiB per card).
    context_mb: float = CONTEXT_MB
    # The caching allocator reserves more than it hands out: this share of the allocated peak.
    cache_slack: float = CACHE_SLACK
    # See formulas.step_cost: 0 on the GPUs (pure compute scaling, as the guide says).
    small_width: float = 0.0
    aliases: tuple[str, ...] = field(default_factory=tuple)
    # How the reference is named in "estimate from the … reference".
    short: dict[str, str] = field(default_factory=dict)
    # "on …" in a sentence (Russian needs the prepositional case).
    on: dict[str, str] = field(default_factory=dict)
    # Host ↔ card copies (GB/s, one way, achieved): the lean state's offload and sharding.
    pcie_gb_s: float = 25.0
    # A second reference for large models: a measured shape and its tokens/s (None: none).
    large: LargeReference | None = None

    def text(self, lang: str) -> str:
        return self.label[lang]

    @property
    def kind(self) -> str:
        """"gpu" or "cpu"."""
        return "cpu" if self.card.device == "cpu" else "gpu"

    @property
    def cards(self) -> int:
        return self.card.processes

    @property
    def memory_mb(self) -> float | None:
        """Per card, MiB; None: asked at estimate time (the local card from NVML, the CPU's RAM)."""
        return self.card.memory_mb

    @property
    def compute_capability(self) -> tuple[int, int] | None:
        return self.card.capability


GPUS: dict[str, GpuFacts] = {
    "t4x2": GpuFacts(
        "t4x2",
        {"ru": "Kaggle 2×T4", "en": "Kaggle 2×T4"},
        KNOWN_CARDS["t4x2"], 102_000.0, True,
        {"ru": "замер лаборатории на 2×T4", "en": "the lab's 2×T4 measurement"},
        short={"ru": "2×T4", "en": "2×T4"}, on={"ru": "на Kaggle 2×T4", "en": "on Kaggle 2×T4"},
        pcie_gb_s=12.0,  # PCIe 3.0 ×16 on Kaggle's machines: an assumption, not measured
    ),
    "t4": GpuFacts(
        "t4",
        {"ru": "одна T4", "en": "one T4"},
        KNOWN_CARDS["t4"], T4_TOKENS_PER_S, True,
        {"ru": "замер лаборатории на одной T4", "en": "the lab's one-T4 measurement"},
        aliases=("tesla t4",), short={"ru": "одной T4", "en": "one-T4"}, on={"ru": "на одной T4", "en": "on one T4"},
        pcie_gb_s=12.0,
    ),
    # Slower than one T4 (the guide): its memory bandwidth is 224 GB/s against the T4's
    # 320 GB/s, and a model this small is held back by memory traffic as much as by
    # arithmetic, so 0.7 × T4. The 8 GB desktop card (the 6 GB and laptop ones hold less).
    "rtx3050": GpuFacts(
        "rtx3050",
        {"ru": "RTX 3050 (8 ГБ)", "en": "RTX 3050 (8 GB)"},
        KNOWN_CARDS["rtx3050"], 0.7 * T4_TOKENS_PER_S, False,
        {"ru": "оценка по характеристикам (0,7 × T4)", "en": "an estimate from specifications (0.7 × T4)"},
        aliases=("rtx 3050",), on={"ru": "на RTX 3050", "en": "on an RTX 3050"},
    ),
    # 896 GB/s (2.8 × T4) and about 2.7 × the T4's fp16 tensor throughput; 2.5 × T4 allows
    # for a small model using a big card less fully. Not measured.
    "rtx5070ti": GpuFacts(
        "rtx5070ti",
        {"ru": "RTX 5070 Ti (16 ГБ)", "en": "RTX 5070 Ti (16 GB)"},
        KNOWN_CARDS["rtx5070ti"], 2.5 * T4_TOKENS_PER_S, False,
        {"ru": "оценка по характеристикам (2,5 × T4)", "en": "an estimate from specifications (2.5 × T4)"},
        aliases=("rtx 5070 ti",), on={"ru": "на RTX 5070 Ti", "en": "on an RTX 5070 Ti"},
        large=NOTE_5070TI,
    ),
    # The user's own card: memory from NVML (or the caller), speed from a known card of the
    # same name, else assumed equal to one T4 until a run on it is measured.
    "local": GpuFacts(
        "local",
        {"ru": "Карта этого компьютера", "en": "This computer's card"},
        LOCAL_CARD, T4_TOKENS_PER_S, False,
        {"ru": "неизвестная карта: принята скорость одной T4", "en": "unknown card: assumed as fast as one T4"},
        on={"ru": "на своей видеокарте", "en": "on this computer's GPU"},
    ),
    # No reference run: a FLOP rate per thread (measured on the lab's build machine, an
    # AVX-512 core; half of it without AVX-512), slowed for narrow models (small_width,
    # measured too: docs/PERF.md). Memory: the machine's RAM.
    "cpu": GpuFacts(
        "cpu",
        {"ru": "процессор (CPU)", "en": "CPU (processor)"},
        KNOWN_CARDS["cpu"], None, False,
        {"ru": "оценка по скорости процессора", "en": "an estimate from the CPU's arithmetic rate"},
        context_mb=350.0, cache_slack=0.0, on={"ru": "на процессоре", "en": "on the CPU"},
    ),
}

# Achieved fp32 training FLOP/s per thread at large width and many rows, and the
# penalties of formulas.step_cost: rate = threads · 104 GFLOP/s / ((1 + 36·threads / d) ·
# (1 + 32·threads / rows)), rows = batch × n. Measured with the trainer's own step on the
# build machine (AMD EPYC, AVX-512), one thread: L×d from 2×64 to 3×384 at 1024 rows
# (fitted within 2.5 %), 128 to 2048 rows at 2×448 (within 1 %). Two threads (one quiet
# moment) gave twice the rate and d0 ≈ 73, hence "per thread"; the rows term per thread is
# assumed the same way. Without AVX-512 the vector units are half as wide: 52 GFLOP/s per
# thread is an estimate, not a measurement.
CPU_FLOPS_PER_THREAD = {"avx512": 104e9, "avx2": 52e9}
CPU_SMALL_WIDTH_PER_THREAD = 36.0
CPU_SMALL_ROWS_PER_THREAD = 32.0


@dataclass(frozen=True)
class LocalCard:
    name: str
    memory_mb: float
    compute_capability: tuple[int, int] | None = None


def local_card() -> LocalCard | None:
    """This PC's first card a run started here would train on (app.gpu.cards, the one answer
    to which cards this PC has), or None: no driver, no card, every card hidden or its memory
    unknown."""
    from ..gpu.cards import this_pc_cards

    cards = this_pc_cards()
    if not cards or cards[0].memory_mb is None:
        return None
    return LocalCard(cards[0].name, cards[0].memory_mb, cards[0].capability)


def known_card(name: str) -> GpuFacts | None:
    """The table's entry for a card reported by name ("NVIDIA GeForce RTX 3050" → rtx3050)."""
    low = name.lower()
    for facts in GPUS.values():
        if any(a in low for a in facts.aliases):
            return facts
    return None


def cpu_threads() -> int:
    """Threads PyTorch uses for one process: OMP_NUM_THREADS when set, else the physical
    cores this process may run on (it does not use SMT twins)."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return _physical_threads()


@functools.lru_cache(maxsize=1)
def _physical_threads() -> int:
    """Asked once per process: psutil reads sysfs for it (≈ 1 ms a call, and every
    estimate asks it for each combination)."""
    try:
        import psutil

        cores = psutil.cpu_count(logical=False)
    except Exception as exc:  # noqa: BLE001 - os.cpu_count below is good enough
        log.debug("psutil gave no core count: %s", exc)
        cores = None
    if not cores:
        cores = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return max(1, min(cores, affinity))


def small_width(facts: GpuFacts) -> float:
    """The device's narrow-width penalty for formulas.step_cost (per thread on the CPU)."""
    if facts.kind == "cpu":
        return CPU_SMALL_WIDTH_PER_THREAD * cpu_threads()
    return facts.small_width


def small_rows(facts: GpuFacts) -> float:
    """The device's few-rows penalty for formulas.step_cost (0 on the GPUs: not measured)."""
    return CPU_SMALL_ROWS_PER_THREAD * cpu_threads() if facts.kind == "cpu" else 0.0


PF_AVX512F_INSTRUCTIONS_AVAILABLE = 41  # winnt.h; Windows 10 20H1 and later know it


@functools.lru_cache(maxsize=1)
def cpu_has_avx512() -> bool:
    """Read once per process (every estimate asks it, for each combination): /proc/cpuinfo's
    flags on Linux, Windows' own IsProcessorFeaturePresent there (an older Windows answers
    False: AVX2 is assumed)."""
    if os.name == "nt":
        import ctypes

        return bool(ctypes.windll.kernel32.IsProcessorFeaturePresent(PF_AVX512F_INSTRUCTIONS_AVAILABLE))
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return " avx512f" in line
    except OSError:
        pass
    return False


def cpu_flops() -> float:
    """This machine's estimated fp32 training rate (FLOP/s) at large width."""
    per = CPU_FLOPS_PER_THREAD["avx512" if cpu_has_avx512() else "avx2"]
    return cpu_threads() * per


def ram_mb() -> float | None:
    try:
        import psutil

        return psutil.virtual_memory().total / 2**20
    except Exception as exc:  # noqa: BLE001 - no memory figure: no RAM check in the estimate
        log.info("psutil gave no memory size: %s", exc)
        return None


MemorySource = float | int | Callable[[], float | None] | None


def machine_for(gpu: str, memory_mb: float | None = None, capability: tuple[int, int] | None = None,
                libraries: Libraries | None = None) -> Machine:
    """The plan's Machine (trainer.plan.planner) for the sizing's choice `gpu`: a card of the
    contract's catalogue (a Kaggle one with Kaggle's libraries, the others with this
    computer's), or "local"; `memory_mb` and `capability` (NVML's, or the caller's)
    override the catalogue's, `libraries` the ones it would have."""
    card = GPUS[gpu].card
    if libraries is None:
        # Asked each time (≈ 1 ms): a library installed while the lab runs counts at once.
        libraries = KAGGLE_LIBRARIES if card.kaggle else installed_libraries()
    return machine_of(card, libraries, gpu, memory_mb, capability)
