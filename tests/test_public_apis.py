"""plangraph uses other packages through their public APIs only (DESIGN.md, "Public APIs only").

Every module under ``plangraph/`` is parsed (nothing is imported) and fails the test,
named ``file:line``, when it

* imports a private module or name of another package or of the standard library: a dotted
  component starting with ``_`` (``ray._private``, ``ray._raylet``, ``torch._dynamo``,
  ``from atexit import _run_exitfuncs``), also by name (``importlib.import_module`` or
  ``__import__`` of a constant string);
* reads a private attribute of another package: an attribute chain rooted at a name bound
  by an import of a non-plangraph package, with a component starting with ``_``
  (``torch._foreach_lerp_``, ``atexit._run_exitfuncs``, ``os._exit``), or the same through
  ``getattr(module, "_name")``;
* imports anything of ``ray.dashboard`` (Ray's dashboard is a separate program, not an API);
* assigns to an attribute of another package's module or object (monkeypatching:
  ``somemodule.attr = ...``, ``setattr(somemodule, ...)``, ``del somemodule.attr``).

Dunder names (``__version__``, ``__file__``, ``from __future__ import ...``) are public.
Names are resolved by imports alone: ``self._x`` or ``tensor._x`` on objects of unknown
type are not checked (a value's own private attributes are its class's business).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "plangraph"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ours(module: str) -> bool:
    return module == "plangraph" or module.startswith("plangraph.")


def _bound_imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted path it is bound to, for every import of another package
    anywhere in the module (module level, functions, ``TYPE_CHECKING`` blocks)."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    continue
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:  # ``import a.b`` binds ``a``
                    top = alias.name.split(".")[0]
                    bound[top] = top
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if _ours(node.module):
                continue
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _chain(node: ast.expr) -> list[str] | None:
    """``a.b.c`` -> ``["a", "b", "c"]``; None when the root is not a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _imports_by_name(call: ast.Call, bound: dict[str, str]) -> bool:
    """``importlib.import_module(...)`` or ``__import__(...)`` with an argument."""
    if not call.args:
        return False
    if isinstance(call.func, ast.Name) and call.func.id == "__import__":
        return True
    chain = _chain(call.func)
    if not chain or chain[0] not in bound:
        return False
    return ".".join([bound[chain[0]], *chain[1:]]) == "importlib.import_module"


