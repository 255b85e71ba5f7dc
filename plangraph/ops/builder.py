"""Python authoring: operator calls and stream methods that build a plan graph.

Nothing runs here; every call records a node and the file:line that made it::

    rollouts = ParallelRollouts(mode="bulk_sync")
    train = rollouts.combine(ConcatBatches(min_batch_size=cfg.train_batch_size)).for_each(
        TrainOneStep()
    )
    plan = Plan.from_builder(StandardMetricsReporting(train), name="a2c", config=cfg, ...)

Calling an operator gives

* a :class:`Stream` for a source (``ParallelRollouts(...)``) or when streams are passed
  (``StandardMetricsReporting(train)``, ``Concurrently([a, b], mode="round_robin")``);
* otherwise a :class:`PendingOp`, an operator waiting for its input, to hand to the
  stream method its ``apply`` mode names (``.for_each``, ``.combine``, ``.filter``).
  Using the wrong method raises :class:`PlanBuildError` at once.

``id=`` names a node (default: the op name in snake_case, ``_2``, ``_3``... if taken).
Parameter values are checked when the plan compiles, so all problems are reported
together with the file:line of the call.
"""

from __future__ import annotations

import inspect
import itertools
import os
import re
from collections.abc import Iterable
from typing import Any

from plangraph.errors import PlanError
from plangraph.ir.plan import Node, canonical_json_value
from plangraph.ir.refs import ID_RE
from plangraph.ir.source import Location
from plangraph.ops.registry import OpSignature, get_op

__all__ = ["OpFactory", "PendingOp", "PlanBuildError", "Stream", "op_factory"]

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OWN_DIRS = (os.path.join(_HERE, "ops") + os.sep, os.path.join(_HERE, "ir") + os.sep)
_counter = itertools.count()


class PlanBuildError(PlanError):
    """A plan written in Python cannot be built; ``location`` is the offending call."""

    def __init__(self, message: str, location: Location | None = None, code: str = "PG103"):
        super().__init__(message)
        self.message = message
        self.location = location
        self.code = code

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


def _caller_location() -> Location | None:
    """file:line of the first frame outside plangraph.ops / plangraph.ir."""
    frame = inspect.currentframe()  # None where the interpreter keeps no frames
    frame = frame.f_back if frame is not None else None
    while frame is not None:
        fname = frame.f_code.co_filename
        if not os.path.abspath(fname).startswith(_OWN_DIRS):
            try:
                rel = os.path.relpath(fname)
                fname = fname if rel.startswith("..") else rel
            except ValueError:  # other drive (Windows)
                pass
            return Location(fname, frame.f_lineno)
        frame = frame.f_back
    return None


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _canonical_params(sig: OpSignature, params: dict[str, Any], loc: Location | None) -> dict:
    try:
        return canonical_json_value(params, f"{sig.name} params")
    except ValueError as exc:
        raise PlanBuildError(str(exc), loc) from None


def _check_id(node_id: str | None, loc: Location | None) -> str | None:
    if node_id is not None and (not isinstance(node_id, str) or not ID_RE.fullmatch(node_id)):
        raise PlanBuildError(
            f"node id {node_id!r} must start with a letter or '_' and use only letters, "
            "digits, '_', '-' and '.'",
            loc,
        )
    return node_id


