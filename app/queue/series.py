"""Series: one run.json with one or two fields varied over listed values; each combination a
queued run named by its values. When the series' runs end, its table: the final held-out
loss with its 95 % interval and bits per byte against the varied values, and which won.

`--vary training.lr=0.001,0.0003` (a run.json key, then the values); several make their
product, in the order given (the last varies fastest).
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from ..base import run_status as st
from ..base.i18n import t
from ..runs.bits import bits_per_byte as _bpb
from ..runs.bits import bytes_per_token
from ..runs.events import read_events
from ..runs.registry import Registry, RunNotFound
from .store import DONE, Item, QueueError, QueueStore, Series

MAX_VARIED = 2       # fields a series varies (the form offers one or two)
MAX_RUNS = 64        # combinations a series may make


def parse_vary(text: str) -> tuple[str, list[Any]]:
    """'training.lr=0.001,0.0003' → ('training.lr', [0.001, 0.0003]). Values are read as
    JSON (numbers, true/false) where they are, else kept as text."""
    key, eq, values = text.partition("=")
    key = key.strip()
    parts = [v.strip() for v in values.split(",") if v.strip()]
    if not eq or "." not in key or not parts:
        raise QueueError(t(f"--vary {text!r}: нужно КЛЮЧ=З1,З2,… с ключом run.json, например training.lr=0.001,0.0003",
                           f"--vary {text!r}: expected KEY=V1,V2,… with a run.json key, e.g. training.lr=0.001,0.0003"))
    return key, [_value(p) for p in parts]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def short_key(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def values_text(values: dict[str, Any]) -> str:
    """'lr=0.001 width=256': a run's varied values, as its name carries them."""
    return " ".join(f"{short_key(k)}={_plain(v)}" for k, v in values.items())


def _plain(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v


def expand(base: dict[str, Any], vary: list[tuple[str, list[Any]]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(run.json, {key: value}) for every combination, named by its values."""
    if not vary or len(vary) > MAX_VARIED:
        raise QueueError(t(f"серия меняет одно или два поля, а не {len(vary)}",
                           f"a series varies one or two fields, not {len(vary)}"))
    keys = [k for k, _ in vary]
    if len(set(keys)) != len(keys):
        raise QueueError(t("одно поле указано в --vary дважды", "one field is given to --vary twice"))
    combos = list(itertools.product(*(vals for _, vals in vary)))
    if len(combos) > MAX_RUNS:
        raise QueueError(t(f"серия из {len(combos)} прогонов — больше {MAX_RUNS}; уменьшите число значений",
                           f"a series of {len(combos)} runs is more than {MAX_RUNS}; list fewer values"))
    base_name = str(base.get("name") or "run")
    out = []
    for combo in combos:
        cfg = copy.deepcopy(base)
        values = dict(zip(keys, combo, strict=True))
        for key, value in values.items():
            _set(cfg, key, value)
        cfg["name"] = f"{base_name} {values_text(values)}"
        out.append((cfg, values))
    return out


def _set(config: dict[str, Any], key: str, value: Any) -> None:
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise QueueError(t(f"--vary {key}: {part} в run.json — не раздел", f"--vary {key}: {part} in run.json is no section"))
        node = child
    node[leaf] = value


# ---- the results ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    item_id: int
    values: dict[str, Any]
    state: str               # the queue item's state
    run_id: str | None       # the run whose evaluation counts (a chain's last leg)
    run_status: str | None
    val_loss: float | None   # the final evaluation on the held-out set
    val_low: float | None
    val_high: float | None
    bits_per_byte: float | None
    bpb_low: float | None
    bpb_high: float | None
    step: int | None


@dataclass(frozen=True)
class Results:
    series_id: int
    name: str
    keys: list[str]
    rows: list[Row]
    winner: int | None        # the item with the lowest final held-out loss
    clear: bool               # its interval lies below every other finished run's
    done: bool                # every run of the series has ended
    verdict: str

    def as_json(self) -> dict[str, Any]:
        return {"series": self.series_id, "name": self.name, "keys": self.keys, "done": self.done,
                "winner": self.winner, "clear_winner": self.clear, "verdict": self.verdict,
                "rows": [asdict(r) for r in self.rows]}


def results(store: QueueStore, registry: Registry, series_id: int) -> Results:
    series = store.series(series_id)
    rows = [_row(registry, it) for it in store.series_items(series_id)]
    scored = [r for r in rows if r.val_loss is not None and r.state == DONE]
    winner = min(scored, key=lambda r: r.val_loss or 0.0) if scored else None
    clear = bool(winner) and all(
        (winner.val_high or 0.0) < (r.val_low if r.val_low is not None else r.val_loss or 0.0)
        for r in scored if r is not winner)
    done = all(it.ended for it in store.series_items(series_id))
    return Results(series.id, series.name, series.keys, rows, winner.item_id if winner else None, clear, done,
                   _verdict(series, winner, clear, done, len(scored)))


def _verdict(series: Series, winner: Row | None, clear: bool, done: bool, scored: int) -> str:
    if winner is None:
        return t("ещё нет ни одной оценки на отложенной выборке", "no held-out evaluation yet")
    what = values_text(winner.values)
    loss = f"{winner.val_loss:.4f}"
    if not done:
        return t(f"пока лучше всех {what} (val loss {loss}); серия ещё идёт",
                 f"best so far: {what} (val loss {loss}); the series is still going")
    if scored == 1:
        return t(f"оценён один прогон: {what} (val loss {loss})", f"one run was evaluated: {what} (val loss {loss})")
    if clear:
        return t(f"победил {what}: val loss {loss}, его интервал ниже всех остальных",
                 f"{what} won: val loss {loss}, its interval below every other's")
    return t(f"лучше всех {what} (val loss {loss}), но интервалы перекрываются: разница может быть случайной",
             f"{what} is best (val loss {loss}), but the intervals overlap: the difference may be chance")


def _row(registry: Registry, it: Item) -> Row:
    values = it.series_values or {}
    rec = None
    if it.run_id:
        try:
            rec = registry.get(it.run_id)
        except RunNotFound:
            rec = None
    last = None
    if rec is not None:
        evals = [e for e in read_events(rec.events_path) if e.get("event") == "eval"]
        last = evals[-1] if evals else None
    loss = _num(last.get("val_loss")) if last else None
    ci = (last.get("val_ci95") if last else None) or [None, None]
    low, high = _num(ci[0]), _num(ci[1])
    bpt = bytes_per_token(str((it.config.get("data") or {}).get("dir") or ""))
    return Row(it.id, values, it.state, rec.id if rec else None, rec.status if rec else None, loss, low, high,
               _bpb(loss, bpt), _bpb(low, bpt), _bpb(high, bpt), last.get("step") if last else None)


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def run_status_label(row: Row) -> str:
    return st.label(row.run_status) if row.run_status else "—"
