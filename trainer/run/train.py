"""The training loop: config → model → steps → events and checkpoints.

Run as `python -m trainer --run RUN_DIR` (see trainer/__main__.py). Only rank 0 writes
events and checkpoints; every decision to stop is agreed across ranks.
"""

from __future__ import annotations

import gc
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer.base.lock import LockError, RunLock
from trainer.config.reasons import Refusal
from trainer.config.run_config import (
    ConfigError,
    RunConfig,
    lean_mode,
    load,
    parameter_count,
    smaller_batch,
)
from trainer.model.gpt import GPT, count_parameters
from trainer.parallel.distributed import World, init_world, shutdown, sum_across, sum_tensor
from trainer.plan import cuda_build
from trainer.plan.fit import fastest_fitting, verdict
from trainer.plan.planner import Plan
from trainer.plan.preflight import DataError, check_data, check_resume
from trainer.run import awake, wrapping
from trainer.run.control import Control, Options, TrainingFailure
from trainer.run.data import Prefetcher, PreparedData, eval_offsets, open_prepared
from trainer.run.events import EventLog, OutputError, say
from trainer.run.hardware import plan_here
from trainer.run.samples import Sampler
from trainer.state import checkpoint as ckpt
from trainer.state.checkpoint_index import LATEST, CheckpointError, file_sha256
from trainer.step import compiling
from trainer.step.memory import StepMemory, model_tensors, optimizer_tensors
from trainer.step.optim import Schedule, autocast
from trainer.step.step import train_step
from trainer.text.tokenizer import TokenizerError

EXIT_OK, EXIT_CONFIG, EXIT_TRAINING = 0, 2, 3


def pick_device(requested: str, world: World) -> torch.device:
    """A card this torch cannot drive (a CPU build, a driver too old, no code for its
    architecture) refuses the run before training with the line that says what to install:
    with --device auto too, a run is never trained on the CPU while a card waits."""
    try:
        kind, fallback = cuda_build.pick(requested)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if fallback:
        raise ConfigError(fallback + " (or train on the CPU: --device cpu)")
    return torch.device("cuda", world.local_rank) if kind == "cuda" else torch.device("cpu")


def fmt_int(n: int) -> str:
    return f"{n:,}"


