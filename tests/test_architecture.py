"""The import graph follows docs/ARCHITECTURE.md: no module cycles, no import up the layers.

Every ``import`` of a plangraph module counts, including those inside functions (a lazy
import is still a dependency); only ``if TYPE_CHECKING:`` blocks are skipped. The layer
table and the allowed forwards are parsed from docs/ARCHITECTURE.md, so the document and
the check cannot drift apart.
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


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path) -> set[str]:
    """The plangraph modules ``module`` imports (a ``from pkg import sub`` of a submodule
    names the submodule, not the package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
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
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
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


def layer_of(module: str, table: dict[str, tuple[str, int]]) -> tuple[str, int]:
    """The layer and rank of ``module``: those of its longest prefix in the table."""
    # The root package is its own layer entry; it is nobody's prefix.
    best = max(
        (p for p in table if module == p or (p != "plangraph" and module.startswith(p + "."))),
        key=len,
        default=None,
    )
    if best is None:
        raise AssertionError(f"{module} is in no layer of docs/ARCHITECTURE.md")
    return table[best]


def forwards() -> set[tuple[str, str]]:
    return {(_names(r[0])[0], _names(r[1])[0]) for r in _doc_table("## Allowed forwards")}


def test_every_module_is_in_a_layer() -> None:
    table = layers()
    for module in MODULES:
        layer_of(module, table)


def test_no_import_cycles() -> None:
    """No cycles once the documented forwards (a lower layer calling up, by design) are
    set aside."""
    graph = GRAPH.copy()
    graph.remove_edges_from(forwards())
    cycles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def upward_imports(edges: object) -> list[str]:
    """The edges that import from a higher rank or a sibling layer of the same rank, other
    than the documented forwards."""
    table = layers()
    allowed = forwards()
    bad = []
    for src, dst in sorted(edges):  # type: ignore[call-overload]
        (src_layer, src_rank), (dst_layer, dst_rank) = layer_of(src, table), layer_of(dst, table)
        if src_layer == dst_layer or dst_rank < src_rank or (src, dst) in allowed:
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
        ("plangraph.render.graph", "plangraph.rl.policy"),  # sideways, same rank
        ("plangraph.ops.registry", "plangraph.ir.types"),  # down: fine
    ]
    assert len(upward_imports(edges)) == 3


def test_allowed_forwards_are_real() -> None:
    """A forward listed in the document but gone from the code is stale documentation."""
    stale = sorted(f for f in forwards() if not GRAPH.has_edge(*f))
    assert stale == []


def test_flow_engine_knows_no_plans() -> None:
    plan_layers = ("plangraph.ops", "plangraph.compiler", "plangraph.rl", "plangraph.runtime")
    for src, dst in GRAPH.edges:
        if src.startswith("plangraph.flow"):
            assert not dst.startswith(plan_layers), f"{src} imports {dst}"
