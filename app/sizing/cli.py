"""`ternit estimate`: the sizing panel without the window (the same numbers, same dict).

    ternit estimate --layers 8 --width 512 --heads 8 --context 1024 --vocab 4000 --batch 6 \
        --gpu t4x2 --steps-to 20000 [--limit-min 630] [--data-tokens N] [--json] \
        [--economical [off|selective|full|auto]] [--lean-state off|on|fused|offload]
        [--sharding [auto|ddp|fsdp]] [--precision P] [--compile auto|on|off]
    ternit estimate --plateau RUN_DIR [--json]     # has validation reached a plateau?

Measured runs in the lab's runs folder (or --runs DIR) calibrate speed and memory unless
--no-measured is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trainer.config.run_config import (
    COMPILE_MODES,
    ECONOMICAL_LEVELS,
    LEAN_MODES,
    PRECISIONS,
    SHARDING_MODES,
)

from ..base.cli_args import Parser
from ..base.i18n import current_language, t
from ..base.numbers import count_text, decimal_text, duration_text, int_text, mb_text
from ..base.plan_texts import plan_rows
from ..data.library import LibraryError
from .advice import ROW_KINDS, time_parts
from .estimate import estimate
from .gpus import GPUS
from .history import measured_from_run_dir, measured_runs, read_events
from .plateau import plateau
from .result import Estimate


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="ternit estimate", description=t(
        "Оценка весов, скорости, памяти и данных для прогона. Замеры прошлых прогонов (папка "
        "прогонов лаборатории или --runs) уточняют скорость и память, если не дан --no-measured.",
        "Weights, speed, memory and data estimates for a run. Measured runs (the lab's runs "
        "folder, or --runs) calibrate speed and memory unless --no-measured is given."))
    p.add_argument("--layers", type=int, default=8, metavar="N", help=t("слои (8)", "layers (8)"))
    p.add_argument("--width", type=int, default=512, metavar="D", help=t("ширина d (512)", "width d (512)"))
    p.add_argument("--heads", type=int, default=8, metavar="N", help=t("головы (8)", "heads (8)"))
    p.add_argument("--context", type=int, default=1024, metavar="N",
                   help=t("контекст n, токенов (1024)", "context n, tokens (1024)"))
    p.add_argument("--vocab", type=int, default=None, metavar="N",
                   help=t("размер словаря (4000, или словарь данных --constellations)",
                          "vocabulary size (4000, or the --constellations data's)"))
    p.add_argument("--batch", type=int, default=6, metavar="N", help=t("батч на карту (6)", "batch per card (6)"))
    p.add_argument("--gpu", choices=list(GPUS), default="t4x2",
                   help=t("видеокарта (t4x2: Kaggle 2×T4)", "GPU (t4x2: Kaggle's 2×T4)"))
    p.add_argument("--steps-to", type=int, default=20000, metavar="N",
                   help=t("«Шагов до» (20000)", "«Steps to» (20000)"))
    p.add_argument("--start-step", type=int, default=0, metavar=t("ШАГ", "STEP"),
                   help=t("с этого шага начинает продолженный прогон", "a continued run starts here"))
    p.add_argument("--limit-min", type=float, default=None, metavar=t("МИН", "MIN"),
                   help=t("лимит времени, минут", "time limit, minutes"))
    p.add_argument("--data-tokens", type=int, default=None, metavar="N",
                   help=t("токенов в данных (для совета о размере)", "tokens of data (for the size advice)"))
    p.add_argument("--constellations", default=None, metavar="A,B",
                   help=t("посчитать данные этих созвездий (подготовленные найдутся или подготовятся)",
                          "count these constellations' data (found prepared, or prepared now)"))
    p.add_argument("--economical", nargs="?", const="selective", default="off",
                   choices=(*ECONOMICAL_LEVELS, "auto"),
                   help=t("пересчёт активаций (selective, если без значения, или full); auto — весь "
                          "экономный режим: самое быстрое сочетание пересчёта и облегчённого состояния, "
                          "что помещается на карту",
                          "activation recompute (selective when given alone, or full); auto: the whole "
                          "economical mode, the fastest combination of recompute and lean state that "
                          "fits the card"))
    p.add_argument("--lean-state", choices=LEAN_MODES, default="off",
                   help=t("облегчённое состояние: on — моменты в 8 битах, веса и градиенты в bf16; fused — "
                          "без градиентов (второй обратный проход); offload — fused и моменты в памяти ПК (off)",
                          "lean state: on, 8-bit moments, bf16 weights and gradients; fused, no "
                          "gradients held (a second backward pass); offload, fused with the moments in host "
                          "memory (off)"))
    p.add_argument("--sharding", nargs="?", const="fsdp", default="auto", choices=SHARDING_MODES,
                   help=t("как карты цели делят состояние (training.sharding): auto, ddp или fsdp — "
                          "разделить (FSDP2; так и без значения)",
                          "how the target's cards share the state (training.sharding): auto, ddp, or "
                          "fsdp: sharded (FSDP2; also when given alone)"))
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help=t("точность вычислений (auto)", "precision (auto)"))
    p.add_argument("--compile", choices=COMPILE_MODES, default="auto",
                   help=t("torch.compile (training.compile; auto)", "torch.compile (training.compile; auto)"))
    p.add_argument("--card-memory-mb", type=float, default=None, metavar="MIB",
                   help=t("своя память карты вместо известной (МиБ)", "override the card's memory (MiB)"))
    p.add_argument("--runs", type=Path, default=None, metavar=t("ПАПКА", "DIR"),
                   help=t("папка замеренных прогонов (по умолчанию лаборатории)",
                          "folder of measured runs (default: the lab's)"))
    p.add_argument("--no-measured", action="store_true",
                   help=t("не учитывать замеренные прогоны", "ignore measured runs"))
    p.add_argument("--plateau", type=Path, default=None, metavar=t("ПАПКА_ПРОГОНА", "RUN_DIR"),
                   help=t("вместо оценки: вышла ли валидация прогона на плато",
                          "judge a run's validation curve instead"))
    p.add_argument("--lang", choices=("ru", "en"), default=None,
                   help=t("язык вывода (по умолчанию язык интерфейса)",
                          "output language (default: the interface's)"))
    p.add_argument("--json", action="store_true", help=t("вывести один объект JSON", "print one JSON object"))
    return p


def _plateau_of(run_dir: Path, data_tokens: int | None, lang: str) -> dict[str, Any]:
    events = read_events(run_dir / "events.jsonl")
    points = []
    for e in events:
        if e.get("event") == "eval" and isinstance(e.get("val_loss"), (int, float)):
            ci = e.get("val_ci95") or [None, None]
            points.append((e["step"], e["val_loss"], ci[0], ci[1]))
    params = next((e.get("params") for e in events if e.get("event") == "start"), None)
    return plateau(points, params=params, data_tokens=data_tokens, lang=lang)


MEMORY_ROWS = (
    ("weights", "веса", "weights"), ("gradients", "градиенты", "gradients"),
    ("optimizer", "оптимизатор (моменты AdamW)", "optimizer (AdamW's moments)"),
    ("optimizer_host", "оптимизатор в памяти ПК", "optimizer in host memory"),
    ("ddp_buckets", "буферы DDP", "DDP buckets"), ("sharded_buffers", "буферы FSDP2", "FSDP2 buffers"),
    ("autocast_copies", "16-битные копии весов", "16-bit weight copies"),
    ("activations", "активации", "activations"), ("loss_and_recompute", "потери / пересчёт", "loss / recompute"),
    ("allocated_peak", "пик, выделяет программа", "peak the program allocates"),
    ("framework", "фреймворк (контекст CUDA, кэш)", "framework (CUDA context, cache)"),
    ("total", "всего на карте", "total on the card"),
)


def human(e: Estimate, lang: str) -> str:
    speed_note = "" if e.is_measurement else t(" — оценка", " — an estimate", lang)
    rows = [
        (t("Весов", "Weights", lang), int_text(e.params, lang)),
        (t("Вычислений на токен", "FLOPs per token", lang), count_text(e.flops_per_token, lang)),
        (t("Токенов за шаг", "Tokens per step", lang), int_text(e.tokens_per_step, lang)),
        (t("Скорость, токенов/с", "Speed, tokens/s", lang),
         f"{int_text(round(e.tokens_per_s), lang)}  ({e.tokens_per_s_source})"),
        (t("Время", "Time", lang), duration_text(e.seconds_to_steps, lang) + speed_note
         + f"  ({time_parts(e, lang)})"),
        (t("Лимит остановит на шаге", "Limit stops at step", lang),
         "—" if e.limit_stops_at_step is None else int_text(e.limit_stops_at_step, lang)),
        (t("Экономный режим", "Economical mode", lang),
         e.combination.text(lang) + (t(" (подобрано)", " (picked)", lang) if e.auto else "")),
    ]
    for key, ru, en in MEMORY_ROWS:
        value = getattr(e.memory, key)
        if value:
            rows.append((t("Память: ", "Memory: ", lang) + t(ru, en, lang), mb_text(value, lang)))
    card = "—" if e.card_memory_mb is None else mb_text(e.card_memory_mb, lang)
    rows.append((t("Память карты", "Card memory", lang), card))
    fits = {True: t("да", "yes", lang), False: t("нет", "no", lang), None: "?"}[e.fits]
    if e.max_batch is None:
        best = ""
    elif e.max_batch == 0:  # the weights and optimizer alone overflow the card
        best = t(" (даже батч 1 не помещается)", " (not even batch 1 fits)", lang)
    else:
        best = t(f" (наибольший батч {e.max_batch})", f" (largest batch {e.max_batch})", lang)
    rows.append((t("Помещается", "Fits", lang), fits + best))
    # What the trainer runs there, and why (its micro-steps are the tokens per step's row).
    for label, value, why in plan_rows(e.plan, lang, leave_out=("micro_steps",)):
        rows.append((t("План: ", "Plan: ", lang) + label, f"{value}  ({why})"))
    if e.tokens_per_weight is not None:
        rows.append((t("Токенов на вес", "Tokens per weight", lang), decimal_text(e.tokens_per_weight, 1, lang)))
    width = max(len(r[0]) for r in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines.append("")
    lines += [f"• {a}" for a in e.advice_texts(ROW_KINDS)]  # speed, time and limit: rows above
    return "\n".join(lines)


def _prepared(args: argparse.Namespace, lang: str):
    """The prepared data of --constellations (prepared now when there is none); which
    folder is said on stderr, so the counted tokens can be traced."""
    from ..data.for_run import data_for
    from ..data.progress import progress_for_cli

    names = [n.strip() for n in args.constellations.split(",") if n.strip()]
    bar = progress_for_cli()
    try:
        prep, fresh = data_for(names, context=args.context, vocab=args.vocab, progress=bar)
    finally:
        bar.close()
    how = t("подготовлены сейчас", "prepared now", lang) if fresh else t("подготовлены раньше", "prepared before", lang)
    print(t(f"данные: {prep.dir} ({how}), {int_text(prep.train_tokens, lang)} токенов для обучения",
            f"data: {prep.dir} ({how}), {int_text(prep.train_tokens, lang)} training tokens", lang), file=sys.stderr)
    return prep


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    lang = args.lang or current_language()
    if args.plateau is not None:
        if not (args.plateau / "events.jsonl").is_file():
            print(t(f"ternit estimate: в {args.plateau} нет events.jsonl — укажите папку прогона",
                    f"ternit estimate: {args.plateau} has no events.jsonl — give a run folder", lang), file=sys.stderr)
            return 2
        res = _plateau_of(args.plateau, args.data_tokens, lang)
        print(json.dumps(res, ensure_ascii=False) if args.json else "\n".join(res["advice"]))
        return 0
    measured: list[dict[str, Any]] = []
    if not args.no_measured:
        root = args.runs
        if root is not None and (root / "events.jsonl").is_file():  # one run folder
            one = measured_from_run_dir(root)
            measured = [one] if one else []
        else:
            measured = measured_runs(root)
    data_tokens, vocab = args.data_tokens, args.vocab
    if args.constellations:
        try:
            prep = _prepared(args, lang)
        except LibraryError as err:
            print(f"ternit estimate: {err}", file=sys.stderr)
            return err.exit_code
        data_tokens = data_tokens or prep.train_tokens
        vocab = vocab or prep.vocab
    try:
        e = estimate(
            layers=args.layers, width=args.width, heads=args.heads, context=args.context,
            vocab=vocab or 4000, batch=args.batch, gpu=args.gpu, steps_to=args.steps_to,
            start_step=args.start_step, limit_min=args.limit_min, data_tokens=data_tokens,
            economical=args.economical, lean_state=args.lean_state, sharding=args.sharding,
            precision=args.precision, compile=args.compile, measured=measured, lang=lang, card_memory_mb=args.card_memory_mb,
        )
    except ValueError as err:  # estimate() words its errors in `lang`
        print(f"ternit estimate: {err}", file=sys.stderr)
        return 2
    print(json.dumps(e.as_json(), ensure_ascii=False) if args.json else human(e, lang))
    return 0