class Trainer:
    def __init__(self, cfg: RunConfig, opts: Options, world: World, device: torch.device) -> None:
        self.cfg, self.opts, self.world, self.device = cfg, opts, world, device
        t = cfg.training
        self.events = EventLog(opts.run_dir / "events.jsonl" if world.is_main else None, echo=world.is_main)
        self.control = Control(opts.run_dir, t.limit_min * 60, opts.stop_at_step)
        # What this run executes here (trainer/plan/planner.py), decided by take_plan() before
        # anything is built; the choices below are its.
        self.plan: Plan | None = None
        self.precision = "fp32"
        self.sharding = "none"  # "ddp" or "fsdp" over processes
        self.accumulation = 1  # micro-steps per optimizer step (training.tokens_per_step)
        self.tokens_per_step = t.batch_per_card * world.size * cfg.model.context
        self.data: PreparedData | None = None
        self.step = 0
        self.tokens_seen = 0
        self.resumed_from: str | None = None
        self.data_changed = False
        self.trained = False  # a step ran in this process
        self.last_good: tuple[str, str] | None = None  # (path, sha256) of the newest checkpoint
        # The step the newest checkpoint holds, known on every process (last_good is the
        # first rank's): a sharded save is collective, so every rank must agree on it.
        self.saved_step: int | None = None
        # Each step's memory, its peak the highest over every step so far (trainer.step.memory).
        self.memory = StepMemory(device)
        self.sampler: Sampler | None = None  # samples during training (trainer.run.samples)
        self.compiled: compiling.CompiledStep | None = None  # when the plan compiles

    # ---- set-up -------------------------------------------------------------------------
    def take_plan(self) -> None:
        """Decide what this run executes on this machine (trainer/plan/planner.py; emit_start logs
        every choice with its reason); a refusal is a ConfigError (one line, exit 2) before
        anything is read or built."""
        decided = plan_here(self.cfg, self.device, self.world)
        self.plan = decided
        self.precision, self.sharding = decided.precision.value, decided.sharding.value
        self.accumulation = decided.micro_steps.value
        t = self.cfg.training
        self.tokens_per_step = self.accumulation * t.batch_per_card * self.world.size * self.cfg.model.context

    def build(self) -> None:
        """The model and the parts the step runs with, as the plan says."""
        cfg, t, p = self.cfg, self.cfg.training, self.plan
        assert p is not None, "take_plan() first"
        if t.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.cudnn.benchmark = False
        if p.lean and p.step.value != "one_pass":  # before anything is built: a library that fails here is one line, exit 2
            from trainer.step.lean import check_device

            check_device(self.device)
        self.model = GPT(cfg.model, p.economical.value)
        self.model.init_weights(t.seed)
        self.model.to(self.device)
        self.params = count_parameters(self.model)
        assert self.params == parameter_count(cfg.model), "model and formula disagree"
        parts = wrapping.build_parts(self.model, p, t, self.device)
        self.module, self.optimizer, self.scaler = parts.module, parts.optimizer, parts.scaler
        for note in parts.notes:
            self.say(note)
        if p.compile.value == "on":
            self.compiled = compiling.CompiledStep(self.module, self.compile_failed,
                                                   lambda: self.optimizer.zero_grad(set_to_none=True))
            self.say(f"compile: on (torch.compile, backend {compiling.backend()}; the first step compiles)")
        self.schedule = Schedule.fresh(t)

    def compile_failed(self, why: str) -> None:
        self.warn("compile_failed", f"torch.compile failed at the first step ({why}); training goes on without "
                  "compilation (set training.compile to \"off\" to skip the attempt)")

    def open_data(self) -> None:
        self.data = open_prepared(self.cfg.data.dir)
        check_data(self.cfg, self.data.folder)
        assert self.plan is not None, "take_plan() first"
        if self.world.is_main and self.plan.samples.value == "on":
            try:
                self.sampler = Sampler.open(self.data.dir, self.data.val, self.cfg.training, self.cfg.model.vocab)
            except TokenizerError as e:  # samples are a view, not the training: go on without
                self.say(f"warning: no samples during training: {e}")

    def restore(self, spec: str) -> None:
        if spec == LATEST:
            path, state, passed_over = ckpt.load_latest(self.opts.run_dir)
        else:
            path, passed_over = ckpt.resolve(self.opts.run_dir, spec), []
            state = ckpt.load(path, whole=False)  # a DCP one's tensors: wrapping.load_tensors
        # Its run and step, model, tokenizer and step against steps_to: the lab's pre-check too.
        older = check_resume(self.cfg, path, state, self.data.tokenizer_sha256 if self.data else None)
        if older:
            self.say(f"note: {older}")
        wrapping.load_tensors(self, state, path)
        self.scaler.load_state_dict(state["scaler"])
        ckpt.set_rng_state(state["rng"])
        self.step = int(state["step"])
        self.tokens_seen = int(state["tokens_seen"])
        self.schedule = Schedule(**state["schedule"]).restretched(self.step, self.cfg.training.steps_to)
        self.data_changed = self.data is not None and state["data"]["data_id"] != self.data.data_id
        self.resumed_from = str(path)
        self.last_good = (str(path), file_sha256(path))
        self.saved_step = self.step
        for note in passed_over:  # said, not hidden: the run goes on from an older step
            self.warn("checkpoint_skipped", f"{note}; resuming from {path.name}, the newest intact checkpoint")

    def warn(self, kind: str, message: str) -> None:
        """Something the run goes on despite: a `warning` event and a log line."""
        self.events.emit("warning", self.step, kind=kind, message=message)
        self.say(f"warning: {message}")

    def load_optimizer(self, state: dict[str, Any], path: Path) -> None:
        """The optimizer's state, converted when the checkpoint was saved in another
        combination (normal AdamW ↔ the lean 8-bit state), and said in the log."""
        saved_lean = "lean" in state["optimizer"]
        mine = lean_mode(self.cfg.training.lean_state)
        mine_lean = mine != "off"
        saved_kind = state["optimizer"]["lean"].get("kind", "8-bit") if saved_lean else "adamw"
        mine_kind = {"off": "adamw", "one_pass": "one_pass"}.get(mine, "8-bit")
        if saved_lean and not mine_lean:
            from trainer.step.lean import adamw_state_from_lean

            self.optimizer.load_state_dict(adamw_state_from_lean(state["optimizer"], self.optimizer))
            how = ("8-bit moments dequantized to fp32 AdamW" if saved_kind == "8-bit" else
                   "one-pass moments made fp32 AdamW's (m dequantized, v = r cᵀ / mean(r))")
            self.say(f"checkpoint {path.name} was saved with lean_state: {how}")
            return
        self.optimizer.load_state_dict(state["optimizer"])
        if "one_pass" in (saved_kind, mine_kind) and saved_kind != mine_kind:
            self.say(f"checkpoint {path.name} was saved with {saved_kind} moments: converted to {mine_kind}'s "
                     "(the one-pass state's second moment factored into row and column means, or made whole); "
                     + ("the first step primes its clipping with a norm-only backward pass"
                        if mine_kind == "one_pass" else "the first step is clipped exactly"))
            return
        if mine_lean and not saved_lean:
            self.say(f"checkpoint {path.name} was saved without lean_state: moments quantized to 8 bits, "
                     f"weights kept in {'bf16' if self.precision == 'bf16' else 'fp32'}; "
                     "the first step after it is not clipped (no previous gradient norm)")

    # ---- events --------------------------------------------------------------------------
    def say(self, message: str) -> None:
        """A line for trainer.log from the first rank only: every rank knows the same
        things, and two processes writing one log interleave their lines."""
        if self.world.is_main:
            say(message)

    def say_error(self, message: str) -> None:
        """A failure from any rank, named when there are several (the ranks may differ)."""
        say(f"[rank {self.world.rank}] {message}" if self.world.active else message)

    def emit_start(self) -> None:
        assert self.plan is not None
        for line in ["plan:", *self.plan.lines()]:  # every choice with its reason
            self.say(line)
        self.say(f"parameters: {fmt_int(self.params)}")
        self.say(
            f"device: {self.device} × {self.world.size}, precision {self.precision}, "
            f"{fmt_int(self.tokens_per_step)} tokens per step"
            + (f" ({self.accumulation} micro-steps of {fmt_int(self.tokens_per_step // self.accumulation)})"
               if self.accumulation > 1 else "")
            + (f", resumed from {self.resumed_from} at step {self.step}" if self.resumed_from else "")
        )
        self.events.emit(
            "start",
            self.step,
            params=self.params,
            config=self.cfg.to_dict(),
            device=str(self.device.type),
            world_size=self.world.size,
            precision=self.precision,
            tokens_per_step=self.tokens_per_step,
            accumulation=self.accumulation,
            resumed_from=self.resumed_from,
            data_id=self.data.data_id if self.data else None,
            data_changed=self.data_changed,
            economical=self.plan.economical.value,
            lean_state=lean_mode(self.cfg.training.lean_state),
            sharding=self.sharding,
            compile=self.plan.compile.value,
            step_kind=self.plan.step.value,
            # Every choice with its reason, and what the parts built from it are.
            plan=self.plan.as_json(),
            built=wrapping.describe(self.module, self.optimizer, self.scaler, self.compiled, self.sampler),
            pid=os.getpid(),
        )

    # ---- checkpoints ---------------------------------------------------------------------
    def save(self) -> None:
        if self.sharding != "fsdp" and not self.world.is_main:
            return
        assert self.data is not None
        payload = {
            "format": ckpt.FORMAT,
            "step": self.step,
            "run_id": self.opts.identity,  # whose step this is: checked against its folder on load
            "tokens_seen": self.tokens_seen,
            "params": self.params,
            "scaler": self.scaler.state_dict(),
            "schedule": self.schedule.to_dict(),
            "rng": ckpt.rng_state(),
            "config": self.cfg.to_dict(),
            "data": {"data_id": self.data.data_id, "tokenizer_sha256": self.data.tokenizer_sha256, "dir": str(self.data.dir)},
            "world_size": self.world.size,
            "precision": self.precision,
            "time": time.time(),
        }
        try:
            if self.sharding == "fsdp":  # every process writes its shards (DCP)
                saved = wrapping.save_sharded(self, payload)
                if saved is None:  # another rank's part of the collective save
                    self.saved_step = self.step
                    return
                path, sha = saved
            else:
                payload.update(model=self.model.state_dict(), optimizer=self.optimizer.state_dict())
                path, sha = ckpt.save(self.opts.run_dir, self.step, payload, self.cfg.training.keep_checkpoints)
        except ckpt.SaveError as e:
            earlier = self.last_good[0] if self.last_good else None
            raise TrainingFailure(
                "other", str(e),
                f"the earlier checkpoint {earlier} is intact: continue from it (--resume {earlier}) once there is room"
                if earlier else "no earlier checkpoint exists: start again once there is room",
            ) from None
        self.last_good = (str(path), sha)
        self.saved_step = self.step
        self.events.emit("checkpoint", self.step, path=str(path), sha256=sha)

    def saved_at_this_step(self) -> bool:
        return self.saved_step == self.step

    def trained_since_save(self) -> bool:
        """Whether the model holds steps no checkpoint has (worth saving before an exit)."""
        return hasattr(self, "model") and self.data is not None and self.trained and not self.saved_at_this_step()

    def state_sha256(self) -> str:
        return wrapping.full_state_sha256(self)

    # ---- evaluation ----------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> None:
        assert self.data is not None
        n, batch = self.cfg.model.context, self.cfg.training.batch_per_card
        offsets = eval_offsets(len(self.data.val), n, self.cfg.training.eval_segments)
        losses = torch.zeros(len(offsets), dtype=torch.float64, device=self.device)
        mine = np.arange(len(offsets))[self.world.rank :: self.world.size]
        self.model.eval()
        for i in range(0, len(mine), batch):
            idx = mine[i : i + batch]
            rows = np.stack([np.asarray(self.data.val[o : o + n + 1], dtype=np.int64) for o in offsets[idx]])
            t = torch.from_numpy(rows).to(self.device)
            with autocast(self.precision, self.device):
                seg = self.model.segment_losses(t[:, :-1], t[:, 1:])
            losses[torch.from_numpy(idx).to(self.device)] = seg.double()
        self.model.train()
        losses = sum_tensor(self.world, losses).cpu().numpy()
        mean = float(losses.mean())
        half = 1.96 * float(losses.std(ddof=1)) / math.sqrt(len(losses)) if len(losses) > 1 else float("nan")
        self.events.emit("eval", self.step, val_loss=mean, val_ci95=[mean - half, mean + half], segments=len(losses))
        self.say(f"step {self.step}: val loss {mean:.4f} ± {half:.4f} on {len(losses)} segments")

    def write_samples(self) -> None:
        """`sample` events (outside the step's timing; the training's RNG is not used)."""
        assert self.sampler is not None
        try:
            with autocast(self.precision, self.device):
                samples = self.sampler.run(self.model, self.precision)
        except RuntimeError as e:  # e.g. out of memory on a full card: the training goes on
            self.say(f"warning: samples at step {self.step} skipped: {str(e).splitlines()[0][:200]}")
            return
        for i, sample in enumerate(samples):
            self.events.emit("sample", self.step, index=i, **sample)
        self.say(f"step {self.step}: sample: {samples[0]['prompt']}|{samples[0]['text'][:120]!r}")

    # ---- the loop ------------------------------------------------------------------------
    def memory_mb(self) -> tuple[float | None, float | None]:
        return self.memory.alloc_mb, self.memory.peak_mb

    def run_step(self, batch: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        t, kind = self.cfg.training, self.plan.step.value  # the plan's step kind (trainer/step/step.py)
        args = (self.optimizer, self.scaler, batch, self.schedule.at(self.step), self.precision, self.device, t.grad_clip)

        def step(module: torch.nn.Module) -> torch.Tensor:
            return train_step(module, *args, kind=kind)

        def alive() -> list[torch.Tensor]:  # what lives before the step, for the CPU's count
            return [*model_tensors(self.model), *optimizer_tensors(self.optimizer), *(x for b in batch for x in b)]

        # (Not counted with DTensor shards, nor compiled: dynamo never compiles a function
        # first called under the counting dispatch mode.)
        return self.memory.step(lambda: self.step_with(step), alive,
                                measure=self.sharding != "fsdp" and not self.compiling())

    def compiling(self) -> bool:
        """The step runs compiled (the plan's compile on, and no failure at the first step)."""
        return self.compiled is not None and not self.compiled.failed

    def step_with(self, step: Any) -> torch.Tensor:
        """`step(module)` with the compiled module where the plan compiles (made at the
        first step, eager from then on if that failed), else with the eager one."""
        if self.compiled is None:
            return step(self.module)
        return self.compiled.run(step)

    def wait_while_paused(self) -> None:
        pause = self.opts.run_dir / "PAUSE"
        if not pause.exists():
            return
        started = time.monotonic()
        self.say("paused: RUN_DIR/PAUSE exists (the heat guard or the user); waiting")
        while pause.exists() and self.control.local_reason(self.step) is None:
            time.sleep(0.5)
        self.events.emit("pause", self.step, seconds=round(time.monotonic() - started, 1))

    def train(self) -> str:
        assert self.data is not None
        t, n = self.cfg.training, self.cfg.model.context
        fetch = Prefetcher(self.data.train, n, t.batch_per_card, t.seed, self.world.rank, self.device,
                           world_size=self.world.size, accumulation=self.accumulation)
        last_save = time.monotonic()
        while True:
            reason = self.control.local_reason(self.step)
            if self.step >= t.steps_to:
                reason = "steps_reached"
            # A periodic checkpoint is due by each process's own clock; the ranks agree on
            # it in the same all-reduce as on stopping (a sharded save is collective: a rank
            # saving alone would wait for the others forever).
            due = self.trained_since_save() and time.monotonic() - last_save >= t.checkpoint_every_min * 60
            flags = sum_across(self.world, [1.0 if reason else 0.0, 1.0 if due else 0.0], self.device)
            if flags[0] > 0:
                return reason or "stopped"
            if flags[1] > 0:
                self.save()
                last_save = time.monotonic()
            self.wait_while_paused()
            began = time.perf_counter()
            try:
                loss = self.run_step(fetch.get_step(self.step))
                loss_value = sum_across(self.world, [float(loss)], self.device)[0] / self.world.size
            except torch.OutOfMemoryError as e:
                raise self.oom(e) from None
            except RuntimeError as e:
                if "out of memory" in str(e) or "can't allocate memory" in str(e):
                    raise self.oom(e) from None
                raise
            if not math.isfinite(loss_value):
                raise TrainingFailure(
                    "nan",
                    f"the loss became {loss_value} at step {self.step + 1}",
                    f"lower the learning rate (training.lr {t.lr:g} → {t.lr / 3:.2g}) and continue from the last checkpoint",
                )
            elapsed = time.perf_counter() - began
            lr = self.schedule.at(self.step)
            self.step += 1
            self.trained = True
            self.tokens_seen += self.tokens_per_step
            alloc, peak = self.memory_mb()
            self.events.emit(
                "step",
                self.step,
                loss=round(loss_value, 6),
                lr=lr,
                tokens_seen=self.tokens_seen,
                step_ms=round(elapsed * 1000, 3),
                tokens_per_s=round(self.tokens_per_step / elapsed, 1),
                mem_alloc_mb=None if alloc is None else round(alloc, 1),
                mem_peak_mb=None if peak is None else round(peak, 1),
            )
            if self.step % t.eval_every == 0 or self.step == t.steps_to:
                self.evaluate()
            if self.sampler is not None and self.sampler.due(self.step, t.steps_to):
                self.write_samples()

    def batch_one_advice(self) -> str:
        """What to change when batch 1 does not fit: recomputation cannot help when the
        training state is what does not fit, so the advice names the combination the
        memory model says fits with the least arithmetic (trainer/plan/fit.py), if any."""
        best = fastest_fitting(self.cfg, self.plan.machine) if self.plan is not None else None
        if best is None:
            return ("batch 1 does not fit, and by the estimate no combination of training.economical and "
                    "training.lean_state does: lower model.context or the model size")
        p = best.plan
        if (p.economical.value, p.step.value) == (self.plan.economical.value, self.plan.step.value):
            return (f"batch 1 does not fit, though the estimate gives this combination {best.needed_mb:,.0f} MiB of "
                    f"the card's {best.card_mb:,.0f}: lower model.context or the model size")
        return (f"batch 1 does not fit: by the estimate the fastest combination that fits is training.economical "
                f"\"{p.economical.value}\", training.lean_state \"{p.step.asked}\" ({best.needed_mb:,.0f} MiB of the "
                f"card's {best.card_mb:,.0f}); or lower model.context or the model size")

    def check_memory(self) -> None:
        """The plan's memory against this card before the first step (trainer/plan/fit.py).
        A plan the estimate says does not fit still runs (the estimate is one, within a few
        per cent of the count: docs/PERF.md), with a warning naming what would fit."""
        if self.device.type != "cuda" or self.plan is None:
            return
        said = verdict(self.cfg, self.plan)
        if isinstance(said, Refusal):
            self.warn("memory_short", said.text())

    def oom(self, error: Exception) -> TrainingFailure:
        batch = self.cfg.training.batch_per_card
        suggested = smaller_batch(batch, self.accumulation)
        more = self.accumulation * batch // suggested
        advice = (
            f"lower training.batch_per_card from {batch} to {suggested} and keep training.tokens_per_step "
            f"{self.tokens_per_step} ({more} micro-steps instead of {self.accumulation}: the same optimisation)"
            if batch > 1
            else self.batch_one_advice()
        )
        return TrainingFailure("oom", f"out of memory at step {self.step + 1}: {str(error).splitlines()[0][:300]}", advice,
                               suggested_batch=suggested, tokens_per_step=self.tokens_per_step,
                               suggested_accumulation=more)


def run(opts: Options) -> int:
    """Train as run.json says; returns the process exit code."""
    cfg = load(opts.run_dir / "run.json")
    if cfg.training.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    device_type = "cpu" if opts.device == "cpu" or not torch.cuda.is_available() else "cuda"
    world = init_world(device_type)
    code: int | None = None
    trainer: Trainer | None = None
    lock = RunLock(opts.run_dir)
    try:
        device = pick_device(opts.device, world)
        _lock_run(lock, world, device)
        try:
            trainer = Trainer(cfg, opts, world, device)
        except OutputError as e:  # events.jsonl cannot be opened (a folder in its place)
            say(f"error: {e}")
            return EXIT_CONFIG
        code = _run(trainer, opts)
        return code
    finally:
        # The end is written: the folder is free for the next trainer (a continuation in
        # place) at once, not after the teardown below, which a loaded machine stretches.
        lock.release()
        if trainer is not None:
            trainer.events.close()
        # The DDP wrapper (its reducer) holds the process group: freed here, before the
        # group is left, not by the interpreter's exit after it, where gloo's threads then
        # died unjoined and aborted a finished rank now and then (shutdown's note).
        trainer = None
        gc.collect()
        shutdown(world, together=code == EXIT_OK)


def _lock_run(lock: RunLock, world: World, device: torch.device) -> None:
    """Rank 0 takes the run folder's lock before anything is written there; every rank
    learns whether it got it, so that all of them stop together when it did not."""
    problem: LockError | None = None
    if world.is_main:
        try:
            lock.acquire()
        except LockError as e:
            problem = e
    refused = sum_across(world, [1.0 if problem else 0.0], device)[0] > 0
    if refused:
        raise problem or LockError("rank 0 could not lock the run folder (see its message)")


def _run(trainer: Trainer, opts: Options) -> int:
    try:
        return _run_steps(trainer, opts)
    except OutputError as e:
        return _output_failed(trainer, e)


def _run_steps(trainer: Trainer, opts: Options) -> int:
    cfg = trainer.cfg
    try:
        trainer.take_plan()
        if not opts.dry_run or cfg.data.dir:
            trainer.open_data()
        trainer.build()
        resume = opts.resume or cfg.resume_from
        if resume and not opts.dry_run:
            trainer.restore(resume)
    except (ConfigError, DataError, CheckpointError) as e:
        kind = "data" if isinstance(e, DataError) else "other"
        report_failure(trainer, kind, str(e), "fix run.json or the data as the message says")
        trainer.say_error(f"error: {e}")
        return EXIT_CONFIG
    trainer.emit_start()
    if opts.dry_run:
        return EXIT_OK
    trainer.check_memory()
    trainer.control.install_signals()
    # The PC kept awake while this process trains, by its main thread; gone with the process.
    keep = awake.hold(f"training {trainer.cfg.name}") if trainer.world.is_main else awake.Hold(False)
    if trainer.world.is_main:
        trainer.events.emit("awake", trainer.step, **keep.as_event())
    try:
        reason = trainer.train()
        # The final save fails like one during training (a full disk): inside the same try.
        if not trainer.saved_at_this_step():
            trainer.save()
    except TrainingFailure as f:
        report_failure(trainer, f.kind, f.message, f.advice, **f.extra)
        trainer.say_error(f"error: {f.message}. {f.advice}")
        return EXIT_TRAINING
    except OutputError:
        raise
    except Exception as e:  # the event stream must say what happened, whatever it was
        report_failure(trainer, "other", f"{type(e).__name__}: {e}", "see trainer.log for the traceback")
        raise
    finally:
        keep.release()
    sha = trainer.state_sha256()
    messages = {
        "steps_reached": f"reached step {trainer.step}",
        "time_limit": f"stopped by the time limit at step {trainer.step}",
        # Which request: a STOP file left from an earlier run stops a new one at once, and
        # the line should say why.
        "stopped": f"stopped on request at step {trainer.step}"
        + (" (RUN_DIR/STOP exists)" if (opts.run_dir / "STOP").exists() else " (a signal)"),
    }
    trainer.events.emit("end", trainer.step, reason=reason, state_sha256=sha, message=messages[reason])
    trainer.say(f"end: {messages[reason]}; state sha256 {sha}")
    return EXIT_OK


def _output_failed(trainer: Trainer, error: OutputError) -> int:
    """events.jsonl or the log could not be written (a full disk): handled like a failed
    checkpoint. The work since the last checkpoint is saved if there is room for it (a
    checkpoint may fit where a log line did not), then what can still be said is said.
    Not under FSDP: only rank 0 writes events, and its shards' save is collective — the
    other ranks, still training, would never join it and both would wait forever."""
    if trainer.trained_since_save() and trainer.sharding != "fsdp":
        try:
            trainer.save()
        except TrainingFailure:
            pass  # no room for it either: the earlier checkpoint stays the one to go on from
    intact = trainer.last_good[0] if trainer.last_good else None
    advice = (
        f"free disk space, then continue from checkpoint {intact} (--resume latest)"
        if intact else "free disk space, then start the run again"
    )
    report_failure(trainer, "other", str(error), advice)
    trainer.say_error(f"error: {error}. {advice}")
    return EXIT_TRAINING


def report_failure(trainer: Trainer, kind: str, message: str, advice: str, **extra: Any) -> None:
    checkpoint = trainer.last_good[0] if trainer.last_good else None
    trainer.events.emit("error", trainer.step, kind=kind, message=message, advice=advice, checkpoint=checkpoint, **extra)
    trainer.events.emit("end", trainer.step, reason="error", state_sha256=None, message=message)
