"""References inside a plan: ``"${expr}"`` to config values and ``"@id"`` to resources.

A config reference is a whole JSON string ``"${key}"``; the compiler replaces it with the
value of ``key`` from the plan's ``config`` (defaults merged with overrides), keeping the
value's type (an int stays an int). The text inside ``${...}`` may also be a small
arithmetic expression over config keys, so derived sizes stay derived when a key is
overridden: ``"${ceil(train_batch_size / microbatch_size)}"``.

The expression language is deliberately tiny and is *parsed*, never evaluated by Python:
config keys, int/float literals, ``+ - * / // %``, unary ``-``, parentheses, and the
functions ``ceil``, ``floor``, ``min``, ``max``, ``abs``, ``int``, ``float``. It is
bounded (:mod:`plangraph.ir.limits`): at most ``MAX_EXPR_CHARS`` characters nested at most
``MAX_EXPR_DEPTH`` deep, and every intermediate value must be a finite number with
integers within 64 bits, so evaluation takes microseconds whatever the input.

In Python, :class:`PlanConfig` gives the same references as attributes:
``cfg.train_batch_size`` is ``"${train_batch_size}"`` and
``math.ceil(cfg.train_batch_size / cfg.microbatch_size)`` is the expression above.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from plangraph.ir.limits import MAX_EXPR_CHARS, MAX_EXPR_DEPTH, check_number
from plangraph.text import brief, close_matches

__all__ = [
    "CONFIG_KEY_RE",
    "ID_RE",
    "RESOURCE_REF_RE",
    "ConfigExpr",
    "ConfigRef",
    "ConfigRefError",
    "PlanConfig",
    "iter_config_refs",
    "parse_config_ref",
    "resource_ref_id",
]

ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
"""Node and resource ids: no ``/`` or ``~`` so they sit in JSON pointers unescaped."""
CONFIG_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RESOURCE_REF_RE = re.compile(r"@([A-Za-z_][A-Za-z0-9_.\-]*)")
_CONFIG_REF_RE = re.compile(r"\$\{(.*)\}", re.DOTALL)

_FUNCS: dict[str, Callable[..., Any]] = {
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
}
_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


class ConfigRefError(ValueError):
    """A ``${...}`` reference that does not parse, names unknown keys, or fails to evaluate.

    ``unknown`` lists config keys it names that the config lacks; ``suggestions`` maps each
    to close matches.
    """

    def __init__(
        self,
        message: str,
        unknown: tuple[str, ...] = (),
        suggestions: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.unknown = unknown
        self.suggestions = suggestions


def resource_ref_id(value: object) -> str | None:
    """``"@replay"`` -> ``"replay"``; anything else -> None."""
    if isinstance(value, str):
        m = RESOURCE_REF_RE.fullmatch(value)
        if m:
            return m.group(1)
    return None


class ConfigRef:
    """A parsed ``${expr}`` reference. ``keys``: the config keys it reads, in order."""

    def __init__(self, text: str) -> None:
        m = _CONFIG_REF_RE.fullmatch(text)
        if not m:
            raise ConfigRefError(f"{text!r} is not a config reference '${{key}}'")
        self.text = text
        self.expr = m.group(1).strip()
        if not self.expr:
            raise ConfigRefError("empty config reference '${}'")
        if len(self.expr) > MAX_EXPR_CHARS:
            raise ConfigRefError(
                f"config reference {brief(text, 60)} is {len(self.expr)} characters long "
                f"(at most {MAX_EXPR_CHARS})"
            )
        try:
            self._tree = ast.parse(self.expr, mode="eval")
        except SyntaxError as exc:
            raise ConfigRefError(
                f"config reference {brief(text)} does not parse: {exc.msg}"
            ) from None
        except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes; deep nesting
            raise ConfigRefError(f"config reference {brief(text)} does not parse: {exc}") from None
        if _depth(self._tree.body) > MAX_EXPR_DEPTH:
            raise ConfigRefError(
                f"config reference {brief(text, 60)} nests more than {MAX_EXPR_DEPTH} "
                "levels of operators, calls or parentheses"
            )
        keys: list[str] = []
        self._check(self._tree.body, keys)
        self.keys = tuple(dict.fromkeys(keys))

    @property
    def is_plain_key(self) -> bool:
        return isinstance(self._tree.body, ast.Name)

    def _check(self, node: ast.AST, keys: list[str]) -> None:
        if isinstance(node, ast.Name):
            keys.append(node.id)
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise ConfigRefError(
                    f"config reference {brief(self.text)}: only numbers may appear as literals"
                )
            why = check_number(node.value)
            if why is not None:
                raise ConfigRefError(f"config reference {brief(self.text)}: {why}")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            self._check(node.left, keys)
            self._check(node.right, keys)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            self._check(node.operand, keys)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCS
            and not node.keywords
        ):
            for a in node.args:
                self._check(a, keys)
        else:
            allowed = ", ".join(sorted(_FUNCS))
            raise ConfigRefError(
                f"config reference {brief(self.text)}: unsupported expression "
                f"{brief(ast.unparse(node))} (allowed: config keys, numbers, + - * / // %, "
                f"parentheses, and {allowed})"
            )

    def evaluate(self, config: Mapping[str, Any]) -> Any:
        """The referenced value; raises :class:`ConfigRefError` (unknown keys, bad math)."""
        unknown = tuple(k for k in self.keys if k not in config)
        if unknown:
            sugg: list[str] = []
            for k in unknown:
                sugg += close_matches(k, config)
            names = ", ".join(brief(k) for k in unknown)
            raise ConfigRefError(
                f"config reference {brief(self.text)} names unknown config "
                f"key{'s' if len(unknown) > 1 else ''} {names}",
                unknown=unknown,
                suggestions=tuple(dict.fromkeys(sugg)),
            )
        if self.is_plain_key:
            return config[self.expr]
        try:
            return self._eval(self._tree.body, config)
        except ConfigRefError:
            raise
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise ConfigRefError(f"config reference {brief(self.text)} fails: {exc}") from None

    def _eval(self, node: ast.AST, config: Mapping[str, Any]) -> Any:
        value = self._eval_node(node, config)
        # Bounded at every step: a*a*a... with big config values stays cheap, and no
        # infinity or NaN ever comes out (1e308 * 10, float(10**400)).
        if check_number(value) is not None:
            what = (
                "not a finite number"
                if isinstance(value, float)
                else "beyond the integer bound 2**63 - 1"
            )
            raise ConfigRefError(
                f"config reference {brief(self.text)} fails: {brief(ast.unparse(node), 60)} "
                f"gives {brief(value)}, {what}"
            )
        return value

    def _eval_node(self, node: ast.AST, config: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Name):
            value = config[node.id]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigRefError(
                    f"config reference {brief(self.text)}: {brief(node.id)} is {brief(value)}, "
                    "arithmetic needs a number"
                )
            return value
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](
                self._eval(node.left, config), self._eval(node.right, config)
            )
        if isinstance(node, ast.UnaryOp):
            v = self._eval(node.operand, config)
            return -v if isinstance(node.op, ast.USub) else v
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return _FUNCS[node.func.id](*(self._eval(a, config) for a in node.args))


def _depth(tree: ast.AST) -> int:
    """How deep ``tree`` nests (1 for a name or a number; counting stops past
    ``MAX_EXPR_DEPTH``), without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if d <= MAX_EXPR_DEPTH:  # deeper is an error anyway: stop counting
            stack.extend((c, d + 1) for c in ast.iter_child_nodes(node) if _counts(c))
    return deepest