class Stream:
    """One node of a plan being built, seen as the stream of items it emits."""

    __slots__ = ("_id", "_inputs", "_location", "_params", "_seq", "_sig")

    def __init__(
        self,
        sig: OpSignature,
        inputs: tuple[Stream, ...],
        params: dict[str, Any],
        node_id: str | None,
        location: Location | None,
    ) -> None:
        self._sig = sig
        self._inputs = inputs
        self._params = params
        self._id = node_id
        self._location = location
        self._seq = next(_counter)

    def __repr__(self) -> str:
        return (
            f"<Stream {self._id or _snake(self._sig.name)}: {self._sig.name} -> {self._sig.output}>"
        )

    @property
    def op(self) -> str:
        return self._sig.name

    @property
    def location(self) -> Location | None:
        return self._location

    def named(self, node_id: str) -> Stream:
        """Give this node an explicit id; returns the stream itself."""
        self._id = _check_id(node_id, _caller_location())
        return self

    # -- applying pending ops -------------------------------------------------------------

    def _apply(self, method: str, op: PendingOp, id: str | None) -> Stream:
        loc = _caller_location()
        if not isinstance(op, PendingOp):
            hint = ""
            if isinstance(op, OpFactory):
                hint = f"; call it first: .{method}({op.name}(...))"
            elif callable(op):
                hint = (
                    "; plain Python callables cannot be serialised, register an operator "
                    "with plangraph.ops.register_op"
                )
            raise PlanBuildError(f".{method}() takes an operator, got {op!r}{hint}", loc)
        sig = op.signature
        if sig.apply != method:
            right = {
                "for_each": f"stream.for_each({sig.name}(...))",
                "combine": f"stream.combine({sig.name}(...))",
                "filter": f"stream.filter({sig.name}(...))",
                "stream": f"{sig.name}(stream, ...)",
                "source": f"{sig.name}(...) (a source takes no input)",
            }[sig.apply]
            kind = {
                "for_each": "a map (one output per item)",
                "combine": "a flat-map (zero or more outputs per item)",
                "filter": "a filter",
                "stream": "a stream operator",
                "source": "a source",
            }[sig.apply]
            raise PlanBuildError(
                f"{sig.name} is {kind}; write {right}, not .{method}({sig.name}(...))", loc
            )
        op._used = True
        return Stream(sig, (self,), op.params, _check_id(id or op.node_id, loc), loc)

    def for_each(self, op: PendingOp, *, id: str | None = None) -> Stream:
        """Map every item through ``op`` (an op with ``apply == "for_each"``)."""
        return self._apply("for_each", op, id)

    def combine(self, op: PendingOp, *, id: str | None = None) -> Stream:
        """Flat-map every item through ``op`` (``apply == "combine"``, e.g. ConcatBatches)."""
        return self._apply("combine", op, id)

    def filter(self, op: PendingOp, *, id: str | None = None) -> Stream:
        """Keep the items for which predicate ``op`` holds (``apply == "filter"``)."""
        return self._apply("filter", op, id)

    # -- generic combinators --------------------------------------------------------------

    def batch(self, n: Any, *, id: str | None = None) -> Stream:
        """Group ``n`` items into a list (a ``Batch`` node): ``T -> list[T]``."""
        return _make(get_op("Batch"), (self,), {"n": n}, id, _caller_location())

    def flatten(self, *, id: str | None = None) -> Stream:
        """Emit list items one by one (a ``Flatten`` node): ``list[T] -> T``."""
        return _make(get_op("Flatten"), (self,), {}, id, _caller_location())

    def union(self, *others: Stream, deterministic: bool = False, id: str | None = None) -> Stream:
        """Merge this stream with ``others`` (a ``Union`` node)."""
        params = {"deterministic": True} if deterministic else {}
        streams = (self, *_flatten_streams(others, _caller_location()))
        return _make(get_op("Union"), streams, params, id, _caller_location())

    def duplicate(self, n: int = 2, *, id: str | None = None) -> tuple[Stream, ...]:
        """Fan out to ``n`` consumers: ``n`` handles on one ``Duplicate`` node."""
        loc = _caller_location()
        if not isinstance(n, int) or n < 1:
            raise PlanBuildError(f"duplicate(n) needs n >= 1, got {n!r}", loc)
        dup = _make(get_op("Duplicate"), (self,), {}, id, loc)
        return (dup,) * n

    # -- conversion to IR -----------------------------------------------------------------

    def __plangraph_nodes__(self) -> tuple[dict[str, Node], dict[str, Location], str]:
        """Every node this stream depends on, as IR nodes in creation order."""
        seen: dict[int, Stream] = {}
        todo = [self]
        while todo:
            s = todo.pop()
            if id(s) in seen:
                continue
            seen[id(s)] = s
            todo.extend(s._inputs)
        streams = sorted(seen.values(), key=lambda s: s._seq)
        ids: dict[int, str] = {}
        taken: dict[str, Stream] = {}
        for s in streams:
            if s._id is not None:
                if s._id in taken:
                    first = taken[s._id]
                    raise PlanBuildError(
                        f"duplicate node id {s._id!r}: also used by the {first.op} node "
                        f"at {first._location}",
                        s._location,
                        code="PG114",
                    )
                taken[s._id] = s
                ids[id(s)] = s._id
        for s in streams:
            if id(s) in ids:
                continue
            base = _snake(s.op)
            name, k = base, 2
            while name in taken:
                name, k = f"{base}_{k}", k + 1
            taken[name] = s
            ids[id(s)] = name
        nodes: dict[str, Node] = {}
        locs: dict[str, Location] = {}
        for s in streams:
            nid = ids[id(s)]
            nodes[nid] = Node(
                op=s.op, inputs=tuple(ids[id(i)] for i in s._inputs), params=s._params
            )
            if s._location is not None:
                locs[nid] = s._location
        return nodes, locs, ids[id(self)]


