"""`ternit run metrics ID --csv`: a row per step with its evaluation, a chain of continued
runs as one table (redone steps once), in a file written whole; RU/EN lines."""

from __future__ import annotations

import csv
import io
import json

import pytest

from app.runs import Registry
from app.runs.metrics import COLUMNS, run_metrics, to_csv
from tests.test_cli_i18n import run_cli

CFG = {"name": "m", "model": {"context": 32, "width": 32, "heads": 2, "layers": 2, "vocab": 300},
       "training": {"batch_per_card": 4, "steps_to": 30}, "data": {"dir": "/nowhere", "constellations": ["t"]}}


def ev(event: str, step: int, **fields) -> dict:
    return {"event": event, "time": 1000.0 + step, "step": step, **fields}


def steps(a: int, b: int) -> list[dict]:
    return [ev("step", s, loss=5 - s / 100, lr=1e-3, tokens_seen=s * 128, tokens_per_s=1234.5, step_ms=10.0,
               mem_alloc_mb=None, mem_peak_mb=None) for s in range(a, b + 1)]


def write(path, events) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")


@pytest.fixture
def chain():
    reg = Registry()
    parent = reg.create_run(CFG)
    write(parent.events_path, [ev("start", 0), *steps(1, 10), ev("eval", 10, val_loss=4.5, val_ci95=[4.4, 4.6]),
                               *steps(11, 14)])
    # Continued from the step-12 checkpoint: the parent's 13 and 14 are redone by the child.
    child = reg.create_leg(parent.id, {**CFG, "resume_from": "x"})
    write(child.events_path, [ev("start", 12), *steps(13, 20), ev("eval", 20, val_loss=4.2, val_ci95=[4.1, 4.3])])
    yield reg, parent, child
    reg.close()


def test_rows_join_the_chain_and_carry_the_evaluation(chain):
    reg, parent, child = chain
    rows = run_metrics(reg, child.id)
    assert [r["step"] for r in rows] == list(range(1, 21))
    assert [r["run_id"] for r in rows] == [parent.id] * 12 + [child.id] * 8
    assert rows[9]["val_loss"] == 4.5 and (rows[9]["val_ci95_low"], rows[9]["val_ci95_high"]) == (4.4, 4.6)
    assert rows[19]["tokens_seen"] == 20 * 128 and "val_loss" not in rows[10]
    only = run_metrics(reg, child.id, with_parents=False)
    assert [r["step"] for r in only] == list(range(13, 21))
    table = list(csv.reader(io.StringIO(to_csv(rows))))
    assert tuple(table[0]) == COLUMNS and len(table) == 21
    row10 = dict(zip(table[0], table[10], strict=True))
    assert row10["loss"] == "4.9" and row10["val_ci95_high"] == "4.6" and row10["mem_peak_mb"] == ""
    assert dict(zip(table[0], table[11], strict=True))["val_loss"] == ""


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_the_command_writes_stdout_or_a_file(chain, tmp_path, lang):
    _, _, child = chain
    code, out, err = run_cli(["run", "metrics", child.id, "--csv"], lang)
    assert code == 0, err
    assert out.splitlines()[0] == ",".join(COLUMNS) and len(out.splitlines()) == 21
    target = tmp_path / "m.csv"
    code, out, err = run_cli(["run", "metrics", child.id, "--csv", "--out", str(target), "--only-this"], lang)
    assert code == 0 and out == ""
    assert err.strip() == (f"ternit run metrics: Метрики записаны: 8 строк → {target}" if lang == "ru"
                           else f"ternit run metrics: Metrics written: 8 rows → {target}")
    assert len(target.read_text().splitlines()) == 9
    code, _, err = run_cli(["run", "metrics", child.id, "--out", str(tmp_path)], lang)  # a folder
    assert code == 2 and ("Не удалось записать" if lang == "ru" else "Could not write") in err
    code, _, err = run_cli(["run", "metrics", "nope"], lang)
    assert code == 2 and "nope" in err
