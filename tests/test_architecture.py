"""The import graph follows docs/ARCHITECTURE.md: no module cycles, no import up the layers.

Every ``import`` of a plangraph module counts: those inside functions (a lazy import is
still a dependency) and those under ``if TYPE_CHECKING:`` (a type-only dependency is still
one: it ties the two modules' designs together, and a checker or a future edit turns it
into a real import). There is no list of exceptions. The layer table is parsed from
docs/ARCHITECTURE.md, so the document and the check cannot drift apart.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "plangraph"
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str, path: Path) -> set[str]:
    """The plangraph modules ``module`` imports (a ``from pkg import sub`` of a submodule
    names the submodule, not the package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    for node in ast.walk(tree):  # every import, at module level, in functions, typing-only
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join([*pkg, base] if base else pkg)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
    return {m for m in found if m == "plangraph" or m.startswith("plangraph.")} - {module}


GRAPH = nx.DiGraph()
for _name, _path in MODULES.items():
    GRAPH.add_node(_name)
    for _target in _imports(_name, _path):
        if _target in MODULES:
            GRAPH.add_edge(_name, _target)


def _doc_table(section: str) -> list[list[str]]:
    """Rows of the first markdown table after heading ``section`` in ARCHITECTURE.md."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(section)
    rows: list[list[str]] = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def layers() -> dict[str, tuple[str, int]]:
    """Module prefix -> (layer, rank), from the layer table."""
    out: dict[str, tuple[str, int]] = {}
    for row in _doc_table("## Layers"):
        for prefix in _names(row[2]):
            out[prefix] = (row[1], int(row[0]))
    return out


def _matches(entry: str, module: str) -> bool:
    """A table entry covers ``module``: an entry with ``*`` (one dotted name each) names
    whole modules; any other names a module and, unless it is the root package, the
    modules under it."""
    if "*" in entry:
        parts, names = entry.split("."), module.split(".")
        return len(parts) == len(names) and all(
            p in ("*", n) for p, n in zip(parts, names, strict=True)
        )
    return module == entry or (entry != "plangraph" and module.startswith(entry + "."))


def _specificity(entry: str) -> tuple[int, int]:
    """Most literal names first, then the longest: ``plangraph.algorithms.*.config`` beats
    ``plangraph.algorithms.*.*``, and ``plangraph.ops`` beats ``plangraph``."""
    parts = entry.split(".")
    return sum(p != "*" for p in parts), len(parts)


def layer_of(module: str, table: dict[str, tuple[str, int]]) -> tuple[str, int]:
    """The layer and rank of ``module``: those of its most specific entry in the table."""
    best = max((p for p in table if _matches(p, module)), key=_specificity, default=None)
    if best is None:
        raise AssertionError(f"{module} is in no layer of docs/ARCHITECTURE.md")
    return table[best]


def test_every_module_is_in_a_layer() -> None:
    table = layers()
    for module in MODULES:
        layer_of(module, table)


def import_cycles(graph: nx.DiGraph) -> list[list[str]]:
    """Every elementary cycle of ``graph``, each as its sorted modules."""
    return sorted(sorted(c) for c in nx.simple_cycles(graph))


def test_no_import_cycles() -> None:
    cycles = import_cycles(GRAPH)
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def upward_imports(edges: object) -> list[str]:
    """The edges that import from a higher rank or a sibling layer of the same rank."""
    table = layers()
    bad = []
    for src, dst in sorted(edges):  # type: ignore[call-overload]
        (src_layer, src_rank), (dst_layer, dst_rank) = layer_of(src, table), layer_of(dst, table)
        if src_layer == dst_layer or dst_rank < src_rank:
            continue
        bad.append(f"{src} ({src_layer}, {src_rank}) imports {dst} ({dst_layer}, {dst_rank})")
    return bad


def test_no_import_points_up_the_layers() -> None:
    bad = upward_imports(GRAPH.edges)
    assert bad == [], "imports against the layer table:\n" + "\n".join(bad)


def test_the_checker_catches_upward_and_sideways_imports() -> None:
    edges = [
        ("plangraph.ir.plan", "plangraph.runtime.algorithm"),  # up
        ("plangraph.flow.local", "plangraph.rl.policy"),  # up
        ("plangraph.diagram.graph", "plangraph.rl.policy"),  # sideways, same rank
        ("plangraph.ops.registry", "plangraph.ir.types"),  # down: fine
    ]
    assert len(upward_imports(edges)) == 3


def test_flow_engine_knows_no_plans() -> None:
    plan_layers = ("plangraph.ops", "plangraph.compiler", "plangraph.rl", "plangraph.runtime")
    for src, dst in GRAPH.edges:
        if src.startswith("plangraph.flow"):
            assert not dst.startswith(plan_layers), f"{src} imports {dst}"


def test_the_checker_counts_lazy_and_type_only_imports(tmp_path: Path) -> None:
    src = tmp_path / "snippet.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from plangraph.runtime.algorithm import Algorithm\n"
        "def draw():\n"
        "    from plangraph.diagram import render\n"
        "    import plangraph.rl.policy\n",
        encoding="utf-8",
    )
    assert _imports("plangraph.compiler.snippet", src) == {
        "plangraph.runtime.algorithm",
        "plangraph.diagram",
        "plangraph.rl.policy",
    }


def test_the_checker_catches_a_cycle_of_two() -> None:
    graph = nx.DiGraph([("plangraph.flow.a", "plangraph.flow.b")])
    assert import_cycles(graph) == []
    graph.add_edge("plangraph.flow.b", "plangraph.flow.a")
    assert import_cycles(graph) == [["plangraph.flow.a", "plangraph.flow.b"]]


def test_the_top_level_api_builds_and_draws_without_loading_ray_or_torch() -> None:
    """``plangraph.build`` / ``render`` / ``to_dot`` are the runtime's and the diagram
    layer's own functions (no second implementation), and looking them up loads no ray or
    torch: only calling ``build`` does."""
    from tests.fresh_python import run_python

    out = run_python(
        "import sys, plangraph, plangraph.diagram, plangraph.runtime\n"
        "assert plangraph.build is plangraph.runtime.build\n"
        "assert plangraph.render is plangraph.diagram.render\n"
        "assert plangraph.to_dot is plangraph.diagram.to_dot\n"
        "dot = plangraph.to_dot(plangraph.analyze('plans/ppo.json'))\n"
        "print('digraph' in dot, 'ray' in sys.modules, 'torch' in sys.modules)\n"
    )
    assert out.split() == ["True", "False", "False"]
