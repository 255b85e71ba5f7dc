"""The built-in algorithms of ``PUBLIC_ONLY`` are written on the public API only.

Every module under ``plangraph/algorithms/<name>/`` of those algorithms may import, from
plangraph, only: ``plangraph`` itself, ``plangraph.rl``, ``plangraph.ops``,
``plangraph.ops.models``, ``plangraph.ops.policies`` and ``plangraph.ops.algorithms`` (the
public names: the last two are where ``plangraph.ops`` takes them from, and a built-in
cannot import the ``plangraph.ops`` package, which imports the built-ins), its own package
(any module of it), and another built-in algorithm's public package
(``plangraph.algorithms.<other>``, and its learner module ``policy``: a learner may
extend another's, as TD3's does DDPG's).
That is what a user's algorithm can do, so these algorithms show that the public API is
enough. Every import counts, as in ``tests/test_architecture.py``: module level, in
functions, under ``if TYPE_CHECKING:``, relative, and ``importlib.import_module`` of a
constant.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALGORITHMS = ROOT / "plangraph" / "algorithms"

PUBLIC_ONLY = ("ddpg", "td3", "pg")
"""The built-in algorithms held to the public API (``pg`` once its folder exists)."""

PUBLIC_MODULES = (
    "plangraph",
    "plangraph.rl",
    "plangraph.ops",
    "plangraph.ops.models",
    "plangraph.ops.policies",
    "plangraph.ops.algorithms",
)
"""The public plangraph modules an algorithm may import names from."""


def _checked() -> list[str]:
    return [name for name in PUBLIC_ONLY if (ALGORITHMS / name).is_dir()]


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    base = ROOT.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(path: Path, module: str) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` of each plangraph import of ``path`` (module ``module``):
    ``name`` is the imported name for ``from M import name`` (None for ``import M`` and
    where ``M.name`` is itself a module, which is then the module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if _is_module(sub):
                    found.append((node.lineno, sub, None))
                else:
                    found.append((node.lineno, base, alias.name))
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (
                    isinstance(node.func, ast.Name)
                    and node.func.id in ("import_module", "__import__")
                )
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value, None))
    return [f for f in found if f[1] == "plangraph" or f[1].startswith("plangraph.")]


def _exports(module: str) -> set[str]:
    mod = importlib.import_module(module)
    return set(getattr(mod, "__all__", ()))


def module_name(path: Path, root: Path = ROOT) -> str:
    """``root/plangraph/a/b.py`` -> ``plangraph.a.b`` (a package's ``__init__``: itself)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def problems(algo: str, path: Path, module: str, builtins: set[str]) -> list[str]:
    """What ``path`` (module ``module`` of built-in algorithm ``algo``) imports beyond the
    public API, one line each."""
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    own = f"plangraph.algorithms.{algo}"
    out = []
    for line, target, name in imports_of(path, module):
        where = f"{rel}:{line}"
        if target == own or target.startswith(own + "."):
            continue
        other = target.split(".")
        if (
            len(other) in (3, 4)
            and other[:2] == ["plangraph", "algorithms"]
            and other[2] in builtins
            and (len(other) == 3 or other[3] == "policy")
        ):
            continue
        if target not in PUBLIC_MODULES:
            out.append(f"{where} imports {target}: not public (use {', '.join(PUBLIC_MODULES)})")
        elif name is not None and name not in _exports(target):
            out.append(f"{where} imports {name} from {target}, which does not export it")
    return out


def _builtins() -> set[str]:
    return {p.name for p in ALGORITHMS.iterdir() if (p / "__init__.py").is_file()}


@pytest.mark.parametrize("algo", _checked())
def test_algorithm_imports_only_the_public_api(algo: str) -> None:
    modules = sorted((ALGORITHMS / algo).rglob("*.py"))
    assert modules, f"plangraph/algorithms/{algo} has no modules"
    builtins = _builtins()
    bad = [p for path in modules for p in problems(algo, path, module_name(path), builtins)]
    assert bad == [], "\n".join(bad)


def test_ddpg_and_td3_are_checked() -> None:
    assert {"ddpg", "td3"} <= set(_checked())


def test_the_check_catches_private_imports(tmp_path: Path) -> None:
    algo_dir = tmp_path / "plangraph" / "algorithms" / "mine"
    algo_dir.mkdir(parents=True)
    src = algo_dir / "policy.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "from plangraph.rl import TorchPolicy, soft_update\n"  # fine
        "from plangraph.ops.models import MLPModel\n"  # fine
        "from plangraph.algorithms.mine.config import MyConfig\n"  # its own: fine
        "from plangraph.algorithms.ddpg import DDPGConfig\n"  # another's package: fine
        "from plangraph.rl.policy import to_tensor\n"  # a private module
        "from plangraph.rl import not_exported\n"  # a name plangraph.rl does not export
        "from plangraph.algorithms.impala.vtrace import vtrace\n"  # another's private module
        "if TYPE_CHECKING:\n"
        "    from plangraph.runtime.algorithm import Algorithm\n"
        "def f():\n"
        "    import plangraph.ops.wrappers\n"
        "    importlib.import_module('plangraph.compiler')\n",
        encoding="utf-8",
    )
    # Resolved against this repository's modules, as the file would be in plangraph/.
    module = module_name(src, tmp_path)
    assert module == "plangraph.algorithms.mine.policy"
    found = problems("mine", src, module, {"ddpg", "impala", "mine"})
    use = f"(use {', '.join(PUBLIC_MODULES)})"
    assert [f.split(" ", 2)[1:] for f in found] == [
        ["imports", f"plangraph.rl.policy: not public {use}"],
        ["imports", "not_exported from plangraph.rl, which does not export it"],
        ["imports", f"plangraph.algorithms.impala.vtrace: not public {use}"],
        ["imports", f"plangraph.runtime.algorithm: not public {use}"],
        ["imports", f"plangraph.ops.wrappers: not public {use}"],
        ["imports", f"plangraph.compiler: not public {use}"],
    ]
