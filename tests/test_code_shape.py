"""The shape rules of app/ and ui/, checked over the source (nothing imported):

- no function (or method) longer than 80 lines: a longer one is split into parts named
  for what they do (docs/ARCHITECTURE.md). A file has no such cap: modules are split by
  meaning, one concept each, and a concept's length is no reason to cut it in two (the cap
  that was here made the form eleven files held together by re-exports; issue 25);
- every broad `except` (bare, `Exception`, `BaseException`) re-raises, hands the exception
  object itself on (to the thread or the caller that raises or shows it), or says in the
  log what it swallowed: a failure caught and dropped in silence is how a whole feature
  went missing unnoticed (issue 15: the local card hidden behind a swallowed TypeError).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("app", "ui")
MAX_FUNCTION_LINES = 80
BROAD = {"Exception", "BaseException"}
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def sources() -> list[Path]:
    return sorted(p for room in ROOMS for p in (ROOT / room).rglob("*.py") if "__pycache__" not in p.parts)


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def long_functions(path: Path) -> list[str]:
    """Functions whose def … last line span more than MAX_FUNCTION_LINES (decorators and
    the docstring count: the reader reads them too)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > MAX_FUNCTION_LINES:
                out.append(f"{where(path, node.lineno)} {node.name}: {length} lines")
    return out


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return {"<bare>"}
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts))
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return set()


def _own_nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """The handler's nodes, not those of functions or classes defined inside it (their
    `raise` or log call runs later, if ever)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _is_log_call(node: ast.AST) -> bool:
    """`log.warning(...)`, `logger.exception(...)`, `logging.error(...)`, `self.log.info(...)`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr not in LOG_METHODS:
        return False
    owner = node.func.value
    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
    return "log" in name.lower()


def _hands_on(handler: ast.ExceptHandler, own: list[ast.AST]) -> bool:
    """The caught exception object itself goes on: `result = exc`, `put(("error", exc))`,
    `return exc` (a text made from it does not count: the traceback is lost)."""
    if not handler.name:
        return False

    def is_it(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Name) and node.id == handler.name

    for n in own:
        if isinstance(n, ast.Assign | ast.Return) and is_it(n.value):
            return True
        if isinstance(n, ast.Tuple | ast.List) and any(is_it(e) for e in n.elts):
            return True
    return False


def silent_broad_excepts(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ExceptHandler) or not (_names(node.type) & (BROAD | {"<bare>"})):
            continue
        own = _own_nodes(node.body)
        if any(isinstance(n, ast.Raise) or _is_log_call(n) for n in own) or _hands_on(node, own):
            continue
        out.append(f"{where(path, node.lineno)}: except {', '.join(sorted(_names(node.type)))}")
    return out


@pytest.mark.parametrize("room", ROOMS)
def test_no_function_is_longer_than_80_lines(room: str) -> None:
    found = [f for p in sources() if p.relative_to(ROOT).parts[0] == room for f in long_functions(p)]
    assert not found, "split these into parts named for what they do:\n" + "\n".join(found)


@pytest.mark.parametrize("room", ROOMS)
def test_every_broad_except_reraises_or_logs(room: str) -> None:
    found = [f for p in sources() if p.relative_to(ROOT).parts[0] == room for f in silent_broad_excepts(p)]
    assert not found, ("catch the named failure, or log what was swallowed "
                       "(logger.warning/exception, with context):\n" + "\n".join(found))


def _shape_of(tmp_path: Path, text: str) -> tuple[list[str], list[str]]:
    p = tmp_path / "mod.py"
    p.write_text(text, encoding="utf-8")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        return long_functions(p), silent_broad_excepts(p)
    finally:
        ROOT = saved


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """Each rule flags what it is meant to, and passes what it allows."""
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    longs, _ = _shape_of(tmp_path, f"def long():\n{body}\n")
    assert [s.split()[1] for s in longs] == ["long:"]
    longs, _ = _shape_of(tmp_path, "def short():\n" + "\n".join(body.splitlines()[:79]) + "\n")
    assert longs == []
    _, silent = _shape_of(tmp_path, (
        "import logging\nlog = logging.getLogger(__name__)\n"
        "def a():\n    try:\n        f()\n    except Exception:\n        pass\n"          # flagged
        "def b():\n    try:\n        f()\n    except:\n        return None\n"           # flagged
        "def c():\n    try:\n        f()\n    except (OSError, Exception):\n"
        "        def later():\n            raise\n"                                      # flagged
        "def d():\n    try:\n        f()\n    except Exception:\n        log.exception('f')\n"
        "def e():\n    try:\n        f()\n    except BaseException:\n        g()\n        raise\n"
        "def h():\n    try:\n        f()\n    except OSError:\n        pass\n"
        "def i():\n    try:\n        f()\n    except Exception as e:\n        q.put(('error', e))\n"
        "def j():\n    try:\n        f()\n    except Exception as e:\n        return str(e)\n"))  # flagged
    assert [s.split(":")[1] for s in silent] == ["6", "11", "16", "43"]
