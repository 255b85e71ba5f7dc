"""Lowering: each compiled plan node becomes a runtime iterator over Ray actors.

``lower_plan`` walks the compiled nodes in topological order and calls the implementation
registered for each node's operator (``plangraph.runtime.implementations``; the built-ins
in ``plangraph/runtime/ops/<category>.py``) with the node, its input streams and the build
context. A node consumed by several nodes is fanned out with ``LocalIterator.duplicate``
(bounded buffering), so every consumer sees every item.

User operators: ``register_impl`` (per-item callables) or ``register_lowering`` (whole
streams), re-exported here from ``plangraph.runtime.implementations``.
"""

from __future__ import annotations

from typing import Any

from plangraph.errors import BuildError
from plangraph.flow.local import LocalIterator
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.implementations import (
    implementation,
    register_impl,
    register_lowering,
    timed,
)

__all__ = ["check_implementations", "lower_plan", "register_impl", "register_lowering", "timed"]


def _builtin_modules() -> dict[str, Any]:
    """The implementing module of each category; importing them registers the built-ins.

    Imported on first use, not with this module: ``register_impl`` (re-exported here) must
    stay importable without Ray, for ``plangraph validate`` of Python plans.
    """
    from plangraph.runtime import ops as builtin_ops

    return builtin_ops.MODULES


def check_implementations(compiled: Any) -> None:
    """Every node the output pulls has a runtime implementation.

    Raises:
        BuildError: a node's operator has none (a user operator registered with
            ``register_op`` also needs ``register_impl``), before any actor is started.
    """
    modules = _builtin_modules()
    needed = compiled.ancestors(compiled.output) | {compiled.output}
    for node_id in compiled.topological_order():
        node = compiled.nodes[node_id]
        if node_id not in needed or implementation(node) is not None:
            continue
        if node.signature.builtin:
            module = modules[node.signature.category].__name__
            raise BuildError(
                f"node {node_id!r}: built-in operator {node.op!r} has no implementation in "
                f"{module} (a plangraph bug)"
            )
        raise BuildError(
            f"node {node_id!r}: operator {node.op!r} has no runtime implementation; register "
            f"one with @plangraph.runtime.implementations.register_impl({node.op!r}) (per-item "
            "operators) or register_lowering, in the plan file or a module it imports"
        )


def lower_plan(compiled: Any, ctx: BuildContext) -> LocalIterator[Any]:
    """The output stream (``Result`` dicts) of ``compiled``, lowered onto ``ctx``'s actors.

    Every operator's metrics context (``get_metrics()``) is ``ctx.run_state.metrics``;
    every node's stream is timed under its id there (``LocalIterator.profiled``).
    Stateful operators register their checkpoint hooks in ``ctx.operator_states``, which
    this clears first: a dataflow lowered again (``Algorithm.restore``) replaces the last.

    Raises:
        BuildError: an operator has no runtime implementation (see
            :func:`check_implementations`).
    """
    _builtin_modules()
    # Only what the output pulls runs; a shared stream is fanned out to its users.
    needed = compiled.ancestors(compiled.output) | {compiled.output}
    ctx.operator_states.clear()
    outputs: dict[str, list[LocalIterator[Any]]] = {}
    for node_id, node in compiled.nodes.items():
        if node_id not in needed:
            continue
        impl = implementation(node)
        if impl is None:
            check_implementations(compiled)  # raises, naming the node
        inputs = [outputs[src].pop() for src in node.inputs]
        # Every node's pulls are timed under its id (exclusive of the nodes it pulls), so
        # the profile attributes each second of the flow to one node.
        stream = impl(node, inputs, ctx).profiled(node_id)
        n = sum(user in needed for user in compiled.users(node_id))
        outputs[node_id] = stream.duplicate(n) if n > 1 else [stream]
    out = outputs[compiled.output][0]
    # Re-pointing the output's cell re-points every upstream cell (unions link theirs as
    # parents), so all operators count into the run state. Nothing has run yet (lowering
    # is lazy), so the contexts dropped here are still empty.
    out.shared_metrics.set(ctx.run_state.metrics)
    return out
