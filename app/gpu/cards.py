"""Which cards this PC has for a run started here: the one answer that the form's choices,
the sizing of «Карта этого компьютера», the launch of a local run and the lab's check
before a start all take (issue 27: a catalogue card chosen on a PC without it trained on
the CPU without a word).

A card is NVML's (through the lab's one session, app.gpu.nvml) and visible to a trainer
started from here: CUDA_VISIBLE_DEVICES, when set, chooses and orders them as CUDA will
(indices or UUIDs; a negative or unknown entry hides it and every one after; "" hides
all). Its `index` is NVML's, in PCI bus order, which is what run.json's target.gpu names
and what the launch hands to CUDA (CUDA_DEVICE_ORDER=PCI_BUS_ID).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Card:
    index: int  # NVML's index: what run.json's target.gpu names
    name: str
    memory_mb: float | None  # None: the card would not say
    capability: tuple[int, int] | None = None  # CUDA compute capability; None: an old driver


def visible_indices(env: str | None, uuids: list[str | None]) -> list[int]:
    """The NVML indices a trainer may use, in CUDA's order, for CUDA_VISIBLE_DEVICES =
    `env` (None: unset) on a PC whose cards have these UUIDs (by NVML index)."""
    if env is None:
        return list(range(len(uuids)))
    out: list[int] = []
    for entry in (e.strip() for e in env.split(",")):
        if entry.isdigit() and int(entry) < len(uuids):
            index = int(entry)
        else:  # a UUID, or a prefix of one, as CUDA accepts them
            found = [i for i, u in enumerate(uuids) if entry and u and u.startswith(entry)]
            if len(found) != 1:
                break  # "-1", "", a card not there: CUDA sees none from here on
            index = found[0]
        if index in out:
            break
        out.append(index)
    return out


def this_pc_cards() -> list[Card]:
    """This PC's cards a run started here can train on; [] without a driver, a card or a
    working NVML (the reason in the log). A card lost from the bus is left out."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and not env.strip():
        return []  # every card hidden: not even NVML is opened
    from .nvml import OK, Lost, SessionBroken, session

    nvml = session()
    if nvml.ensure() != OK:
        log.info("no card on this PC for a run: %s (%s)", nvml.reason, nvml.detail)
        return []
    cards: list[Card] = []
    infos = {}
    for index in range(nvml.count):  # `count` is a property (calling it hid every card: issue 15)
        try:
            infos[index] = nvml.static(index)
        except (Lost, SessionBroken) as e:
            log.warning("card %d did not answer NVML: %s", index, e)
    uuids = [infos[i].uuid if i in infos else None for i in range(nvml.count)]
    for index in visible_indices(env, uuids):
        info = infos.get(index)
        if info is not None:
            cards.append(Card(index, info.name, info.mem_total_mb, info.capability))
    return cards


def card_by_index(index: int) -> Card | None:
    """This PC's card with NVML index `index`, if a run started here can train on it."""
    return next((c for c in this_pc_cards() if c.index == index), None)
