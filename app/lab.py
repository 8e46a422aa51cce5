"""The lab as the window sees it, headless: what the form chooses from (data, history,
Kaggle accounts, this computer's card).

ui/main_window.py shows what this module decides and forwards the user's actions to it; the
decisions are tested here without a window.
"""

from __future__ import annotations

import logging
import os

from . import paths
from .form import FormContext, Prepared, scan_prepared
from .runs import RunManager

log = logging.getLogger(__name__)


def load_form_context(runs: RunManager | None = None, extra_prepared: list[str] | None = None) -> FormContext:
    """What the form chooses from: constellations with token counts, prepared data, Kaggle
    accounts, this PC's card. Each source is optional: a part of the lab that is missing or
    fails leaves its choices empty, never the window closed."""
    ctx = FormContext()
    _add_library(ctx)
    for prep in scan_prepared(paths.prepared_dir()):
        ctx.add_prepared(prep)
    dirs = list(extra_prepared or [])
    if runs is not None:  # data folders the history's runs used
        for rec in runs.registry.list_runs(limit=50):
            try:
                d = (rec.config().get("data") or {}).get("dir")
            except (OSError, ValueError):
                d = None
            if d:
                dirs.append(d)
    for d in dict.fromkeys(dirs):
        prep = Prepared.read(d)
        if prep:
            ctx.add_prepared(prep)
    _add_accounts(ctx)
    add_local_gpu(ctx)
    return ctx


def first_visible_card() -> int | None:
    """The NVML index of the first card a trainer started from here may use: 0, or the first
    id CUDA_VISIBLE_DEVICES names; None when that variable hides every card."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return 0
    first = env.split(",")[0].strip()
    if not first or first.startswith("-"):
        return None  # "" or "-1": every GPU hidden from the trainer, local runs use the CPU
    return int(first) if first.isdigit() else 0  # a UUID: NVML's order is the best guess


def add_local_gpu(ctx: FormContext) -> None:
    """This PC's card (NVML through app.gpu) as the form's «Карта этого компьютера»: its name,
    its memory (for the sizing panel) and its index (what a local run's target.gpu names).
    No driver, no card or NVML failing: the CPU, and the reason in the log."""
    index = first_visible_card()
    if index is None:
        return
    from .gpu.nvml import OK, Lost, SessionBroken, session

    nvml = session()
    if nvml.ensure() != OK:
        log.info("no local card for the form: %s (%s)", nvml.reason, nvml.detail)
        return
    if index >= nvml.count:  # `count` is a property: calling it hid every card (issue 15)
        log.info("no local card for the form: NVML lists %d card(s), the first visible is %d", nvml.count, index)
        return
    try:
        info = nvml.static(index)
    except (Lost, SessionBroken) as e:  # a card that fell off the bus: the CPU, said in the log
        log.warning("the local card %d did not answer NVML: %s", index, e)
        return
    ctx.local_gpu = info.name
    ctx.local_gpu_index = index
    ctx.local_card_memory_mb = info.mem_total_mb


def _add_library(ctx: FormContext) -> None:
    """Constellations from app.data's library (with token counts where known)."""
    from .data import library

    try:
        for c in library.constellation_summaries():
            ctx.constellations[c["name"]] = c.get("tokens")
    except Exception:  # the library's own errors must not stop the window opening
        log.exception("the data library could not be read for the form")


def _add_accounts(ctx: FormContext) -> None:
    """Kaggle accounts with their quota, as the state knows them (no network)."""
    from .kaggle import accounts_for_form

    try:
        ctx.accounts = list(accounts_for_form())
    except Exception:  # a damaged Kaggle state must not stop the window opening
        log.exception("the Kaggle accounts could not be read for the form")
