"""Small modules (docs/architecture.md, "Standards"): no module in attrib/ over 550 lines, no
function over 100 lines and no class over 300.

Every module under attrib/ is read with ast; a function's or class's length runs from its first
decorator (or its def) to its last line, nested functions and methods included. Each limit is its
own test, and a failure names every offender with its file, name and length.
"""

from __future__ import annotations

import ast
from pathlib import Path

import attrib

PACKAGE = Path(attrib.__file__).resolve().parent
MAX_MODULE_LINES = 550
MAX_FUNCTION_LINES = 100
MAX_CLASS_LINES = 300


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _where(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def _defs(kinds: tuple[type[ast.AST], ...]) -> list[tuple[str, int]]:
    """(file:line name, lines) of every definition of the given kinds in attrib/."""
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, kinds):
                assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                assert node.end_lineno is not None
                found.append((f"{_where(path)}:{node.lineno} {node.name}", node.end_lineno - first + 1))
    return found


def _offenders(sizes: list[tuple[str, int]], limit: int) -> list[str]:
    return [f"{name}: {n} lines" for name, n in sizes if n > limit]


def test_the_walk_sees_the_package():
    # A wrong root would pass every limit below with nothing read.
    names = {_where(p) for p in _modules()}
    assert "attrib/evaluate/executors/slurm.py" in names and "attrib/recipe/parse.py" in names
    assert any(name.endswith(" parse_recipe") for name, _ in _defs((ast.FunctionDef,)))


def test_no_module_over_550_lines():
    sizes = [(_where(p), len(p.read_text().splitlines())) for p in _modules()]
    bad = _offenders(sizes, MAX_MODULE_LINES)
    assert not bad, f"modules over {MAX_MODULE_LINES} lines (cut them where their parts are): " + "; ".join(bad)


def test_no_function_over_100_lines():
    bad = _offenders(_defs((ast.FunctionDef, ast.AsyncFunctionDef)), MAX_FUNCTION_LINES)
    assert not bad, f"functions over {MAX_FUNCTION_LINES} lines (cut them at their steps): " + "; ".join(bad)


def test_no_class_over_300_lines():
    bad = _offenders(_defs((ast.ClassDef,)), MAX_CLASS_LINES)
    assert not bad, f"classes over {MAX_CLASS_LINES} lines (move a cohesive part out): " + "; ".join(bad)