def violations(source: str, filename: str = "<snippet>") -> list[str]:
    """``file:line: what`` for each use of another package's non-public surface."""
    tree = ast.parse(source, filename=filename)
    bound = _bound_imports(tree)
    found: list[tuple[int, str]] = []

    def imported(module: str, line: int, names: list[str]) -> None:
        if _ours(module):
            return
        parts = module.split(".")
        if parts[:2] == ["ray", "dashboard"] or (module == "ray" and "dashboard" in names):
            found.append((line, f"imports {module} (ray.dashboard is not an API)"))
        bad = [p for p in parts if _private(p)] + [n for n in names if _private(n)]
        if bad:
            what = module + (f" ({', '.join(names)})" if names else "")
            found.append((line, f"imports a private name of another package: {what}"))

    def external(chain: list[str]) -> str | None:
        """The dotted path of ``chain`` when its root is bound to another package."""
        root = bound.get(chain[0])
        return None if root is None else ".".join([root, *chain[1:]])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported(alias.name, node.lineno, [])
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            imported(node.module, node.lineno, [a.name for a in node.names])
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            chain = _chain(node)
            path = external(chain) if chain else None
            # Only the outermost access of a chain reports (``a._b._c`` once).
            if path and _private(node.attr) and not any(_private(p) for p in chain[1:-1]):
                kind = "os._exit" if path == "os._exit" else "a private attribute"
                found.append((node.lineno, f"reads {kind} of another package: {path}"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and not isinstance(t.ctx, ast.Load):
                        chain = _chain(t)
                        path = external(chain) if chain else None
                        if path:
                            verb = "deletes" if isinstance(node, ast.Delete) else "assigns to"
                            found.append((t.lineno, f"{verb} another package's {path}"))
        elif isinstance(node, ast.Call) and _imports_by_name(node, bound):
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                imported(name.value, node.lineno, [])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            fn, first = node.func.id, node.args[0]
            chain = _chain(first) if isinstance(first, (ast.Name, ast.Attribute)) else None
            path = external(chain) if chain else None
            if path is None or fn not in ("getattr", "setattr", "delattr", "hasattr"):
                continue
            if fn in ("setattr", "delattr"):
                found.append((node.lineno, f"{fn} on another package's {path}"))
                continue
            name = node.args[1] if len(node.args) > 1 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if _private(name.value):
                    found.append((node.lineno, f"{fn} of a private attribute: {path}.{name.value}"))
    return [f"{filename}:{line}: {what}" for line, what in sorted(found)]


def package_violations() -> list[str]:
    out: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        out += violations(path.read_text(encoding="utf-8"), rel)
    return out


def test_plangraph_uses_other_packages_through_public_apis_only() -> None:
    bad = package_violations()
    assert bad == [], "non-public use of other packages:\n" + "\n".join(bad)


# -- the checker itself: each pattern is caught, public use is not -------------------------


def _flags(source: str) -> list[str]:
    return [v.split(": ", 1)[1] for v in violations(source)]


def test_private_module_imports_are_flagged() -> None:
    assert _flags("import ray._private.services\n") == [
        "imports a private name of another package: ray._private.services"
    ]
    assert _flags("from ray._raylet import GcsClient\n")
    assert _flags("import torch._dynamo as dynamo\n")
    assert _flags("from atexit import _run_exitfuncs\n")
    assert _flags("from ray import _private\n")
    assert _flags("import importlib\nimportlib.import_module('ray._private.services')\n")
    assert _flags("from importlib import import_module\nimport_module('torch._dynamo')\n")
    assert _flags("__import__('ray._raylet')\n")


def test_private_attribute_reads_are_flagged() -> None:
    src = (
        "import torch\n"
        "import atexit as ax\n"
        "import ray\n"
        "def f(x):\n"
        "    torch._foreach_lerp_(x, x, 0.5)\n"
        "    ax._run_exitfuncs()\n"
        "    return ray._private.worker.global_worker\n"
    )
    assert _flags(src) == [
        "reads a private attribute of another package: torch._foreach_lerp_",
        "reads a private attribute of another package: atexit._run_exitfuncs",
        "reads a private attribute of another package: ray._private",
    ]
    assert _flags("import ray\ng = getattr(ray, '_private')\n") == [
        "getattr of a private attribute: ray._private"
    ]


def test_os_exit_is_flagged() -> None:
    assert _flags("import os\nos._exit(0)\n") == ["reads os._exit of another package: os._exit"]
    assert _flags("from os import _exit\n") == [
        "imports a private name of another package: os (_exit)"
    ]


def test_ray_dashboard_is_flagged() -> None:
    assert _flags("import ray.dashboard.modules.job\n")
    assert _flags("from ray.dashboard.utils import get_address\n")
    assert _flags("from ray import dashboard\n")


def test_monkeypatching_is_flagged() -> None:
    src = (
        "import gymnasium as gym\n"
        "from ray import util\n"
        "import numpy\n"
        "def patch():\n"
        "    gym.logger.min_level = 40\n"
        "    util.iter.x += 1\n"
        "    setattr(numpy, 'pi', 3)\n"
        "    del gym.make\n"
    )
    assert _flags(src) == [
        "assigns to another package's gymnasium.logger.min_level",
        "assigns to another package's ray.util.iter.x",
        "setattr on another package's numpy",
        "deletes another package's gymnasium.make",
    ]


def test_public_use_passes() -> None:
    src = (
        "from __future__ import annotations\n"
        "import os\n"
        "import numpy as np\n"
        "import torch\n"
        "from torch.optim.adam import adam\n"
        "from plangraph.rl._private_helper import thing\n"  # our own modules are ours
        "from . import _shard\n"
        "print(torch.__version__, np.__file__, os.environ['HOME'])\n"
        "os.environ['X'] = '1'\n"  # an item of a public mapping, not an attribute
        "class A:\n"
        "    def __init__(self):\n"
        "        self._x = np.zeros(3)\n"
        "        self.y = self._x._private_of_an_object\n"
        "torch.set_num_threads(1)\n"
        "value = getattr(np, 'float32')\n"
        "import importlib\n"
        "importlib.import_module('gymnasium.wrappers')\n"
    )
    assert _flags(src) == []
