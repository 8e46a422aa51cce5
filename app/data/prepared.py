"""A prepared-data folder as the lab reads it back (its meta.json): what the form offers,
what `ternit run start --constellations` and `ternit estimate --constellations` find."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Prepared:
    """A prepared-data folder (its meta.json), as the form needs it."""

    dir: str
    constellations: tuple[str, ...]
    vocab: int
    train_tokens: int
    tokens_by_constellation: dict[str, int] = field(default_factory=dict)
    val_tokens: int = 0  # 0: not known (an older meta.json)
    data_id: str = ""
    tokenizer_sha256: str = ""
    mtime: float = 0.0
    sources: dict[str, str] = field(default_factory=dict)  # dataset -> the SHA-256 of the text it was made from

    FILES = ("tokenizer.json", "train.bin", "val.bin", "meta.json")

    @classmethod
    def read(cls, folder: str | Path) -> Prepared | None:
        """The folder's meta.json, or None when it is not a complete prepared folder."""
        d = Path(folder)
        if not all((d / f).is_file() for f in cls.FILES):
            return None
        try:
            meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return cls(
            dir=str(d),
            constellations=tuple(meta.get("constellations") or ()),
            vocab=int(meta.get("vocab_size") or 0),
            train_tokens=int(meta.get("train_tokens") or 0),
            val_tokens=int(meta.get("val_tokens") or 0),
            tokens_by_constellation={k: int(v) for k, v in (meta.get("tokens_by_constellation") or {}).items()},
            data_id=str(meta.get("data_id") or ""),
            tokenizer_sha256=str(meta.get("tokenizer_sha256") or ""),
            mtime=(d / "meta.json").stat().st_mtime,
            sources={str(s["dataset"]): str(s.get("sha256") or "") for s in meta.get("sources") or ()
                     if isinstance(s, dict) and s.get("dataset")},
        )

    def current_for(self, library: dict[str, dict[str, str]]) -> bool:
        """Whether it was made from the texts its constellations hold now (`library`:
        constellation -> {dataset with text: its SHA-256}, app.data.library's content): a
        dataset added, changed or gone since means prepare again. A constellation the library
        does not know, or an older meta.json without sources, counts as current."""
        if not self.sources:
            return True
        now = {d: sha for c in self.constellations for d, sha in library.get(c, {}).items()}
        known = all(c in library for c in self.constellations)
        return all(self.sources.get(d) == sha for d, sha in now.items()) and (
            not known or set(self.sources) <= set(now))

    def present(self) -> bool:
        """Whether the folder is still there: the context is read once, and a user may
        delete or move a data folder while the window is open."""
        return all((Path(self.dir) / f).is_file() for f in self.FILES)


def scan_prepared(root: str | Path) -> list[Prepared]:
    """Complete prepared folders directly under root (newest first)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [Prepared.read(d) for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")]
    return sorted((p for p in found if p), key=lambda p: -p.mtime)

