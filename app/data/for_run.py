"""Prepared data for a run named by its constellations only: the newest prepared folder that
holds exactly them, or a new one prepared now (with progress).

The window always writes `data.dir`; a person writing run.json by hand, or `ternit run start
--constellations demo`, should not have to find a hash-named folder. `ternit estimate
--constellations` counts the data the same way.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..base import paths
from .prepared import Prepared, scan_prepared
from .progress import ProgressFn


def find_prepared(constellations: list[str], vocab: int | None = None,
                  tokenizer_sha256: str = "") -> Prepared | None:
    """The newest complete prepared folder for exactly these constellations whose vocabulary
    fits `vocab` (when given) and whose tokenizer is `tokenizer_sha256` (when given)."""
    want = set(constellations)
    for prep in scan_prepared(paths.prepared_dir()):
        if set(prep.constellations) != want or not prep.present():
            continue
        if vocab is not None and prep.vocab > vocab:
            continue
        if tokenizer_sha256 and prep.tokenizer_sha256 != tokenizer_sha256:
            continue
        return prep
    return None


def data_for(constellations: list[str], *, context: int = 1024, vocab: int | None = None,
             tokenizer: str | Path | None = None, progress: ProgressFn | None = None) -> tuple[Prepared, bool]:
    """(the prepared data, whether it was prepared now). Raises app.data.prepare's
    PrepareError (an unknown constellation: exit code 2) when it cannot be prepared."""
    tok_sha = hashlib.sha256(Path(tokenizer).read_bytes()).hexdigest() if tokenizer is not None else ""
    found = find_prepared(constellations, vocab, tok_sha)
    if found is not None:
        return found, False
    from .prepare import prepare  # tokenizers and the library: only when something is prepared

    res = prepare(constellations, context=context, vocab=vocab, tokenizer=tokenizer, progress=progress)
    prep = Prepared.read(res.path)
    if prep is None:  # prepare() writes the four files or raises: this would be a bug
        raise RuntimeError(f"{res.path} is not a complete prepared folder")
    return prep, True


def resume_tokenizer(resume_from: str | None) -> Path | None:
    """The tokenizer of the run a checkpoint belongs to (RUN_DIR/checkpoints/step-N.pt, its
    run.json's data.dir): a continued run must read text cut by the same tokenizer."""
    if not resume_from:
        return None
    run_json = Path(resume_from).parent.parent / "run.json"
    try:
        cfg: dict[str, Any] = json.loads(run_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    d = (cfg.get("data") or {}).get("dir") if isinstance(cfg, dict) else None
    tok = Path(d) / "tokenizer.json" if d else None
    return tok if tok is not None and tok.is_file() else None


def fill_data(config: dict[str, Any], progress: ProgressFn | None = None) -> tuple[dict[str, Any], str]:
    """run.json with `data.dir` found (or prepared) for its `data.constellations` when it has
    none, and `model.vocab` set to the data's when the config left it out; and a line for the
    user saying which folder was taken ("" when data.dir was given). A config with neither
    is refused here, not by the trainer after the run was created."""
    from ..base.i18n import t

    data = config.setdefault("data", {})
    if data.get("dir"):
        return config, ""
    names = [str(n) for n in data.get("constellations") or []]
    if not names:
        raise ValueError(t(
            "нет данных: укажите --constellations A,B (список: ternit data constellations) или папку данных "
            "в run.json (data.dir)",
            "no data: give --constellations A,B (ternit data constellations lists them) or the data folder in "
            "run.json (data.dir)"))
    model = config.setdefault("model", {})
    vocab = model.get("vocab")
    prep, fresh = data_for(names, context=int(model.get("context") or 1024),
                           vocab=int(vocab) if isinstance(vocab, int) else None,
                           tokenizer=resume_tokenizer(config.get("resume_from")), progress=progress)
    data["dir"] = prep.dir
    if vocab is None:
        model["vocab"] = prep.vocab
    how = t("подготовлены сейчас", "prepared now") if fresh else t("подготовлены раньше", "prepared before")
    return config, t(f"данные {', '.join(names)}: {prep.dir} ({how})",
                     f"data {', '.join(names)}: {prep.dir} ({how})")
