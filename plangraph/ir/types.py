"""Port types: what flows along an edge of a plan, as plain data.

A port type is one of

* a named type: ``SampleBatch`` (rollout rows, columnar), ``MultiAgentBatch`` (one
  ``SampleBatch`` per policy of a multi-agent worker set; what its rollouts are),
  ``GradInfo`` (gradients of one learner step plus the env steps they cover),
  ``TrainInfo`` (learner stats after an update),
  ``Result`` (one training-iteration result dict), or any other capitalised name a user
  operator declares;
* ``Any``: unknown statically;
* ``list[T]``: a list of items of type ``T`` (what ``Batch(n)`` emits);
* ``Shard[T]``: a per-shard stream of ``T`` that lives on the rollout workers, one shard
  per worker of a WorkerSet (``ParallelRollouts(mode="raw")``; a per-shard operator's
  ports); it is not a driver stream: only ``GatherShards`` brings it to the driver;
* a union ``A | B``: an item is one of several types (what merging different streams emits);
* a type variable ``T``, ``U`` or ``V`` (single capital letter) inside an operator
  signature, bound per node by unification with the actual input types
  (``Batch``: ``T -> list[T]``).

Compatibility rule (``is_assignable(actual, expected)``), checked on every edge:

1. ``expected`` is ``Any``: always compatible.
2. ``actual`` is ``Any``: compatible (gradual typing; the runtime checks items).
3. ``actual`` is a union: every member must be compatible with ``expected``.
4. ``expected`` is a union: ``actual`` must be compatible with some member.
5. named types: equal names; ``list[a]`` vs ``list[b]`` and ``Shard[a]`` vs ``Shard[b]``:
   ``a`` compatible with ``b``. A ``Shard`` is never compatible with a non-``Shard`` type
   (and the compiler refuses one fed to a driver port typed ``Any`` too, PG200).

Unions are normalised: nested unions flattened, members deduplicated and sorted by their
text, a union containing ``Any`` is ``Any``, and a one-member union is that member.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "ANY",
    "GRAD_INFO",
    "MULTI_AGENT_BATCH",
    "RESULT",
    "SAMPLE_BATCH",
    "TRAIN_INFO",
    "PortType",
    "is_assignable",
    "is_shard",
    "join",
    "list_of",
    "parse_type",
    "shard_of",
    "substitute",
    "typevar",
    "unify",
]

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VAR_RE = re.compile(r"[A-Z]")
_CONSTRUCTORS = ("list", "Shard")
"""Type constructors with one item type: ``list[T]``, ``Shard[T]``."""


@dataclass(frozen=True, order=True)
class PortType:
    """One port type. Build with :func:`parse_type` or the constants; compare with ``==``.

    ``name`` is ``"list"`` for lists, ``"Shard"`` for per-shard streams and ``"|"`` for
    unions (members in ``args``);
    ``var`` marks a type variable.
    """

    name: str
    args: tuple[PortType, ...] = field(default=())
    var: bool = False

    def __str__(self) -> str:
        if self.name == "|":
            return " | ".join(str(a) for a in self.args)
        if self.name in _CONSTRUCTORS:
            return f"{self.name}[{self.args[0]}]"
        return self.name

    def __repr__(self) -> str:
        return f"PortType({str(self)!r})"

    @property
    def is_any(self) -> bool:
        return self.name == "Any" and not self.var

    @property
    def is_union(self) -> bool:
        return self.name == "|"

    @property
    def is_list(self) -> bool:
        return self.name == "list"

    @property
    def is_shard(self) -> bool:
        """A per-shard stream ``Shard[T]`` (its item type is ``args[0]``)."""
        return self.name == "Shard" and not self.var

    def free_vars(self) -> frozenset[str]:
        if self.var:
            return frozenset({self.name})
        out: frozenset[str] = frozenset()
        for a in self.args:
            out |= a.free_vars()
        return out


ANY = PortType("Any")
SAMPLE_BATCH = PortType("SampleBatch")
MULTI_AGENT_BATCH = PortType("MultiAgentBatch")
GRAD_INFO = PortType("GradInfo")
TRAIN_INFO = PortType("TrainInfo")
RESULT = PortType("Result")


def typevar(name: str = "T") -> PortType:
    """A type variable (a single capital letter) for generic operator signatures."""
    if not _VAR_RE.fullmatch(name):
        raise ValueError(f"a type variable is a single capital letter, got {name!r}")
    return PortType(name, var=True)


def list_of(item: PortType) -> PortType:
    return PortType("list", (item,))


def shard_of(item: PortType) -> PortType:
    """``Shard[item]``: a per-shard stream of ``item`` on the rollout workers."""
    return PortType("Shard", (item,))


def is_shard(t: PortType | None) -> bool:
    """Whether ``t`` is a per-shard stream type (a union with a ``Shard`` member counts)."""
    if t is None:
        return False
    if t.is_union:
        return any(a.is_shard for a in t.args)
    return t.is_shard


def join(types: Iterable[PortType]) -> PortType:
    """The normalised union of ``types`` (``Any`` if any member is ``Any``).

    Raises ``ValueError`` on an empty input.
    """
    members: set[PortType] = set()
    for t in types:
        if t.is_union:
            members.update(t.args)
        else:
            members.add(t)
    if not members:
        raise ValueError("join() of no types")
    if any(m.is_any for m in members):
        return ANY
    if len(members) == 1:
        return next(iter(members))
    return PortType("|", tuple(sorted(members, key=str)))


def parse_type(text: str | PortType) -> PortType:
    """Parse ``"SampleBatch"``, ``"list[T]"``, ``"Shard[SampleBatch]"``,
    ``"SampleBatch | TrainInfo"``, ``"Any"``.

    Single capital letters are type variables. Raises ``ValueError`` on bad syntax.
    """
    if isinstance(text, PortType):
        return text
    pos, t = _parse_union(text, 0)
    pos = _skip_ws(text, pos)
    if pos != len(text):
        raise ValueError(f"bad port type {text!r}: unexpected {text[pos:]!r}")
    return t


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == " ":
        pos += 1
    return pos


def _parse_union(text: str, pos: int) -> tuple[int, PortType]:
    pos, first = _parse_atom(text, pos)
    members = [first]
    pos = _skip_ws(text, pos)
    while pos < len(text) and text[pos] == "|":
        pos, t = _parse_atom(text, pos + 1)
        members.append(t)
        pos = _skip_ws(text, pos)
    return pos, join(members) if len(members) > 1 else first


def _parse_atom(text: str, pos: int) -> tuple[int, PortType]:
    pos = _skip_ws(text, pos)
    m = _NAME_RE.match(text, pos)
    if not m:
        raise ValueError(f"bad port type {text!r}: expected a name at column {pos + 1}")
    name, pos = m.group(), m.end()
    if name in _CONSTRUCTORS:
        if pos >= len(text) or text[pos] != "[":
            raise ValueError(f"bad port type {text!r}: {name} needs an item type, {name}[T]")
        pos, item = _parse_union(text, pos + 1)
        pos = _skip_ws(text, pos)
        if pos >= len(text) or text[pos] != "]":
            raise ValueError(f"bad port type {text!r}: missing ']'")
        return pos + 1, PortType(name, (item,))
    if _VAR_RE.fullmatch(name):
        return pos, typevar(name)
    return pos, PortType(name)


def is_assignable(actual: PortType, expected: PortType) -> bool:
    """True if items of type ``actual`` may flow into a port of type ``expected``.

    Both types must be free of type variables (substitute first).
    """
    if expected.is_any or actual.is_any:
        return True
    if actual.is_union:
        return all(is_assignable(a, expected) for a in actual.args)
    if expected.is_union:
        return any(is_assignable(actual, e) for e in expected.args)
    if actual.name in _CONSTRUCTORS or expected.name in _CONSTRUCTORS:
        return actual.name == expected.name and is_assignable(actual.args[0], expected.args[0])
    return actual.name == expected.name


def unify(pattern: PortType, actual: PortType, bindings: dict[str, PortType]) -> bool:
    """Match ``actual`` against a signature ``pattern``, extending ``bindings`` in place.

    A variable already bound is widened to the union of its bindings (so a variadic
    ``T, T, ...`` port binds ``T`` to the union of all its inputs). Returns False when the
    types cannot match; ``bindings`` may then hold partial results.
    """
    if pattern.var:
        prev = bindings.get(pattern.name)
        bindings[pattern.name] = actual if prev is None else join([prev, actual])
        return True
    if not pattern.free_vars():
        return is_assignable(actual, pattern)
    if actual.is_any:
        for v in pattern.free_vars():
            bindings.setdefault(v, ANY)
        return True
    if actual.is_union:
        return all(unify(pattern, a, bindings) for a in actual.args)
    if pattern.name in _CONSTRUCTORS and actual.name == pattern.name:
        return unify(pattern.args[0], actual.args[0], bindings)
    if pattern.is_union:
        # Try members without variables first, then the first member that unifies.
        if any(not p.free_vars() and is_assignable(actual, p) for p in pattern.args):
            return True
        return any(unify(p, actual, bindings) for p in pattern.args if p.free_vars())
    return False


def substitute(t: PortType, bindings: Mapping[str, PortType]) -> PortType:
    """Replace bound variables in ``t``; unbound variables become ``Any``."""
    if t.var:
        return bindings.get(t.name, ANY)
    if not t.args:
        return t
    args = tuple(substitute(a, bindings) for a in t.args)
    return join(args) if t.is_union else PortType(t.name, args)
