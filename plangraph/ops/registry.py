"""The operator and resource-kind registries: signatures only, no implementations.

An :class:`OpSignature` says what an operator consumes and produces (port types), how it
applies to its input stream (``apply``), its ``Params`` model (defaults, ranges, units),
and which params are references to resources (read or write). Implementations live in
``plangraph.runtime`` and are looked up by op name when a compiled plan is built.

``apply`` values:

* ``source``: no inputs; creates a stream (``ParallelRollouts``, ``LocalReplay``);
* ``for_each``: a map, one output item per input item (``TrainOneStep``); used with
  ``stream.for_each(op)``;
* ``combine``: a flat-map, zero or more output items per input item (``ConcatBatches``);
  used with ``stream.combine(op)``;
* ``filter``: a predicate; items pass or are dropped; used with ``stream.filter(op)``;
* ``stream``: works on whole streams, called with them as arguments
  (``Concurrently([a, b])``, ``StandardMetricsReporting(train)``, ``Batch``, ``Flatten``,
  ``Union``, ``Duplicate``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from plangraph.errors import RegistrationError, UnknownOperatorError
from plangraph.ir.types import PortType, is_shard, parse_type
from plangraph.text import close_matches

__all__ = [
    "APPLY_MODES",
    "CATEGORIES",
    "OpParams",
    "OpSignature",
    "ResourceKind",
    "ResourceParam",
    "all_ops",
    "all_resource_kinds",
    "close_matches",
    "get_op",
    "get_resource_kind",
    "register_resource_kind",
    "register_signature",
    "unregister_op",
]

Category = Literal["source", "combine", "train", "replay", "merge", "sink"]
Placement = Literal["driver", "actors", "aggregators", "shard"]
PLACEMENTS: tuple[str, ...] = ("driver", "actors", "aggregators", "shard")
"""Where an operator's work runs: in the driver process, on the rollout-worker actors
(``ParallelRollouts`` samples there), on aggregation actors of its own near the rollout
workers (``AggregateBatches``), or ``"shard"``: a per-shard operator, run inside each
rollout worker on that worker's own stream (its ports are ``Shard[...]``; the shard
operator contract in docs/extending.md). Learner threads are resources, shown as such."""
Apply = Literal["source", "for_each", "combine", "filter", "stream"]
CATEGORIES: tuple[str, ...] = ("source", "combine", "train", "replay", "merge", "sink")
APPLY_MODES: tuple[str, ...] = ("source", "for_each", "combine", "filter", "stream")

ParamCheck = Callable[[Any, int], list[tuple[str, str]]]
"""``(params, num_inputs) -> [(param_name, message), ...]``: checks that need the arity."""
OutputRule = Callable[[Sequence[PortType], Any], PortType]
"""``(input_types, params) -> output type``, for merge ops whose output depends on both."""


class OpParams(BaseModel):
    """Base class of operator ``Params`` models: frozen, unknown keys rejected, numbers
    finite (NaN and Infinity are rejected: no param means either)."""

    # Every plangraph model is built (its validator made) on first use, not at import: a
    # plan pays only for the operators it uses (about 0.05 s of each `plangraph validate`).
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)


class NoParams(OpParams):
    """This operator takes no parameters."""


@dataclass(frozen=True)
class ResourceParam:
    """A param holding an ``"@id"`` reference to a resource of ``kind``.

    ``access``: ``"write"`` (adds to or updates the resource) or ``"read"``. ``also``: other
    kinds the param accepts (``StoreToReplay`` writes a ``ReplayBuffer`` or the sharded
    ``ReplayActors``).
    """

    param: str
    kind: str
    access: Literal["read", "write"]
    also: tuple[str, ...] = ()

    @property
    def kinds(self) -> tuple[str, ...]:
        """Every kind the param accepts, ``kind`` first."""
        return (self.kind, *self.also)

    def accepts(self, kind: str) -> bool:
        return kind in self.kinds

    def kinds_text(self) -> str:
        """``"ReplayBuffer"`` or ``"ReplayBuffer or ReplayActors"``."""
        return " or ".join(self.kinds)


@dataclass(frozen=True)
class OpSignature:
    """What the compiler knows about one operator.

    ``inputs``: types of the fixed input ports, in order. ``variadic``: if set, the op
    takes ``min_inputs`` or more inputs, each of that type (``inputs`` is then empty).
    Types may use variables (``T``) bound per node by unification.
    """

    name: str
    category: Category
    apply: Apply
    output: PortType
    params_model: type[BaseModel] = NoParams
    inputs: tuple[PortType, ...] = ()
    variadic: PortType | None = None
    min_inputs: int = 0
    doc: str = ""
    resources: tuple[ResourceParam, ...] = ()
    check_params: ParamCheck | None = field(default=None, compare=False)
    infer_output: OutputRule | None = field(default=None, compare=False)
    builtin: bool = False
    placement: Placement = "driver"
    pure: bool = False
    """A function of its input item alone (no counters, resources, or state kept between
    items; deterministic; never ``NOT_READY``; keeps a batch's rows, count and order):
    the compiler may move it onto the rollout workers (pass ``worker-side-maps``)."""
    rowwise: bool = False
    """``pure`` and each output row depends on the same input row only, so
    ``f(concat(a, b)) == concat(f(a), f(b))``: it may run on each worker's fragment before
    a bulk-sync gather concatenates them."""
    learns: bool = False
    """The worker set's policy learns from this op's items: it steps an optimizer (or
    computes the gradients one applies) in the driver's learner, or feeds a learner thread
    that does, or, placed per shard, trains each rollout worker's own copy. ``explain``
    says from these where a plan's learners run (in the driver, on the workers, or both),
    and the compiler checks what a learning op fed experience batches trains on (replay
    or fresh rollouts: PG171, PG172)."""
    origin: str | None = field(default=None, compare=False)
    """Where a user op was registered (file:line): re-running that same code (a Python
    plan loaded twice) replaces the op instead of failing."""

    def arity_text(self) -> str:
        if self.variadic is not None:
            return f"{self.min_inputs} or more inputs"
        n = len(self.inputs)
        return "no inputs" if n == 0 else f"exactly {n} input{'s' if n != 1 else ''}"

    def accepts_arity(self, n: int) -> bool:
        if self.variadic is not None:
            return n >= self.min_inputs
        return n == len(self.inputs)

    def port_type(self, index: int) -> PortType:
        """The declared type of input port ``index`` (variadic ports share one type)."""
        if self.variadic is not None:
            return self.variadic
        return self.inputs[index]

    def type_text(self) -> str:
        """``"SampleBatch -> TrainInfo"``, ``"Any, Any, ... -> Any"``, ``"() -> SampleBatch"``."""
        if self.variadic is not None:
            ins = ", ".join([str(self.variadic)] * max(self.min_inputs, 1)) + ", ..."
        elif not self.inputs:
            ins = "()"
        else:
            ins = ", ".join(str(t) for t in self.inputs)
        return f"{ins} -> {self.output}"

    def resource_param(self, param: str) -> ResourceParam | None:
        for r in self.resources:
            if r.param == param:
                return r
        return None


@dataclass(frozen=True)
class ResourceKind:
    """A kind of resource a plan may declare. ``needs_writer_and_reader``: the compiler
    reports a declared resource of this kind that nothing writes or nothing reads.
    ``notes(params) -> lines``: what ``explain`` says about a declared resource beyond its
    params (e.g. the shards of ``ReplayActors``, per-worker exploration of a ``WorkerSet``)."""

    name: str
    params_model: type[BaseModel]
    doc: str = ""
    needs_writer_and_reader: bool = False
    notes: Callable[[Any], list[str]] | None = field(default=None, compare=False)


_OPS: dict[str, OpSignature] = {}
_KINDS: dict[str, ResourceKind] = {}


def register_signature(sig: OpSignature, *, replace: bool = False) -> OpSignature:
    """Add ``sig`` to the catalog.

    Raises:
        RegistrationError: (a ``ValueError``) the name is taken (unless ``replace``) or the
            signature is inconsistent.
    """
    old = _OPS.get(sig.name)
    same_site = old is not None and old.origin is not None and old.origin == sig.origin
    if old is not None and old.builtin and not replace:
        raise RegistrationError(f"{sig.name!r} is a built-in operator")
    if old is not None and not replace and not same_site:
        where = f" at {old.origin}" if old.origin else ""
        raise RegistrationError(
            f"operator {sig.name!r} is already registered{where} (pass replace=True)"
        )
    if sig.category not in CATEGORIES:
        raise RegistrationError(f"category must be one of {CATEGORIES}, got {sig.category!r}")
    if sig.placement not in PLACEMENTS:
        raise RegistrationError(f"placement must be one of {PLACEMENTS}, got {sig.placement!r}")
    if sig.apply not in APPLY_MODES:
        raise RegistrationError(f"apply must be one of {APPLY_MODES}, got {sig.apply!r}")
    if sig.apply == "source" and (sig.inputs or sig.variadic is not None):
        raise RegistrationError(f"{sig.name}: a source op takes no inputs")
    if sig.apply in ("for_each", "combine", "filter") and (
        len(sig.inputs) != 1 or sig.variadic is not None
    ):
        raise RegistrationError(f"{sig.name}: a {sig.apply} op takes exactly one input")
    if sig.pure and sig.apply != "for_each":
        raise RegistrationError(
            f"{sig.name}: pure=True declares a per-item map; it needs apply='for_each', "
            f"not {sig.apply!r}"
        )
    if sig.rowwise and not sig.pure:
        raise RegistrationError(f"{sig.name}: rowwise=True needs pure=True as well")
    _check_shard_ports(sig)
    fields = sig.params_model.model_fields
    for r in sig.resources:
        if r.param not in fields:
            raise RegistrationError(f"{sig.name}: resource param {r.param!r} is not a Params field")
    _OPS[sig.name] = sig
    return sig


def _check_shard_ports(sig: OpSignature) -> None:
    """A ``placement="shard"`` op reads and emits ``Shard[...]`` streams only, as a
    per-item map (``apply="for_each"``: ``fn(worker, item) -> item`` in each worker) or a
    per-shard stream op (``apply="stream"``); any other user op takes no ``Shard`` (only
    the built-in ``GatherShards`` brings shards to the driver).

    Raises:
        RegistrationError: the ports break that rule.
    """
    ports = [*sig.inputs, *([sig.variadic] if sig.variadic is not None else [])]
    if sig.placement == "shard":
        if sig.apply not in ("for_each", "stream"):
            raise RegistrationError(
                f"{sig.name}: a per-shard op (placement='shard') is apply='for_each' (a map "
                f"of each worker's items) or 'stream', not {sig.apply!r}"
            )
        bad = [str(t) for t in ports if not t.is_shard]
        if not ports or bad:
            raise RegistrationError(
                f"{sig.name}: a per-shard op (placement='shard') reads Shard[...] streams, "
                f"got inputs {', '.join(bad) or 'none'}; declare inputs=['Shard[SampleBatch]']"
            )
        if not sig.output.is_shard:
            raise RegistrationError(
                f"{sig.name}: a per-shard op (placement='shard') emits a Shard[...] stream, "
                f"got output {sig.output}; gather it on the driver with GatherShards instead"
            )
        if sig.pure:
            raise RegistrationError(
                f"{sig.name}: pure=True lets the compiler move a driver op onto the workers; "
                "a per-shard op runs there already"
            )
        return
    if sig.builtin:
        return  # GatherShards reads shards; ParallelRollouts(mode="raw") emits them
    if any(is_shard(t) for t in ports) or is_shard(sig.output):
        raise RegistrationError(
            f"{sig.name}: only a per-shard op (placement='shard') reads or emits Shard[...] "
            f"streams; got {sig.type_text()} with placement={sig.placement!r}"
        )


def unregister_op(name: str) -> None:
    """Remove a user operator (built-ins cannot be removed). Mainly for tests."""
    sig = _OPS.get(name)
    if sig is not None and sig.builtin:
        raise RegistrationError(f"{name!r} is a built-in operator")
    _OPS.pop(name, None)


def get_op(name: str) -> OpSignature:
    """The signature of operator ``name``.

    Raises:
        UnknownOperatorError: (a ``KeyError``) no such operator; the message has close
            matches.
    """
    try:
        return _OPS[name]
    except KeyError:
        close = close_matches(name, _OPS)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownOperatorError(f"unknown operator {name!r}{hint}") from None


def all_ops() -> dict[str, OpSignature]:
    """Every registered operator by name: the built-ins by category (``CATEGORIES``
    order, declaration order within one), then user operators in registration order."""
    builtins = sorted(
        (s for s in _OPS.values() if s.builtin), key=lambda s: CATEGORIES.index(s.category)
    )
    return {s.name: s for s in [*builtins, *(s for s in _OPS.values() if not s.builtin)]}


def register_resource_kind(kind: ResourceKind, *, replace: bool = False) -> ResourceKind:
    if kind.name in _KINDS and not replace:
        raise RegistrationError(f"resource kind {kind.name!r} is already registered")
    _KINDS[kind.name] = kind
    return kind


def get_resource_kind(name: str) -> ResourceKind:
    """Raises ``KeyError`` for an unknown kind."""
    return _KINDS[name]


def all_resource_kinds() -> dict[str, ResourceKind]:
    return dict(_KINDS)


def make_signature(
    name: str,
    *,
    category: str,
    apply: str,
    output: str | PortType,
    params: type[BaseModel] | None = None,
    inputs: Sequence[str | PortType] = (),
    variadic: str | PortType | None = None,
    min_inputs: int | None = None,
    doc: str | None = None,
    resources: Mapping[str, tuple[str | tuple[str, ...], str]] | None = None,
    check_params: ParamCheck | None = None,
    infer_output: OutputRule | None = None,
    builtin: bool = False,
    placement: str = "driver",
    pure: bool = False,
    rowwise: bool = False,
    learns: bool = False,
) -> OpSignature:
    """Build an :class:`OpSignature` from friendly arguments (types as text; a resource's
    kind may be a tuple of the kinds it accepts, the first one its main kind)."""
    model = params or NoParams
    return OpSignature(
        name=name,
        category=category,  # type: ignore[arg-type]
        apply=apply,  # type: ignore[arg-type]
        output=parse_type(output),
        params_model=model,
        inputs=tuple(parse_type(t) for t in inputs),
        variadic=parse_type(variadic) if variadic is not None else None,
        min_inputs=(min_inputs if min_inputs is not None else (1 if variadic else len(inputs))),
        doc=inspect.cleandoc(doc if doc is not None else (model.__doc__ or "")),
        resources=tuple(
            _resource_param(p, kind, access) for p, (kind, access) in (resources or {}).items()
        ),
        check_params=check_params,
        infer_output=infer_output,
        builtin=builtin,
        placement=placement,  # type: ignore[arg-type]
        pure=pure,
        rowwise=rowwise,
        learns=learns,
    )


def _resource_param(param: str, kind: str | tuple[str, ...], access: str) -> ResourceParam:
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    if not kinds:
        raise RegistrationError(f"resource param {param!r}: no resource kind given")
    return ResourceParam(param, kinds[0], access, also=kinds[1:])  # type: ignore[arg-type]
