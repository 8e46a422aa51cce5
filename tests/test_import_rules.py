"""The rooms of the code and what each may import, checked over the source (no imports run).

    app/      the lab's core: no Qt, no torch; the trainer only through its torch-free
              contract (trainer.config, .checkpoint_index, .streams), never ui/, bench/ or tests/
    ui/       widgets: no torch, no trainer, never bench/ or tests/
    trainer/  what a Kaggle kernel runs: the standard library, torch and numpy only
    bench/    the measuring tools: may use trainer/ and app/, never ui/ or tests/
and no import cycle between app's parts (app.form, app.kaggle, app.runs, ...), counting
the imports made inside functions and the modules named by string for importlib.
docs/ARCHITECTURE.md says the same in prose.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("app", "ui", "trainer", "bench")
QT = ("PySide6", "shiboken6", "pyqtgraph")
# app/ may read the trainer's run.json contract, its checkpoint naming and hash lists, and
# the processes' one text encoding (trainer.streams), which are plain Python (a test below:
# importing them loads no torch).
TRAINER_CONTRACT = ("trainer.config", "trainer.checkpoint_index", "trainer.streams")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "app": (*QT, "torch", "ui", "bench", "tests"),
    "ui": ("torch", "trainer", "bench", "tests"),
    "trainer": ("app", "ui", "bench", "tests"),
    "bench": ("ui", "tests"),
}
TRAINER_THIRD_PARTY = {"torch", "numpy"}
# `ternit export` runs trainer.export on the user's machine, never in a kernel.
TRAINER_LOCAL_ONLY = {"trainer.export": {"safetensors"}}
# Optional libraries a run asks for by name: imported only when run.json turns the feature
# on, and their absence is one line with exit 2 before training (tests/test_lean.py).
TRAINER_OPTIONAL = {"trainer.lean": {"bitsandbytes"}}
MODULE_NAME = re.compile(r"^(app|ui|trainer|bench)(\.[A-Za-z_]\w*)+$")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(room: str) -> list[Path]:
    return sorted(p for p in (ROOT / room).rglob("*.py") if "__pycache__" not in p.parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in the file, also those inside functions;
    `from X import name` counts X and, where it is a module of the lab, X.name."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names if is_lab_module(f"{base}.{a.name}")]
    return out


def is_lab_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def named_by_string(path: Path) -> list[tuple[int, str]]:
    """Modules of the lab named in string constants (importlib.import_module targets), less
    those after "-m" in an argument list: a child process (`python -m app.cli`) is no import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    argv = {id(b) for n in ast.walk(tree) if isinstance(n, (ast.List, ast.Tuple))
            for a, b in zip(n.elts, n.elts[1:], strict=False) if isinstance(a, ast.Constant) and a.value == "-m"}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in argv
            and MODULE_NAME.match(n.value) and is_lab_module(n.value)]


def starts_with(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def room_violations(room: str) -> list[str]:
    bad = []
    for path in sources(room):
        for line, name in imports(path):
            if starts_with(name, FORBIDDEN[room]):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
            elif room == "app" and starts_with(name, ("trainer",)) and not starts_with(name, TRAINER_CONTRACT):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} (app reads only {TRAINER_CONTRACT})")
            elif room == "trainer":
                top = name.split(".")[0]
                allowed = {"trainer", *TRAINER_THIRD_PARTY, *TRAINER_LOCAL_ONLY.get(module_name(path), ()),
                           *TRAINER_OPTIONAL.get(module_name(path), ())}
                if top not in allowed and top not in sys.stdlib_module_names:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} (a kernel has only "
                               "the standard library, torch and numpy)")
    return bad


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_imports_only_what_it_may(room):
    assert room_violations(room) == []


def test_the_checker_sees_a_lazy_forbidden_import(tmp_path, monkeypatch):
    """The rule is not vacuous: an import hidden in a function of app/ is found."""
    fake_root = tmp_path
    (fake_root / "app").mkdir()
    (fake_root / "app" / "__init__.py").write_text("")
    (fake_root / "app" / "x.py").write_text("def f():\n    import torch\n    from ..ui import y\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake_root)
    assert room_violations("app") == ["app/x.py:2 imports torch", "app/x.py:3 imports ui"]


def part(name: str) -> str:
    """app.kaggle.runner -> app.kaggle; app.form.run_form -> app.form (the unit cycles are counted in)."""
    return ".".join(name.split(".")[:2])


def app_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sources("app"):
        src = part(module_name(path))
        if src == "app":  # app/__init__.py
            continue
        for _, name in imports(path) + named_by_string(path):
            if name.startswith("app.") and part(name) != src:
                graph.setdefault(src, set()).add(part(name))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_the_parts_of_app():
    assert cycles(app_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_contract_app_reads_does_not_load_torch():
    code = ("import sys; import " + ", ".join(TRAINER_CONTRACT)
            + "; assert 'torch' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def test_the_kaggle_code_bundle_is_the_trainer_alone():
    """What a kernel receives: trainer/*.py, none of the measuring tools."""
    from app.kaggle.datasets import code_bundle

    names = [name for name, _ in code_bundle().files]
    assert "trainer/train.py" in names and "trainer/__main__.py" in names
    assert all(n.startswith("trainer/") for n in names)
    assert not [n for n in names if "bench" in n or "opcount" in n]
