"""Why a run executes as it does, and why it is refused: codes with parameters.

A plan (trainer/plan/planner.py) gives every choice a `Reason`; a combination that cannot run is
a `Refusal`, and a run.json rule the contract checks raises a ConfigError that carries
one. Each is a code and its parameters, never a finished sentence, so that whoever shows
it words it in its own language from the same facts: the trainer in English (its log,
`python -m trainer.config`, exit 2) from TEXTS below, the lab in Russian from its own
table of the same codes (a test holds the two tables to the same codes and parameters).
No rule is restated to get a message in another language. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def _shown(value: Any) -> Any:
    """A parameter as an English sentence shows it: lists joined, the rest as given."""
    if isinstance(value, (list, tuple)):
        return ", ".join(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v) for v in value)
    return value


def number_text(value: Any) -> str:
    """A range's end or a value as run.json's English texts show it: whole numbers with
    thousands separators, others as %g."""
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 2**53:
        return f"{int(value):,}"
    return f"{value:g}"


@dataclass(frozen=True)
class Reason:
    """One fact behind a choice: `code` names the sentence, `params` fill it."""

    code: str
    params: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """The English sentence (the trainer's own words)."""
        text = TEXTS[self.code]
        if callable(text):
            return text(self.params)
        return text.format(**{k: _shown(v) for k, v in self.params.items()})

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "params": dict(self.params), "text": self.text()}

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class Refusal(Reason):
    """Why a run.json cannot run (on a machine): the trainer says it and exits with 2; the
    lab says it before anything is created."""


