"""What each room of the code may import, checked over the source (no imports run).

The rules are the table in docs/ARCHITECTURE.md ("What each room may import"), read here: the
document and the check cannot disagree, because there is one copy of the rules. The same
document's table of app's parts is held to the packages that exist, and app's parts may not
import each other in a cycle (counting the imports made inside functions and the modules
named by string for importlib), and no two files anywhere in the product import each other
in a circle (trainer/'s and ui/'s rooms are rows of the same table).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
LAB_ROOMS = ("app", "ui", "trainer", "bench", "tests")
EVERY_OTHER_LIBRARY = "every other library"
MODULE_NAME = re.compile(r"^(app|ui|trainer|bench)(\.[A-Za-z_]\w*)+$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class Rule:
    """One row of the table: what the modules under `who` (less those under `but`) never
    import, and what they may import after all."""

    who: str
    but: str | None
    never: tuple[str, ...]
    every_other_library: bool
    allowed: tuple[str, ...]

    def covers(self, module: str) -> bool:
        return starts_with(module, (self.who,)) and not (self.but and starts_with(module, (self.but,)))


def doc_table(name: str, text: str | None = None) -> list[list[str]]:
    """The rows (cells, header and separator left out) of ARCHITECTURE.md's table between
    `<!-- NAME: begin -->` and `<!-- NAME: end -->`."""
    text = ARCHITECTURE.read_text(encoding="utf-8") if text is None else text
    found = re.search(rf"<!-- {name}: begin -->\n(.*?)<!-- {name}: end -->", text, re.S)
    assert found, f"docs/ARCHITECTURE.md has no table marked {name}"
    lines = [ln.strip() for ln in found.group(1).splitlines() if ln.strip().startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]


def names_in(cell: str) -> tuple[str, ...]:
    """The module names written in backquotes in a cell (`trainer.config.run_config`), in order."""
    return tuple(n for n in re.findall(r"`([^`]+)`", cell) if DOTTED.match(n))


def parse_rules(text: str | None = None) -> list[Rule]:
    rules = []
    for who_cell, never_cell, allowed_cell in doc_table("import-rules", text):
        who, *rest = names_in(who_cell)
        rules.append(Rule(who=who, but=rest[0] if " but " in f" {who_cell} " and rest else None,
                          never=names_in(never_cell), every_other_library=EVERY_OTHER_LIBRARY in never_cell,
                          allowed=names_in(allowed_cell)))
    return rules


RULES = parse_rules()
ROOMS = tuple(dict.fromkeys(r.who.split(".")[0] for r in RULES))
# app/ reads the trainer's torch-free contract: what the table allows app after all.
TRAINER_CONTRACT = tuple(n for r in RULES if r.who == "app" for n in r.allowed)


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


def refused(module: str, name: str, rules: list[Rule]) -> bool:
    """Whether `module` may not import `name` under the table's rules."""
    mine = [r for r in rules if r.covers(module)]
    if starts_with(name, tuple(n for r in mine for n in r.allowed)):
        return False
    if any(starts_with(name, r.never) for r in mine):
        return True
    top = name.split(".")[0]
    outside = top not in sys.stdlib_module_names and top not in LAB_ROOMS
    return outside and any(r.every_other_library for r in mine)


def room_violations(room: str, rules: list[Rule] | None = None) -> list[str]:
    rules = RULES if rules is None else rules
    return [f"{path.relative_to(ROOT)}:{line} imports {name}"
            for path in sources(room) for line, name in imports(path) if refused(module_name(path), name, rules)]


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


