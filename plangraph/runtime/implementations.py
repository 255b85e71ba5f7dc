"""Where operator implementations are registered and found.

A *lowering* turns one compiled plan node into its output stream:
``lowering(node, inputs, ctx) -> LocalIterator``. Built-in operators register theirs in
``plangraph/runtime/ops/<category>.py`` with :func:`register_lowering`; user operators
(``plangraph.ops.register_op``) register a per-item callable factory with
:func:`register_impl` (or a full lowering). :func:`implementation` finds the one for a node.

Per-item operators (``apply="for_each"``) also have an *item function*: the callable that
maps one item, which the lowering wraps in a ``for_each`` stage. Built-ins declare it with
:func:`register_map` (which registers the standard lowering too); a user operator's is its
``register_impl`` factory's result. :func:`item_function` finds it, so that a fused stage
(pass ``map-fusion``) can call several in one stage and the rollout workers can run a pure
one (pass ``worker-side-maps``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.runtime.build_context import BuildContext

__all__ = [
    "LOWERINGS",
    "MAPS",
    "OP_IMPLS",
    "ImplFactory",
    "Lowering",
    "MapFactory",
    "has_item_function",
    "implementation",
    "item_function",
    "register_impl",
    "register_lowering",
    "register_map",
    "timed",
]

Lowering = Callable[[Any, list[LocalIterator[Any]], BuildContext], LocalIterator[Any]]
LOWERINGS: dict[str, Lowering] = {}
ImplFactory = Callable[[Any], Callable[[Any], Any]]
OP_IMPLS: dict[str, ImplFactory] = {}
MapFactory = Callable[[Any, BuildContext], Callable[[Any], Any]]
MAPS: dict[str, MapFactory] = {}


def register_impl(op: str) -> Callable[[ImplFactory], ImplFactory]:
    """Register how a user operator (``plangraph.ops.register_op``) runs.

    The decorated factory gets the node's validated ``Params`` and returns the per-item
    callable, applied as the operator's signature declares: ``for_each`` (item -> item),
    ``combine`` (item -> list of items) or ``filter`` (item -> bool)::

        @register_impl("ClipRewards")
        def clip_rewards(params):
            def clip(batch):
                batch["rewards"] = np.clip(batch["rewards"], -params.limit, params.limit)
                return batch
            return clip

    Inside the callable, ``plangraph.flow.metrics.get_metrics()`` is the run's metrics
    context (``RunState.metrics``). Operators with other shapes register a full lowering with
    ``register_lowering``.
    """

    def deco(factory: ImplFactory) -> ImplFactory:
        OP_IMPLS[op] = factory
        return factory

    return deco


def _user_lowering(node: Any) -> Lowering | None:
    """The lowering of a user operator registered with :func:`register_impl`, if any."""
    factory = OP_IMPLS.get(node.op)
    if factory is None:
        return None
    apply = node.signature.apply

    def lower(node: Any, inputs: list[LocalIterator[Any]], ctx: BuildContext) -> LocalIterator[Any]:
        fn = factory(node.params)  # lower_plan times every node
        if apply == "for_each":
            return inputs[0].for_each(fn, name=node.id)
        if apply == "combine":
            return inputs[0].combine(fn, name=node.id)
        if apply == "filter":
            return inputs[0].filter(fn, name=node.id)
        raise NotImplementedError(
            f"node {node.id!r}: register_impl covers for_each/combine/filter operators; "
            f"{node.op!r} applies as {apply!r}: use register_lowering"
        )

    return lower


def register_lowering(op: str) -> Callable[[Lowering], Lowering]:
    """Register the runtime implementation of operator ``op``.

    The function gets ``(node, inputs, ctx)``: the ``CompiledNode`` (validated ``params``),
    its input streams in ``node.inputs`` order, and the ``BuildContext`` (resources by id;
    ``ctx.run_state`` for the run's counters and episode window); it returns the node's
    output stream.
    """

    def deco(fn: Lowering) -> Lowering:
        LOWERINGS[op] = fn
        return fn

    return deco


def register_map(op: str) -> Callable[[MapFactory], MapFactory]:
    """Register a per-item (``for_each``) built-in operator by its item function factory.

    The factory gets ``(node, ctx)`` (the compiled node, the build context) and returns
    ``fn(item) -> item`` (or ``NOT_READY`` to be called again with the same item). The
    operator's lowering is then ``inputs[0].for_each(fn, name=node.id)`` (``lower_plan``
    times it), registered here under the factory's module and name. A pure operator's
    ``fn`` may be pickled and run on the rollout workers: it must not hold ``ctx`` or the
    driver's resources.
    """

    def deco(factory: MapFactory) -> MapFactory:
        def lower(
            node: Any, inputs: list[LocalIterator[Any]], ctx: BuildContext
        ) -> LocalIterator[Any]:
            return inputs[0].for_each(factory(node, ctx), name=node.id)

        lower.__module__ = factory.__module__
        lower.__qualname__ = lower.__name__ = factory.__name__
        lower.__doc__ = factory.__doc__
        MAPS[op] = factory
        LOWERINGS[op] = lower
        return factory

    return deco


def has_item_function(node: Any) -> bool:
    """Whether :func:`item_function` gives ``node`` one (without building it)."""
    if node.op in MAPS:
        return True
    if node.op in LOWERINGS or node.signature is None or node.signature.apply != "for_each":
        return False
    return node.op in OP_IMPLS


def item_function(node: Any, ctx: BuildContext) -> Callable[[Any], Any] | None:
    """The item function of per-item node ``node``: a built-in's :func:`register_map`
    factory, or a user ``for_each`` operator's :func:`register_impl` factory; None for an
    operator with a whole-stream lowering (or none at all)."""
    factory = MAPS.get(node.op)
    if factory is not None:
        return factory(node, ctx)
    if node.op in LOWERINGS or node.signature is None or node.signature.apply != "for_each":
        return None
    user = OP_IMPLS.get(node.op)
    return user(node.params) if user is not None else None


def timed(name: str, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` with its wall time pushed to timer ``name`` of the dataflow's metrics.

    ``lower_plan`` already times every plan node (timer ``<node id>``: exclusive seconds
    per item it emits, see ``plangraph.flow.profile``); use this for a part of an
    operator's work, under a name of its own (``f"{node.id}/encode"``), not the node id.
    """

    def call(item: Any) -> Any:
        with get_metrics().timers[name]:
            return fn(item)

    return call


def implementation(node: Any) -> Lowering | None:
    """The lowering for compiled ``node``: a registered lowering, else a user operator's
    ``register_impl`` factory applied as its signature says; None when there is neither."""
    return LOWERINGS.get(node.op) or _user_lowering(node)