# The English sentences, by code. Parameters are named; numbers that a sentence shows with
# thousands separators say so in their format ({wanted:,}); a sentence with a part that
# depends on a parameter is a function of them.
TEXTS: dict[str, str | Callable[[dict[str, Any]], str]] = {
    # ---- reasons: what a plan chose and why -------------------------------------------------
    "asked": "as run.json asks (training.{key}: {value})",
    "precision_cpu": "auto: fp32 on the CPU",
    "precision_bf16": "auto: bf16, which the card computes natively (compute capability {capability})",
    "precision_fp16": "auto: fp16 with loss scaling: the card has no native bf16 (compute capability {capability})",
    "precision_emulated": "as run.json asks (training.precision: bf16); the card has no native bf16 "
                          "(compute capability {capability}), so it is emulated and slower than fp16",
    "one_process": "one process: nothing to share (training.sharding {asked} applies to two or more)",
    "sharding_ddp_fits": "auto: the training state ({state_gb:.1f} GB, 16 bytes a weight) fits in half a card "
                         "({half_gb:.1f} GB): every process holds it (DDP)",
    "sharding_fsdp": "auto: the training state ({state_gb:.1f} GB, 16 bytes a weight) is over half a card "
                     "({half_gb:.1f} GB): sharded over the {processes} processes (FSDP2)",
    "sharding_ddp_lean": "auto: the lean state runs only with every process holding it (DDP)",
    "sharding_ddp_unknown": "auto: DDP ({device}: no card memory to weigh the state against)",
    "step_normal": "fp32 gradients held, then AdamW's step (lean_state false)",
    "step_held": "gradients held until the backward pass ends, then each weight updated in turn with an "
                 "exact clip, 8-bit moments (lean_state true)",
    "step_held_fp16": "gradients held in fp32 for fp16's loss scaler to check, then the 8-bit update "
                      "(lean_state true)",
    "step_fused": "no set of gradients held: each weight updated inside a second backward pass, "
                  "8-bit moments (lean_state \"fused\")",
    "step_one_pass": "no set of gradients held: each weight updated inside the one backward pass, clipped by "
                     "the global norm estimated as the pass goes (exact at its end); 8-bit first moment, factored "
                     "second (lean_state \"one_pass\")",
    "step_offload": "as \"fused\", the 8-bit moments in the host's memory between steps (lean_state \"offload\")",
    "step_offload_cpu": "as \"fused\"; on the CPU the moments are in the host's memory anyway (lean_state \"offload\")",
    "micro_one": "one micro-step: {processes} process(es) × batch_per_card {batch} × context {context} = "
                 "{tokens:,} tokens a step (training.tokens_per_step 0)",
    "micro_many": "{micro} micro-steps of {processes} process(es) × batch_per_card {batch} × context {context} "
                  "make training.tokens_per_step {wanted:,}",
    "compile_cuda": "auto: on for a CUDA card (fewer kernel launches)",
    "compile_cpu": "auto: off on the CPU (no gain measured there)",
    "compile_lean": "auto: off: lean_state \"{lean}\" updates each weight from its gradient hook, which a "
                    "compiled backward pass would run only after every gradient is made",
    "compile_fsdp": "auto: off: FSDP gathers and frees each block's weights in hooks that whole-model "
                    "compilation does not follow",
    "compile_no_triton": "auto: off: torch.compile needs Triton for a CUDA card, and it is not installed (on "
                         "Windows: the triton-windows package, which the set-up installs only for a torch whose "
                         "Triton version it knows, trainer/plan/cuda_build.py)",
    "samples_on": "every {every} steps, {tokens} new tokens a prompt",
    "samples_zero": "off: training.sample_tokens is 0",
    "samples_fsdp": "off under FSDP: the weights are spread over the processes (ternit sample works on the "
                    "checkpoints)",
    "memory_fits": "{allocated:,.0f} MiB allocated by the estimate + {framework:,.0f} MiB for the framework = "
                   "{needed:,.0f} MiB of the card's {card:,.0f} MiB: fits",
    "speed_basis": lambda p: (
        (f"≈ {p['ms']:,.0f} ms a step: the note's {p['note_ms']:.0f} ms a step (1.67 B weights, 1,024 tokens, "
         "RTX 5070 Ti; GUIDE.md «Экономный режим») scaled to this shape by arithmetic"
         if p["ms"] is not None else "no measured step time of this card to scale")
        + f"; a step's arithmetic ×{p['arithmetic']:.2f} the normal step's: recompute's extra forward "
        f"+{p['recompute']:.2f}, a second backward pass +{p['second_backward']:.2f} "
        f"({p['backward_passes']:.0f} backward pass{'es' if p['backward_passes'] > 1 else ''} a step) counted"),
    # ---- refusals: what cannot run, and what to change ---------------------------------------
    "does_not_fit": lambda p: (
        f"does not fit: {p['allocated']:,.0f} MiB allocated by the estimate + {p['framework']:,.0f} MiB for the "
        f"framework = {p['needed']:,.0f} MiB, over the card's {p['card']:,.0f} MiB; "
        + (f"the fastest combination that fits: training.economical \"{p['level']}\", training.lean_state "
           f"\"{p['lean']}\"" + (f", training.sharding \"{p['sharding']}\"" if p["sharding"] != "none" else "")
           + f" ({p['fit_needed']:,.0f} MiB; a step's arithmetic ×{p['arithmetic']:.2f} the normal step's)"
           if p["fits"] else "no combination of training.economical and training.lean_state fits: lower "
           "model.layers, model.width or training.batch_per_card")),
    "lean_under_ddp": "training.lean_state \"{lean}\" updates each weight inside the backward pass, which DDP's "
                      "gradient averaging over the processes would come after: use lean_state true (the "
                      "gradients held), or run on one process",
    "lean_under_fsdp": "training.lean_state cannot be combined with FSDP sharding: FSDP gives each process shards "
                       "of every weight, which the lean state's 8-bit optimizer does not update; set lean_state "
                       "to false (FSDP shards the normal state over the processes instead) or run on one process",
    "lean_no_library": "training.lean_state needs the bitsandbytes library, which is not installed: "
                       "pip install 'ternit-lab[lean]' (or pip install bitsandbytes), or set lean_state to false",
    "fused_fp16": lambda p: (
        f'training.lean_state "{p["lean"]}" updates each weight inside the backward pass, but under fp16'
        + (" (what precision auto chose for this card)" if p["auto"] else "")
        + ' the loss scaler must see every gradient before any weight moves: set lean_state to true (the '
        'same memory under fp16) or training.precision to "fp32"'),
    "fused_micro_steps": "training.lean_state \"{lean}\" holds no gradients, but {micro} micro-steps add theirs "
                         "up before the step: set lean_state to true, or training.tokens_per_step to 0 "
                         "(one micro-step)",
    "compile_on_lean": "training.compile \"on\" cannot be combined here: training.lean_state \"{lean}\" steps each "
                       "parameter from its gradient hook, and a compiled backward pass makes every gradient at "
                       "once before those hooks run (the full set of gradients that lean state exists to avoid; "
                       "lean_state true compiles); set compile to \"off\" or \"auto\"",
    "compile_on_fsdp": "training.compile \"on\" cannot be combined here: FSDP sharding gathers and frees each "
                       "block's weights in hooks that whole-model compilation does not follow; set compile to "
                       "\"off\" or \"auto\"",
    "compile_no_compiler": "training.compile \"on\": torch.compile needs {needs} here, and none was found; "
                           "install it, or set compile to \"off\" or \"auto\"",
    "tokens_per_step": lambda p: (
        f"training.tokens_per_step {p['wanted']:,} is not a whole number of micro-steps of {p['cards']} "
        f"card(s) × batch_per_card {p['batch']} × context {p['context']} = {p['micro']:,} tokens: set "
        f"tokens_per_step to {' or '.join(f'{v:,}' for v in p['near'])}"
        + (f" (or batch_per_card to {', '.join(map(str, p['batches']))})" if p["batches"] else "")
        + ", or to 0 for automatic"),
    "tokens_per_step_negative": "training.tokens_per_step must be 0 (automatic) or more, not {wanted}",
    "at_least_one": "{key} must be at least 1, not {value}",
    "heads_divide": "model.width {width} does not divide by model.heads {heads}: choose heads from {choices}",
    "vocab_over": "model.vocab {vocab} is over {most:,}: token ids are stored as uint16",
    "state_too_big": "the model has {params:,} weights: their training state alone (weights, gradients, "
                     "optimizer) needs about {gib:,.0f} GiB, beyond any machine the lab trains on; lower "
                     "model.width or model.layers",
    "target_kind": "target.kind must be local or kaggle, not {kind!r}",
    "target_gpu": "target.gpu must be auto, cpu or card numbers such as 0 or 0,1, not {value!r}",
    "out_of_range": lambda p: (
        f"{p['key']} must be {'above' if p['above'] else 'at least'} {number_text(p['low'])} and at most "
        f"{number_text(p['high'])}, not {number_text(p['value'])} ({p['reason']})"),
    "duplicate_key": "{where} names the key {key!r} twice in one object: keep one of them",
    "file_missing": "{path} does not exist: write a run.json there first",
    "file_not_json": "{path} is not valid JSON (line {line}: {msg})",
    "file_not_utf8": "{path} is not UTF-8 text (byte {byte}): save it as UTF-8",
    "file_unreadable": "{path} cannot be read ({error})",
    "not_an_object": "run.json must hold one JSON object",
    "section_kind": "{where}: {key} must be an object, not {value}",
    "file_too_big": "{path} is {size:,} characters, over the {most:,} a run.json may have",
    "file_too_deep": "{path} nests its JSON too deep for a run.json (objects within objects: a run.json has two levels)",
    "prompts_many": "training.sample_prompts has {count:,} prompts, more than {most}: each is written out at every sample",
    "prompt_long": "training.sample_prompts[{index}] is {length:,} characters, over {most:,}",
    "name_one_line": "name must be one line of text, without line breaks or control characters: {name!r}",
    # ---- sampling from a checkpoint (trainer/text/sampling.py) -------------------------------------
    "temperature": "temperature {value} refused: it must be 0 (always the likeliest token) to {most:g}",
    "top_k": "top-k {value} refused: 0 (no limit) or more",
    "top_p": "top-p {value} refused: it must be above 0 and at most 1",
    "sample_tokens": "length {value} refused: it must be {least:,} to {most:,} tokens",
    "sample_num": "sample count {value} refused: {least} to {most}",
    # A rule whose sentence has no code yet: its English words as they are.
    "invalid": "{message}",
}