def test_the_rules_are_read_from_architecture_md():
    """The table is the rule: each room has its row, and a row changed in the document is
    a different check (here: `torch` struck from ui's row is no longer refused)."""
    assert set(ROOMS) == {"app", "ui", "trainer", "bench"}
    assert TRAINER_CONTRACT == ("trainer.config.run_config", "trainer.plan.planner", "trainer.plan.shape",
                                "trainer.plan.memory_model", "trainer.plan.state_bytes", "trainer.plan.step_cost", "trainer.plan.fit",
                                "trainer.config.reasons",
                                "trainer.text.sampling",
                                "trainer.state.checkpoint_index", "trainer.plan.preflight", "trainer.base.streams",
                                "trainer.base.lock", "trainer.run.awake")
    assert refused("ui.runs.history", "torch.nn", RULES)
    text = ARCHITECTURE.read_text(encoding="utf-8")
    row = next(ln for ln in text.splitlines() if ln.startswith("| `ui` | `torch`, "))
    looser = parse_rules(text.replace(row, row.replace("`torch`, ", "", 1)))
    assert not refused("ui.runs.history", "torch.nn", looser)


def test_no_view_of_the_window_reaches_back_into_main_window():
    """The window's helpers (menus, memory, the GPU tab, …) get the objects and callbacks
    they need: only the program's start (ui.main) imports ui.window.main_window."""
    assert refused("ui.window.menu", "ui.window.main_window", RULES)
    assert refused("ui.monitor.tab", "ui.window.main_window.MainWindow", RULES)
    assert not refused("ui.main", "ui.window.main_window", RULES)


# ---- ui's rooms: a view reaches into no other view; no circle between ui's files ----------

UI_ROOMS = sorted(p.parent.name for p in (ROOT / "ui").glob("*/__init__.py"))
VIEW_ROOMS = [r for r in UI_ROOMS if r not in ("base", "window")]  # base under them, window over them


def test_a_view_reaching_into_another_view_is_refused():
    """Each view room has its row: it imports no other view room and not the window that
    composes them (the window imports the views, never the other way); ui.base imports none
    of them. A room added to ui/ without its row fails here."""
    assert refused("ui.data.prepare_row", "ui.form.run_form.RunFormView", RULES)
    assert refused("ui.monitor.gpu_card", "ui.runs.loss_plot", RULES)
    assert refused("ui.runs.history", "ui.window.memory", RULES)
    assert refused("ui.base.palette", "ui.runs.loss_plot", RULES)
    assert not refused("ui.window.memory", "ui.runs.history", RULES)
    assert not refused("ui.form.column", "ui.form.run_form", RULES)
    assert not refused("ui.queue.tab", "ui.base.palette", RULES)
    assert "base" in UI_ROOMS and "window" in UI_ROOMS and len(VIEW_ROOMS) >= 7
    for room in VIEW_ROOMS + ["base"]:
        for other in VIEW_ROOMS + ["window"]:
            assert refused(f"ui.{room}.x", f"ui.{other}.y", RULES) is (other != room), (room, other)


def test_architecture_md_names_every_room_of_ui():
    """Its table of ui's rooms lists each package of ui/ once, and nothing that is not one."""
    named = [names[0] for names in (re.findall(r"`ui/(\w+)/`", row[0]) for row in doc_table("ui-rooms")) if names]
    assert sorted(named) == UI_ROOMS
    assert len(named) == len(set(named))


