"""The kernel a leg runs: its script (from resources/kaggle_kernel.py.tmpl) and metadata.

A private script kernel on "GPU T4 ×2" (machine_shape NvidiaTeslaT4, GPU on), internet
off, with the lab's datasets as its sources. The script carries the run's config (with the
local data path taken out) and the hashes it looks for; never a key.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

TEMPLATE = Path(__file__).resolve().parents[2] / "resources" / "kaggle_kernel.py.tmpl"
MACHINE_SHAPE = "NvidiaTeslaT4"  # "GPU T4 ×2"; there is no single-T4 shape
SCRIPT_NAME = "ternit_kernel.py"


@dataclass(frozen=True)
class KernelPlan:
    username: str
    slug: str
    run_config: dict[str, Any]
    code_hash: str
    data_hash: str
    checkpoint_hash: str
    checkpoint_name: str
    limit_min: float
    dataset_refs: tuple[str, ...]
    keep_checkpoints: int = 3  # what the outputs hold (app/kaggle/room.py)
    run_id: str = ""  # the lab's run id, written into the leg's checkpoints (the kernel's folder is "run")

    @property
    def ref(self) -> str:
        return f"{self.username}/{self.slug}"


def kernel_slug(run_id: str) -> str:
    """A Kaggle-safe slug for one leg (the title is the same text, so it slugifies back)."""
    base = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")[:28].strip("-") or "run"
    return f"ternit-{base}-{hashlib.sha1(run_id.encode()).hexdigest()[:6]}"


def kernel_config(config: dict[str, Any], keep_checkpoints: int | None = None) -> dict[str, Any]:
    """The run config as the kernel gets it: no local paths (the kernel fills them in), and
    as many checkpoints kept as the outputs hold."""
    out = json.loads(json.dumps(config))
    out.setdefault("data", {})["dir"] = ""
    out["resume_from"] = None
    out.setdefault("target", {})["kind"] = "kaggle"
    if keep_checkpoints is not None:
        out.setdefault("training", {})["keep_checkpoints"] = keep_checkpoints
    return out


def render(plan: KernelPlan) -> str:
    text = TEMPLATE.read_text(encoding="utf-8")
    return Template(text).substitute(
        run_json=repr(json.dumps(kernel_config(plan.run_config, plan.keep_checkpoints), ensure_ascii=False)),
        code_hash=repr(plan.code_hash),
        data_hash=repr(plan.data_hash),
        checkpoint_hash=repr(plan.checkpoint_hash),
        checkpoint_name=repr(plan.checkpoint_name),
        limit_min=repr(round(float(plan.limit_min), 6)),
        run_id=repr(plan.run_id),
    )


def write_folder(plan: KernelPlan, folder: Path) -> Path:
    """kernel-metadata.json + the script, ready for kernels_push."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SCRIPT_NAME).write_text(render(plan), encoding="utf-8")
    meta = {
        "id": plan.ref,
        "title": plan.slug,
        "code_file": SCRIPT_NAME,
        "language": "python",
        "kernel_type": "script",
        "is_private": True,
        "enable_gpu": True,
        "enable_tpu": False,
        "enable_internet": False,
        "dataset_sources": list(plan.dataset_refs),
        "competition_sources": [],
        "kernel_sources": [],
        "model_sources": [],
        "machine_shape": MACHINE_SHAPE,
    }
    (folder / "kernel-metadata.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return folder
