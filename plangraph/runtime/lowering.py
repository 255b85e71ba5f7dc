"""Lowering: each compiled plan node becomes a runtime iterator over Ray actors.

``lower_plan`` walks the compiled nodes in topological order and calls the implementation
registered for each node's operator (``plangraph.runtime.implementations``; the built-ins
in ``plangraph/runtime/ops/<category>.py``) with the node, its input streams and the build
context. A node consumed by several nodes is fanned out with ``LocalIterator.duplicate``
(bounded buffering), so every consumer sees every item.

User operators: ``register_impl`` (per-item callables) or ``register_lowering`` (whole
streams), re-exported here from ``plangraph.runtime.implementations``.

What the optimisation passes decided is read from the executed plan's nodes: a fused
stage (``node.stage``) becomes one ``for_each`` stage running its nodes' item functions
in turn (``plangraph.runtime.fusion``), each still timed as its own node in the profile;
the nodes a rollout source's workers run (``node.worker_maps``) are handed to the source's
lowering in ``ctx.worker_maps`` and are the identity on the driver. A node whose operator
has no item function (a user operator with a whole-stream lowering) is lowered on its own
instead, on the driver. A ``Shard[T]`` node (``ParallelRollouts(mode="raw")``, a per-shard
operator) lowers to a ``plangraph.runtime.shards.ShardStream``, the description of each
worker's stream that ``GatherShards`` turns into a driver stream.
"""

from __future__ import annotations

from typing import Any

from plangraph.errors import BuildError
from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.flow.sentinel import NOT_READY
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.fusion import FusedMap
from plangraph.runtime.implementations import (
    has_item_function,
    implementation,
    item_function,
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
    _builtin_modules()  # registers the built-in lowerings
    needed = compiled.ancestors(compiled.output) | {compiled.output}
    for node_id in compiled.topological_order():
        node = compiled.nodes[node_id]
        if node_id in needed and implementation(node) is None:
            raise _no_implementation(node_id, node)


def _no_implementation(node_id: str, node: Any) -> BuildError:
    """The error for compiled ``node``, whose operator has no runtime implementation."""
    if node.signature.builtin:
        module = _builtin_modules()[node.signature.category].__name__
        return BuildError(
            f"node {node_id!r}: built-in operator {node.op!r} has no implementation in "
            f"{module} (a plangraph bug)"
        )
    return BuildError(
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
    ctx.unsaved_states.clear()
    ctx.rng_nodes.clear()
    ctx.stages.clear()
    on_workers = _place_worker_maps(compiled, ctx, needed)
    stages = _stages(compiled, needed)
    outputs: dict[str, list[LocalIterator[Any]]] = {}
    for node_id, node in compiled.nodes.items():
        if node_id not in needed:
            continue
        stage = stages.get(node_id)
        if stage is not None and stage[0] != node_id:
            continue  # lowered with the head of its stage
        inputs = [outputs[src].pop() for src in node.inputs]
        # Every node's pulls are timed under its id (exclusive of the nodes it pulls), so
        # the profile attributes each second of the flow to one node; a fused stage times
        # each of its nodes' calls (_fused).
        if node_id in on_workers:
            # Its source's workers already ran it on each fragment: the driver only passes
            # the items on (and times that, as ~0).
            stream = inputs[0].profiled(node_id)
            ctx.stages[node_id] = on_workers[node_id]
        elif stage is not None:
            stream, node_id = _fused(compiled, stage, inputs[0], ctx)
        else:
            impl = implementation(node)
            if impl is None:
                raise _no_implementation(node_id, node)
            stream = impl(node, inputs, ctx).profiled(node_id)
            # A Shard[T] node's stream is its workers' (plangraph.runtime.shards): its
            # work runs there, in the gather's requests.
            shard_source = getattr(stream, "source_id", None) if _is_shard(stream) else None
            ctx.stages[node_id] = f"{shard_source}@workers" if shard_source else node_id
        n = sum(user in needed for user in compiled.users(node_id))
        outputs[node_id] = stream.duplicate(n) if n > 1 else [stream]
    out = outputs[compiled.output][0]
    # Re-pointing the output's cell re-points every upstream cell (unions link theirs as
    # parents), so all operators count into the run state. Nothing has run yet (lowering
    # is lazy), so the contexts dropped here are still empty.
    out.shared_metrics.set(ctx.run_state.metrics)
    return out


def _is_shard(stream: Any) -> bool:
    from plangraph.runtime.shards import ShardStream

    return isinstance(stream, ShardStream)


def _place_worker_maps(compiled: Any, ctx: BuildContext, needed: frozenset[str]) -> dict[str, str]:
    """Fill ``ctx.worker_maps`` (source id -> its workers' ``(node id, item function)``
    chain) from the executed plan; returns node id -> the stage name its work runs in
    (``"<source>@workers"``) for each node so placed. A node without an item function
    ends its source's chain: it and the nodes after it run on the driver."""
    ctx.worker_maps.clear()
    placed: dict[str, str] = {}
    for source_id, node in compiled.nodes.items():
        if not node.worker_maps or source_id not in needed:
            continue
        chain = []
        for map_id in node.worker_maps:
            mapped = compiled.nodes[map_id]
            if map_id not in needed or not has_item_function(mapped):
                break
            fn = item_function(mapped, ctx, on_workers=True)
            assert fn is not None
            chain.append((map_id, fn))
            placed[map_id] = f"{source_id}@workers"
        if chain:
            ctx.worker_maps[source_id] = tuple(chain)
    return placed


def _stages(compiled: Any, needed: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """Node id -> the fused stage it runs in: the executed plan's stages, split where a
    node is not pulled or has no item function (runs of two or more kept)."""
    out: dict[str, tuple[str, ...]] = {}
    seen: set[tuple[str, ...]] = set()
    for node in compiled.nodes.values():
        if not node.stage or node.stage in seen:
            continue
        seen.add(node.stage)
        run: list[str] = []
        for nid in (*node.stage, None):
            if nid is not None and nid in needed and has_item_function(compiled.nodes[nid]):
                run.append(nid)
                continue
            if len(run) >= 2:
                for member in run:
                    out[member] = tuple(run)
            run = []
    return out


def _profiled_step(node_id: str, fn: Any) -> Any:
    """``fn`` timed as one pull of node ``node_id`` in the flow's profile (its totals,
    timer and phases), though it runs inside the fused stage's pull."""

    def step(item: Any) -> Any:
        metrics = get_metrics()
        return metrics.profile.call(node_id, fn, item, metrics.timers, NOT_READY)

    return step


def _fused(
    compiled: Any, stage: tuple[str, ...], source: LocalIterator[Any], ctx: BuildContext
) -> tuple[LocalIterator[Any], str]:
    """One ``for_each`` stage running ``stage``'s item functions in turn, each timed as its
    own node; returns it and the id of the stage's last node (whose stream it is)."""
    steps = []
    name = "+".join(stage)
    for nid in stage:
        fn = item_function(compiled.nodes[nid], ctx)
        assert fn is not None
        steps.append((nid, _profiled_step(nid, fn)))
        ctx.stages[nid] = name
    return source.for_each(FusedMap(steps), name=name), stage[-1]