def _counts(node: ast.AST) -> bool:
    # operator tokens (ast.Add, ast.Load) are children in the tree but not nesting
    return not isinstance(node, ast.operator | ast.unaryop | ast.expr_context)


def parse_config_ref(value: object) -> ConfigRef | None:
    """A :class:`ConfigRef` if ``value`` is a ``"${...}"`` string, else None.

    Raises :class:`ConfigRefError` when it looks like a reference but does not parse.
    """
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return ConfigRef(value)
    return None


def iter_config_refs(value: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    """Yield ``(json_pointer, text)`` for every ``"${...}"`` string inside ``value``."""
    if isinstance(value, str):
        if value.startswith("${") and value.endswith("}"):
            yield pointer, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from iter_config_refs(v, f"{pointer}/{_escape(str(k))}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from iter_config_refs(v, f"{pointer}/{i}")


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


# -- Python authoring -------------------------------------------------------------------

_ATOM = 100


class ConfigExpr:
    """A config reference built in Python; ``str()`` is its ``"${...}"`` JSON form.

    Supports ``+ - * / // %`` with numbers and other expressions, unary ``-``,
    ``math.ceil`` and ``math.floor``. It has no value until the compiler resolves it, so
    using it as a bool (``if cfg.x > 3``) raises ``TypeError``.
    """

    __slots__ = ("_expr", "_prec")

    def __init__(self, expr: str, prec: int = _ATOM) -> None:
        self._expr = expr
        self._prec = prec

    @property
    def ref(self) -> str:
        return "${" + self._expr + "}"

    def __str__(self) -> str:
        return self.ref

    def __repr__(self) -> str:
        return f"ConfigExpr({self.ref!r})"

    def __bool__(self) -> bool:
        raise TypeError(
            f"{self.ref} has no value while the plan is being built; it is resolved when "
            "the plan compiles"
        )

    @staticmethod
    def _operand(x: object, prec: int, right: bool = False) -> str:
        if isinstance(x, ConfigExpr):
            if x._prec < prec or (right and x._prec == prec):
                return f"({x._expr})"
            return x._expr
        if isinstance(x, bool) or not isinstance(x, int | float):
            raise TypeError(f"config expressions combine numbers only, got {x!r}")
        return repr(x) if x >= 0 else f"({x!r})"

    def _bin(self, other: object, op: str, prec: int, reverse: bool = False) -> ConfigExpr:
        a, b = (other, self) if reverse else (self, other)
        text = f"{self._operand(a, prec)} {op} {self._operand(b, prec, right=True)}"
        return ConfigExpr(text, prec)

    def __add__(self, o: object) -> ConfigExpr:
        return self._bin(o, "+", 10)

    def __radd__(self, o: object) -> ConfigExpr:
        return self._bin(o, "+", 10, reverse=True)

    def __sub__(self, o: object) -> ConfigExpr:
        return self._bin(o, "-", 10)

    def __rsub__(self, o: object) -> ConfigExpr:
        return self._bin(o, "-", 10, reverse=True)

    def __mul__(self, o: object) -> ConfigExpr:
        return self._bin(o, "*", 20)

    def __rmul__(self, o: object) -> ConfigExpr:
        return self._bin(o, "*", 20, reverse=True)

    def __truediv__(self, o: object) -> ConfigExpr:
        return self._bin(o, "/", 20)

    def __rtruediv__(self, o: object) -> ConfigExpr:
        return self._bin(o, "/", 20, reverse=True)

    def __floordiv__(self, o: object) -> ConfigExpr:
        return self._bin(o, "//", 20)

    def __rfloordiv__(self, o: object) -> ConfigExpr:
        return self._bin(o, "//", 20, reverse=True)

    def __mod__(self, o: object) -> ConfigExpr:
        return self._bin(o, "%", 20)

    def __neg__(self) -> ConfigExpr:
        return ConfigExpr(f"-{self._operand(self, 30)}", 30)

    def __ceil__(self) -> ConfigExpr:
        return ConfigExpr(f"ceil({self._expr})")

    def __floor__(self) -> ConfigExpr:
        return ConfigExpr(f"floor({self._expr})")


class PlanConfig(Mapping[str, Any]):
    """A plan's config defaults; attribute access gives references to them.

    >>> cfg = PlanConfig(train_batch_size=512)
    >>> str(cfg.train_batch_size)
    '${train_batch_size}'
    >>> dict(cfg)
    {'train_batch_size': 512}

    An unknown attribute raises ``AttributeError`` with close matches.
    """

    _values: dict[str, Any]

    def __init__(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        data = {**(values or {}), **kwargs}
        for key in data:
            if not CONFIG_KEY_RE.fullmatch(key):
                raise ValueError(f"config key {key!r} must be an identifier")
        object.__setattr__(self, "_values", data)

    def __getattr__(self, key: str) -> ConfigExpr:
        values: dict[str, Any] = object.__getattribute__(self, "_values")
        if key.startswith("__") or key not in values:
            close = close_matches(key, values)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise AttributeError(f"config has no key {key!r}{hint}")
        return ConfigExpr(key)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("PlanConfig is read-only; pass values to the constructor")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"PlanConfig({self._values!r})"
