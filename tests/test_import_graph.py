"""Dependencies run one way: cli/server -> leaderboard -> judges -> (fast, crm, quality) -> data -> store -> types
(``LAYERS``). Every ``import`` under src/usl is read with ``ast``, at module level and inside functions alike
(an import inside a function is still a dependency, only a hidden one), and the graph must have no cycle, not
between sub-packages nor between the modules of one package, and no import that runs up the layers.

``python tests/test_import_graph.py`` prints the cycles it finds.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
# top to bottom; a package imports only its own layer's and the layers below (one layer's packages may use one
# another, but never in a circle: the cycle tests see to that)
LAYERS = (
    ("usl.cli",),
    ("usl.server", "usl.api", "usl.evaluation"),
    ("usl.leaderboard",),
    ("usl.judges",),
    ("usl.fast", "usl.crm", "usl.quality"),
    ("usl.data",),
    ("usl.store",),
    ("usl", "usl.types", "usl.paths", "usl.atomic", "usl.console", "usl.weights"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "usl").rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules (``usl.fast.model.split_sign`` ->
    ``usl.fast.model``)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours that ``module`` imports anywhere in its file (``TYPE_CHECKING`` blocks included:
    a type named across a border is a dependency too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            origin = node.module or ""
            if node.level:
                base = package.split(".")
                origin = ".".join(base[:len(base) - node.level + 1] + ([origin] if origin else []))
            # ``from usl.fast import model`` imports the module usl.fast.model; ``from usl.fast.model import X``
            # imports usl.fast.model, whatever X is
            names = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name, modules)
            if target is not None and target != module:
                found.add(target)
    return found


def package_of(module: str) -> str:
    """``usl.fast.model`` -> ``usl.fast``; the leaves (``usl.types``, ``usl.paths``) are packages of their own."""
    return ".".join(module.split(".")[:2])


@functools.cache
def module_graph() -> dict[str, frozenset[str]]:
    modules = _modules()
    return {m: frozenset(imports_of(m, p, modules)) for m, p in modules.items()}


def package_graph(graph: dict[str, frozenset[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for m, targets in graph.items():
        edges = packages.setdefault(package_of(m), set())
        edges |= {package_of(t) for t in targets} - {package_of(m)}
    return packages


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each given as a shortest closed path
    through its first node and then the component's other nodes, e.g. ``["usl.a", "usl.b", "usl.a", "usl.c"]``
    (usl.c is in the circle too, by a longer path); sorted, so that the failure message is stable."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_closed_path(graph, c) + sorted(c - set(_closed_path(graph, c))) for c in components)


def _closed_path(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first node, found breadth first."""
    start = min(component)
    came_from = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    path = [v]
                    while came_from[path[-1]] is not None:
                        path.append(came_from[path[-1]])
                    return path[::-1] + [start]
                if w in component and w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")


def _describe(found: list[list[str]]) -> str:
    lines = []
    for c in found:
        end = c.index(c[0], 1) + 1
        lines.append(" -> ".join(c[:end]) + (f"   (in the same circle: {', '.join(c[end:])})" if c[end:] else ""))
    return "\n".join(lines)


# --- the reader itself, on a tree we write -----------------------------------------------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    modules = {_module_name_in(tmp_path, p): p for p in tmp_path.rglob("*.py")}
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def _module_name_in(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_reader_sees_imports_inside_functions_and_relative_ones(tmp_path):
    graph = _tree(tmp_path, {
        "usl/__init__.py": "",
        "usl/a/__init__.py": "",
        "usl/a/x.py": "from usl.b.y import f\n",
        "usl/a/z.py": "def g():\n    from . import x\n    import usl.b\n",
        "usl/b/__init__.py": "",
        "usl/b/y.py": "def f():\n    from usl.a import z\n    return z\n",
    })
    assert graph["usl.a.x"] == {"usl.b.y"}
    assert graph["usl.a.z"] == {"usl.a.x", "usl.b"}
    assert graph["usl.b.y"] == {"usl.a.z"}
    assert cycles(package_graph(graph)) == [["usl.a", "usl.b", "usl.a"]]
    assert cycles(graph) == [["usl.a.x", "usl.b.y", "usl.a.z", "usl.a.x"]]


def test_reader_finds_no_cycle_in_a_tree_that_runs_one_way(tmp_path):
    graph = _tree(tmp_path, {
        "usl/__init__.py": "",
        "usl/top.py": "import usl.low\nfrom usl.mid import m\n",
        "usl/mid/__init__.py": "",
        "usl/mid/m.py": "def f():\n    from usl.low import g\n",
        "usl/low.py": "def g():\n    pass\n",
    })
    assert cycles(package_graph(graph)) == []
    assert cycles(graph) == []


# --- the code ------------------------------------------------------------------------------------------------------

def test_no_cycle_between_packages():
    found = cycles(package_graph(module_graph()))
    assert not found, "import cycles between usl's packages:\n" + _describe(found)


def test_every_package_has_a_layer():
    assert {package_of(m) for m in _modules()} == {p for layer in LAYERS for p in layer}


def test_imports_run_down_the_layers():
    layer = {p: i for i, names in enumerate(LAYERS) for p in names}
    upward = sorted(f"{m} -> {t}" for m, targets in module_graph().items() for t in targets
                    if layer[package_of(t)] < layer[package_of(m)])
    assert not upward, "imports that run up the layers:\n" + "\n".join(upward)


@pytest.mark.parametrize("package", sorted({package_of(m) for m in _modules()} - {"usl"}))
def test_no_cycle_between_modules_of_one_package(package):
    graph = module_graph()
    inside = {m: {t for t in targets if package_of(t) == package}
              for m, targets in graph.items() if package_of(m) == package}
    found = cycles(inside)
    assert not found, f"import cycles inside {package}:\n" + _describe(found)


if __name__ == "__main__":
    g = module_graph()
    print("between packages:\n" + _describe(cycles(package_graph(g))))
    print("between modules:\n" + _describe(cycles(g)))
