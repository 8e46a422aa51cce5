"""A sharded run's checkpoint (a DCP folder, written by trainer/parallel/sharding.py) as one
process reads it whole: the optimizer's state keyed by parameter names (DCP's form) and back
to a torch optimizer's integer ids. Here, under the state, so that reading a checkpoint needs
nothing of the parallel room that writes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def to_named(sd: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """A torch optimizer state dict (integer ids) → keyed by parameter names (DCP's form)."""
    return {
        "state": {names[int(i)]: s for i, s in sd["state"].items()},
        "param_groups": [{**g, "params": [names[int(i)] for i in g["params"]]} for g in sd["param_groups"]],
    }


def to_ids(sd: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The inverse of to_named: a named optimizer state dict → integer ids."""
    index = {n: i for i, n in enumerate(names)}
    return {
        "state": {index[n]: s for n, s in sd["state"].items()},
        "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in sd["param_groups"]],
    }


def read_dcp_whole(folder: Path, names: list[str]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The whole model and optimizer state of a DCP checkpoint in this process (one
    process continuing it, or the export), the optimizer in integer ids (`names`: the
    parameters in the optimizer's order, saved with the checkpoint)."""
    import warnings

    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict_from_keys

    with warnings.catch_warnings():  # "assuming the intent is to load in a single process": it is
        warnings.simplefilter("ignore")
        sd = _load_state_dict_from_keys(checkpoint_id=str(folder))
    return sd["model"], to_ids(sd["optimizer"], names)