class PendingOp:
    """An operator call waiting for its input stream (see the module docstring)."""

    __slots__ = ("_used", "location", "node_id", "params", "signature")

    def __init__(
        self,
        sig: OpSignature,
        params: dict[str, Any],
        node_id: str | None,
        location: Location | None,
    ) -> None:
        self.signature = sig
        self.params = params
        self.node_id = node_id
        self.location = location
        self._used = False

    def __repr__(self) -> str:
        return f"<PendingOp {self.signature.name}({self.params})>"

    def __call__(self, *streams: Stream | Iterable[Stream], id: str | None = None) -> Stream:
        """Apply to ``streams`` directly: ``TrainOneStep()(batches)``."""
        loc = _caller_location()
        ins = _flatten_streams(streams, loc)
        return _make(self.signature, ins, self.params, id or self.node_id, loc)


def _flatten_streams(args: Iterable[Any], loc: Location | None) -> tuple[Stream, ...]:
    out: list[Stream] = []
    for a in args:
        if isinstance(a, Stream):
            out.append(a)
        elif isinstance(a, list | tuple):
            out.extend(_flatten_streams(a, loc))
        else:
            hint = " (call the operator with its params by keyword)" if not callable(a) else ""
            raise PlanBuildError(f"expected a stream, got {a!r}{hint}", loc)
    return tuple(out)


def _make(
    sig: OpSignature,
    inputs: tuple[Stream, ...],
    params: dict[str, Any],
    node_id: str | None,
    loc: Location | None,
) -> Stream:
    if sig.apply == "source" and inputs:
        raise PlanBuildError(f"{sig.name} is a source and takes no input streams", loc)
    if sig.apply in ("for_each", "combine", "filter") and len(inputs) != 1:
        raise PlanBuildError(f"{sig.name} applies to exactly one stream, got {len(inputs)}", loc)
    return Stream(sig, inputs, _canonical_params(sig, params, loc), _check_id(node_id, loc), loc)


class OpFactory:
    """Calling an operator by name in Python: ``ParallelRollouts(mode="bulk_sync")``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__doc__ = get_op(name).doc
        self.__name__ = name

    @property
    def signature(self) -> OpSignature:
        return get_op(self.name)

    def __repr__(self) -> str:
        return f"<operator {self.name}: {self.signature.type_text()}>"

    def __call__(self, *streams: Any, id: str | None = None, **params: Any) -> Any:
        loc = _caller_location()
        sig = self.signature
        ins = _flatten_streams(streams, loc)
        if sig.apply == "source" or ins:
            return _make(sig, ins, params, id, loc)
        return PendingOp(sig, _canonical_params(sig, params, loc), _check_id(id, loc), loc)


def op_factory(name: str) -> OpFactory:
    """The Python builder for registered operator ``name``."""
    get_op(name)  # raises KeyError with close matches
    return OpFactory(name)