def test_the_file_graph_sees_a_cycle_made_inside_a_function(tmp_path, monkeypatch):
    (tmp_path / "ui" / "runs").mkdir(parents=True)
    (tmp_path / "ui" / "__init__.py").write_text("")
    (tmp_path / "ui" / "runs" / "__init__.py").write_text("")
    (tmp_path / "ui" / "runs" / "a.py").write_text("from ui.runs.b import B\n")
    (tmp_path / "ui" / "runs" / "b.py").write_text("def f():\n    from . import a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert module_graph("ui")["ui.runs.b"] == {"ui.runs.a"}  # its own package is no edge
    assert cycles(module_graph("ui")) == [["ui.runs.a", "ui.runs.b"]]


def test_the_trainer_rows_allow_only_their_libraries():
    assert not refused("trainer.run.train", "torch.distributed", RULES)
    assert not refused("trainer.run.train", "json", RULES)  # the standard library
    assert refused("trainer.run.train", "safetensors.torch", RULES)  # "every other library"
    assert not refused("trainer.model.export", "safetensors.torch", RULES)
    assert not refused("trainer.step.lean", "bitsandbytes", RULES)
    assert refused("trainer.run.train", "app.base.paths", RULES)
    assert refused("app.runs.manager", "trainer.run.train", RULES)
    assert not refused("app.runs.manager", "trainer.state.checkpoint_index", RULES)


def test_architecture_md_names_every_part_of_app():
    """Its table of app's parts lists each package of app/ once, and nothing that is not one."""
    named = [names[0] for names in (re.findall(r"`(app/\w+)/`", row[0]) for row in doc_table("app-parts")) if names]
    packages = sorted(f"app/{p.parent.name}" for p in (ROOT / "app").glob("*/__init__.py"))
    assert sorted(named) == packages
    assert len(named) == len(set(named))


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
    """What a kernel receives: the trainer package, every room of it, none of the measuring tools."""
    from app.kaggle.datasets import code_bundle

    names = [name for name, _ in code_bundle().files]
    assert "trainer/run/train.py" in names and "trainer/__main__.py" in names
    assert {n.split("/")[1] for n in names if n.count("/") == 2} == {
        p.parent.name for p in (ROOT / "trainer").glob("*/__init__.py")}  # every room travels
    assert all(n.startswith("trainer/") for n in names)
    assert not [n for n in names if "bench" in n or "opcount" in n]


def module_graph(room: str) -> dict[str, set[str]]:
    """{module: the lab modules of the same room it imports}, counting imports inside functions
    and modules named by string. A module's own packages are no edge: Python loads them before
    it (`from . import x` in app/runs/y.py imports app.runs.x, not a circle through app/runs/)."""
    graph: dict[str, set[str]] = {}
    for path in sources(room):
        here = module_name(path)
        for _, name in imports(path) + named_by_string(path):
            if name.split(".")[0] == room and name != here and not here.startswith(name + ".") and is_lab_module(name):
                graph.setdefault(here, set()).add(name)
    return graph


@pytest.mark.parametrize("room", LAB_ROOMS[:-1])
def test_no_two_files_import_each_other_in_a_circle(room):
    assert cycles(module_graph(room)) == []


def test_the_file_graph_sees_a_circle(tmp_path, monkeypatch):
    """Two files of a room that import each other, one of them inside a function and only for
    its types, are a circle."""
    (tmp_path / "trainer" / "run").mkdir(parents=True)
    for init in ("trainer/__init__.py", "trainer/run/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "trainer" / "run" / "train.py").write_text("from trainer.run import wrapping\n")
    (tmp_path / "trainer" / "run" / "wrapping.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trainer.run.train import Trainer\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert cycles(module_graph("trainer")) == [["trainer.run.train", "trainer.run.wrapping"]]


def test_architecture_md_names_every_room_of_the_trainer():
    """Its table of the trainer's rooms lists each package of trainer/ once, in the order of
    the import rules (each room imports only those above it in the table), and each room has
    its row among the import rules but the loop's, which may import them all."""
    named = [names[0] for names in (re.findall(r"`(trainer/\w+)/`", row[0]) for row in doc_table("trainer-rooms")) if names]
    packages = sorted(f"trainer/{p.parent.name}" for p in (ROOT / "trainer").glob("*/__init__.py"))
    assert sorted(named) == packages and len(named) == len(set(named))
    ruled = [r.who for r in RULES if r.who.startswith("trainer.") and r.never]
    assert ruled == [n.replace("/", ".") for n in named[:-1]]


def test_a_lower_room_of_the_trainer_may_not_import_a_higher_one():
    assert refused("trainer.config.run_config", "trainer.plan.planner", RULES)  # the contract needs no plan
    assert not refused("trainer.config.__main__", "trainer.plan.planner", RULES)  # the command above both
    assert not refused("trainer.plan.planner", "trainer.config.run_config", RULES)
    assert refused("trainer.state.checkpoint", "trainer.parallel.sharding", RULES)
    assert refused("trainer.model.gpt", "trainer.step.optim", RULES)
    assert not refused("trainer.run.train", "trainer.text.generate", RULES)
