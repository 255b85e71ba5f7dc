"""Where operator implementations are registered and found.

A *lowering* turns one compiled plan node into its output stream:
``lowering(node, inputs, ctx) -> LocalIterator``. Built-in operators register theirs in
``plangraph/runtime/ops/<category>.py`` with :func:`register_lowering`; user operators
(``plangraph.ops.register_op``) register a per-item callable factory with
:func:`register_impl` (or a full lowering). :func:`implementation` finds the one for a node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.runtime.build_context import BuildContext

__all__ = [
    "LOWERINGS",
    "OP_IMPLS",
    "ImplFactory",
    "Lowering",
    "implementation",
    "register_impl",
    "register_lowering",
    "timed",
]

Lowering = Callable[[Any, list[LocalIterator[Any]], BuildContext], LocalIterator[Any]]
LOWERINGS: dict[str, Lowering] = {}
ImplFactory = Callable[[Any], Callable[[Any], Any]]
OP_IMPLS: dict[str, ImplFactory] = {}


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
