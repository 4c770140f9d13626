"""No import runs upward and none closes a circle (docs/architecture.md, "Layers").

Every `import attrib...` / `from attrib... import` in attrib/ is read with ast, the ones inside
functions included (a lazy import is still an arrow: it only moves the circle to run time).
Each module belongs to one layer of LAYERS, bottom first; a module may import its own layer or
any layer below it. Separately, the graph of modules has no cycle. A new module with no layer
fails the test: put it in LAYERS, which is the table docs/architecture.md shows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import attrib

PACKAGE = Path(attrib.__file__).resolve().parent

# Bottom first. A name stands for the module and everything under it; the longest name wins,
# so a module can sit above the package it belongs to. The package face
# ("attrib", its __init__) stands for itself only: were it a prefix, every new top-level module
# would land in the core layer silently instead of failing for want of one.
PACKAGE_FACE = "attrib"
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("attrib", "attrib.core", "attrib.errors")),
    (
        "shared data and edges",
        ("attrib.events", "attrib.codec", "attrib.recipe", "attrib.formats", "attrib.suite", "attrib.shipped", "attrib.gitrepo",
         "attrib.workdir", "attrib.fsutil", "attrib.sqlite", "attrib.http", "attrib.github_actions"),
    ),  # fmt: skip
    ("evaluate", ("attrib.evaluate",)),
    ("search", ("attrib.bisection", "attrib.group_bisection", "attrib.outcome", "attrib.segment", "attrib.simulation")),
    ("result", ("attrib.result",)),
    ("report", ("attrib.report",)),
    ("sinks and progress", ("attrib.tracker", "attrib.progress")),
    ("job", ("attrib.job", "attrib.rolls")),
    ("history", ("attrib.history",)),
    ("daemon", ("attrib.daemon",)),
    (
        "triggers",
        ("attrib.cli", "attrib.__main__", "attrib.demo"),
    ),
)

# Arrows that are known to run upward, each with the issue that removes it (none today: keep
# the mechanism, and the test below that an allowance is still needed, for the next one).
TEMPORARY_UPWARD: frozenset[tuple[str, str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _target(name: str) -> str:
    """The module an imported name lives in: `attrib.result.dump` is attrib.result."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_target(a.name) for a in node.names if a.name.split(".")[0] == "attrib")
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: relative import (attrib imports absolutely)"
            if node.module and node.module.split(".")[0] == "attrib":
                found.update(_target(f"{node.module}.{a.name}") for a in node.names)
    found.discard(module)
    return found


def layer(module: str) -> int:
    best = max(
        ((len(name), i) for i, (_, names) in enumerate(LAYERS) for name in names
         if module == name or (name != PACKAGE_FACE and module.startswith(name + "."))),
        default=None,
    )  # fmt: skip
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS (and docs/architecture.md)"
    return best[1]


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer(module)


def test_no_import_runs_upward():
    upward = sorted(
        f"{m} ({LAYERS[layer(m)][0]}) imports {t} ({LAYERS[layer(t)][0]})"
        for m, targets in GRAPH.items() for t in targets
        if layer(t) > layer(m) and (m, t) not in TEMPORARY_UPWARD
    )  # fmt: skip
    assert not upward, "\n".join(upward)


def test_the_temporary_allowances_are_still_needed():
    # An allowance whose import is gone must go too, or it would hide the next one.
    for m, t in TEMPORARY_UPWARD:
        assert t in GRAPH[m], f"{m} no longer imports {t}: remove it from TEMPORARY_UPWARD"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_there_is_no_import_cycle():
    assert not cycles(GRAPH), "\n".join(" <-> ".join(c) for c in cycles(GRAPH))


def _exception_classes(module: str, known: set[str]) -> list[str]:
    """Classes of `module` whose base is an exception: a builtin one, or one of `known`."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
            if any(b in known or b.endswith(("Error", "Exception")) for b in bases):
                found.append(node.name)
    return found


def test_every_exception_class_lives_in_errors_py():
    # One error root (docs/architecture.md, "Errors"): a class raised anywhere is declared in
    # errors.py, where its message and exit code are seen together.
    ours = {n.name for n in ast.walk(ast.parse(MODULES["attrib.errors"].read_text())) if isinstance(n, ast.ClassDef)}
    elsewhere = {m: found for m in MODULES if m != "attrib.errors" and (found := _exception_classes(m, ours))}
    assert not elsewhere, elsewhere
    assert _exception_classes("attrib.errors", ours)  # the check sees classes where there are some


def test_the_checks_catch_what_they_are_for():
    # The checker itself, on made-up graphs: a circle is found, a chain is not.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert layer("attrib.cli.history") > layer("attrib.daemon.store") > layer("attrib.history.ingest")
    assert layer("attrib.core.stats") < layer("attrib.evaluate.builds") < layer("attrib.bisection")
