"""plangraph reaches torch through its public API only (DESIGN.md, "Public APIs only"):
no ``torch._*`` module imported and no ``torch._*`` name used, at any depth
(``torch.nn._x`` counts too), anywhere in the package."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "plangraph"


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _private(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "torch" and any(
        p.startswith("_") and not p.startswith("__") for p in parts[1:]
    )


def private_torch_names(source: str) -> list[str]:
    """``torch._*`` names that ``source`` imports or reads, with their line numbers."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            names = [dotted] if dotted else []
        found += [f"{n} (line {node.lineno})" for n in names if _private(n)]
    return found


def test_the_check_sees_private_torch_names() -> None:
    source = (
        "import torch\nimport torch._dynamo\nfrom torch._C import _nn\n"
        "from torch.optim import Adam\nx = torch._foreach_lerp_\ny = torch.__version__\n"
    )
    assert private_torch_names(source) == [
        "torch._dynamo (line 2)",
        "torch._C (line 3)",
        "torch._C._nn (line 3)",
        "torch._foreach_lerp_ (line 5)",
    ]


def test_plangraph_uses_no_private_torch_name() -> None:
    found = {
        str(path.relative_to(PACKAGE.parent)): names
        for path in sorted(PACKAGE.rglob("*.py"))
        if (names := private_torch_names(path.read_text(encoding="utf-8")))
    }
    assert found == {}
