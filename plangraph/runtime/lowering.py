"""Lowering: each compiled plan node becomes a runtime iterator over Ray actors.

``lower_plan`` walks the compiled nodes in topological order and calls the implementation
registered for each node's operator with the node, its input streams and the build
context. A node consumed by several nodes is fanned out with ``LocalIterator.duplicate``
(bounded buffering), so every consumer sees every item.

Counters (env steps, RLlib Flow semantics with DESIGN.md's names):
``num_env_steps_sampled`` (ParallelRollouts, every sub-env step once),
``num_env_steps_trained`` (TrainOneStep / ApplyGradients, once per train batch),
``num_target_updates`` (UpdateTarget).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from plangraph.runtime.build_context import BuildContext, resource_id
from plangraph.runtime.concurrency import concurrently
from plangraph.runtime.items import GradInfo, TrainInfo
from plangraph.runtime.local import LocalIterator
from plangraph.runtime.metrics import get_metrics
from plangraph.runtime.parallel import ParallelIterator
from plangraph.runtime.sentinel import NOT_READY, ready_items

SAMPLED = "num_env_steps_sampled"
TRAINED = "num_env_steps_trained"
TARGET_UPDATES = "num_target_updates"

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

    Inside the callable, ``plangraph.runtime.metrics.get_metrics()`` is the dataflow's
    metrics context. Operators with other shapes register a full lowering with
    ``register_lowering``.
    """

    def deco(factory: ImplFactory) -> ImplFactory:
        OP_IMPLS[op] = factory
        return factory

    return deco


def _user_lowering(node: Any) -> Lowering | None:
    factory = OP_IMPLS.get(node.op)
    if factory is None:
        return None
    apply = node.signature.apply

    def lower(node: Any, inputs: list[LocalIterator[Any]], ctx: BuildContext) -> LocalIterator[Any]:
        fn = timed(node.id, factory(node.params))
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
    its input streams in ``node.inputs`` order, and the ``BuildContext``; it returns the
    node's output stream.
    """

    def deco(fn: Lowering) -> Lowering:
        LOWERINGS[op] = fn
        return fn

    return deco


def timed(node_id: str, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` with its wall time pushed to timer ``node_id`` of the dataflow's metrics."""

    def call(item: Any) -> Any:
        with get_metrics().timers[node_id]:
            return fn(item)

    return call


def lower_plan(compiled: Any, ctx: BuildContext) -> LocalIterator[Any]:
    """The output stream (``Result`` dicts) of ``compiled``, lowered onto ``ctx``'s actors.

    Raises:
        NotImplementedError: an operator has no runtime implementation (a user operator
            registered with ``register_op`` also needs ``register_impl``).
    """
    needed = _ancestors_of_output(compiled)
    consumers: dict[str, int] = dict.fromkeys(needed, 0)
    for node_id in needed:
        for src in compiled.nodes[node_id].inputs:
            consumers[src] += 1
    outputs: dict[str, list[LocalIterator[Any]]] = {}
    for node_id, node in compiled.nodes.items():
        if node_id not in needed:
            continue
        impl = LOWERINGS.get(node.op) or _user_lowering(node)
        if impl is None:
            raise NotImplementedError(
                f"node {node_id!r}: operator {node.op!r} has no runtime implementation; "
                "register one with plangraph.runtime.lowering.register_impl (per-item "
                "operators) or register_lowering"
            )
        inputs = [outputs[src].pop() for src in node.inputs]
        stream = impl(node, inputs, ctx)
        n = consumers[node_id]
        outputs[node_id] = stream.duplicate(n) if n > 1 else [stream]
    out = outputs[compiled.output][0]
    ctx.shared_metrics = out.shared_metrics
    return out


def _ancestors_of_output(compiled: Any) -> set[str]:
    seen: set[str] = set()
    stack = [compiled.output]
    while stack:
        node_id = stack.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        stack.extend(compiled.nodes[node_id].inputs)
    return seen


def _upstream_ops(compiled: Any, node_id: str, op: str) -> list[Any]:
    """Nodes running operator ``op`` upstream of ``node_id`` (through any path)."""
    found, seen, stack = [], set(), list(compiled.nodes[node_id].inputs)
    while stack:
        nid = stack.pop()
        if nid in seen:
            continue
        seen.add(nid)
        node = compiled.nodes[nid]
        if node.op == op:
            found.append(node)
        stack.extend(node.inputs)
    return found


def _scalar_stats(stats: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, value in stats.items():
        if isinstance(value, (int, float, np.floating, np.integer)):
            out[key] = float(value)
        elif isinstance(value, np.ndarray) and value.size == 1:
            out[key] = float(value.item())
    return out


# -- sources ---------------------------------------------------------------------------------


@register_lowering("ParallelRollouts")
def _parallel_rollouts(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.rl import SampleBatch

    p = node.params
    ws = ctx.worker_set(p.workers)
    if not ws.remote_workers:
        stream: LocalIterator[Any] = LocalIterator.from_iterable(
            lambda: iter(ws.local_worker.sample, None), name=node.id
        )
    else:

        def replace(position: int, _actor: Any, _error: Exception) -> Any:
            # A dead rollout worker is replaced (same index and seeds, current weights);
            # the fragments already collected from the others are kept.
            return ws.recreate_worker(position)

        par = ParallelIterator.from_actors(ws.remote_workers, method="sample", name=node.id)
        if p.mode == "bulk_sync":
            stream = par.batch_across_shards(on_actor_failure=replace).for_each(
                SampleBatch.concat_samples, name=node.id
            )
        else:
            stream = par.gather_async(num_async=p.num_async, on_actor_failure=replace)

    def record(batch: Any) -> Any:
        metrics = get_metrics()
        metrics.counters[SAMPLED] += batch.env_steps()
        ctx.episodes.add(batch.episode_returns, batch.episode_lengths)
        return batch

    return stream.for_each(record, name=node.id)


@register_lowering("LocalReplay")
def _local_replay(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    buffer = ctx.buffer(p.buffer)
    learning_starts = ctx.compiled.resources[resource_id(p.buffer)].params.learning_starts

    def base(timeout: float | None) -> Iterator[Any]:
        # Not ready (rather than blocking) until learning_starts env steps are stored, so
        # a Concurrently moves on to the branch that fills the buffer.
        while True:
            if len(buffer) < max(1, learning_starts):
                yield NOT_READY
            else:
                with get_metrics().timers[node.id]:
                    batch = buffer.sample(p.batch_size)
                yield batch

    return LocalIterator(base, name=node.id)


# -- combine -------------------------------------------------------------------------------


@register_lowering("ConcatBatches")
def _concat_batches(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.rl import SampleBatch

    min_size = node.params.min_batch_size
    pending: list[Any] = []
    count = 0

    def concat(batch: Any) -> list[Any]:
        nonlocal count
        pending.append(batch)
        count += batch.env_steps()
        if count < min_size:
            return []
        out = SampleBatch.concat_samples(pending)
        pending.clear()
        count = 0
        return [out]

    return inputs[0].combine(timed(node.id, concat), name=node.id)


@register_lowering("Batch")
def _batch(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0].batch(node.params.n)


@register_lowering("Flatten")
def _flatten(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0].flatten()


@register_lowering("Duplicate")
def _duplicate(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0]  # the fan-out itself is done by lower_plan for every shared node


@register_lowering("WaitUntilTimestepsElapsed")
def _wait_until(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    target = node.params.target
    return inputs[0].filter(lambda _item: get_metrics().counters[SAMPLED] >= target, name=node.id)


# -- train ---------------------------------------------------------------------------------


def _broadcast(ctx: BuildContext, ws: Any) -> None:
    ws.sync_weights(ctx.global_vars())


@register_lowering("TrainOneStep")
def _train_one_step(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)
    # Prioritized replay upstream: TD errors of each update become the new priorities.
    per_buffers = [
        ctx.buffer(n.params.buffer)
        for n in _upstream_ops(ctx.compiled, node.id, "LocalReplay")
        if hasattr(ctx.buffer(n.params.buffer), "update_priorities")
    ]
    # Counted in the (checkpointed) metrics, so a restored run keeps its broadcast phase.
    updates_key = f"num_updates/{node.id}"

    def train(batch: Any) -> TrainInfo:
        metrics = get_metrics()
        policy = ws.local_policy
        policy.set_global_vars(ctx.global_vars())
        stats = dict(policy.train(batch, p.num_sgd_iter, p.sgd_minibatch_size))
        td_error = stats.pop("td_error", None)
        if td_error is not None and per_buffers and "batch_indexes" in batch:
            for buf in per_buffers:
                buf.update_priorities(batch["batch_indexes"], np.asarray(td_error))
        count = batch.env_steps()
        metrics.counters[TRAINED] += count
        scalars = _scalar_stats(stats)
        metrics.info["learner"] = scalars
        if p.update_workers_every == 1:
            _broadcast(ctx, ws)
        else:
            metrics.counters[updates_key] += 1
            if metrics.counters[updates_key] % p.update_workers_every == 0:
                _broadcast(ctx, ws)
        return TrainInfo(scalars, count)

    return inputs[0].for_each(timed(node.id, train), name=node.id)


@register_lowering("ComputeGradients")
def _compute_gradients(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    ws = ctx.worker_set(node.params.workers)

    def compute(batch: Any) -> GradInfo:
        policy = ws.local_policy
        policy.set_global_vars(ctx.global_vars())
        grads, stats = policy.compute_gradients(batch)
        scalars = _scalar_stats(dict(stats))
        get_metrics().info["learner"] = scalars
        return GradInfo(list(grads), batch.env_steps(), scalars)

    return inputs[0].for_each(timed(node.id, compute), name=node.id)


def average_gradients(infos: list[GradInfo]) -> GradInfo:
    """Element-wise **mean** of the gradients (RLlib 1.x summed), summed env steps, mean
    stats. With equal-sized microbatches of a per-row-mean loss this equals the gradient
    of the whole batch.

    Raises:
        ValueError: an empty list, or gradient lists of different lengths/shapes.
    """
    if not infos:
        raise ValueError("AverageGradients got an empty list of gradients")
    n = len(infos[0].grads)
    if any(len(g.grads) != n for g in infos):
        raise ValueError("AverageGradients: gradient lists differ in length")
    grads = [np.mean(np.stack([g.grads[i] for g in infos]), axis=0) for i in range(n)]
    keys = sorted(set().union(*(g.stats for g in infos)))
    stats = {k: float(np.mean([g.stats[k] for g in infos if k in g.stats])) for k in keys}
    return GradInfo(grads, sum(g.count for g in infos), stats)


@register_lowering("AverageGradients")
def _average_gradients(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0].for_each(timed(node.id, average_gradients), name=node.id)


@register_lowering("ApplyGradients")
def _apply_gradients(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)

    def apply(info: GradInfo) -> TrainInfo:
        metrics = get_metrics()
        policy = ws.local_policy
        policy.set_global_vars(ctx.global_vars())
        extra = policy.apply_gradients(info.grads) or {}
        metrics.counters[TRAINED] += info.count
        stats = {**info.stats, **_scalar_stats(dict(extra))}
        metrics.info["learner"] = stats
        if p.update_workers:
            _broadcast(ctx, ws)
        return TrainInfo(stats, info.count)

    return inputs[0].for_each(timed(node.id, apply), name=node.id)


@register_lowering("UpdateTarget")
def _update_target(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)
    counter = SAMPLED if p.unit == "sampled" else TRAINED
    last_key = f"last_target_update_ts/{node.id}"

    def update(item: Any) -> Any:
        metrics = get_metrics()
        now, last = metrics.counters[counter], metrics.counters[last_key]
        # Fires once each time the counter passes a multiple of freq (freq 0: every item
        # that saw progress).
        due = now > last if p.freq == 0 else now // p.freq > last // p.freq
        if due:
            ws.local_policy.update_target()
            metrics.counters[TARGET_UPDATES] += 1
            metrics.counters[last_key] = now
        return item

    return inputs[0].for_each(timed(node.id, update), name=node.id)


# -- replay --------------------------------------------------------------------------------


@register_lowering("StoreToReplay")
def _store_to_replay(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    buffer = ctx.buffer(node.params.buffer)

    def store(batch: Any) -> Any:
        buffer.add(batch)
        return batch

    return inputs[0].for_each(timed(node.id, store), name=node.id)


# -- merge ---------------------------------------------------------------------------------


@register_lowering("Concurrently")
def _concurrently(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    return concurrently(
        inputs,
        mode=p.mode,
        output_indexes=p.output_indexes,
        weights=p.weights,
        seed=ctx.seed,
        name=node.id,
    )


@register_lowering("Union")
def _union(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    mode = "round_robin" if node.params.deterministic else "async"
    return concurrently(inputs, mode=mode, seed=ctx.seed, name=node.id)


# -- sink ----------------------------------------------------------------------------------


@register_lowering("StandardMetricsReporting")
def _standard_metrics_reporting(
    node: Any, inputs: list[Any], ctx: BuildContext
) -> LocalIterator[Any]:
    p = node.params

    def report(items: Iterator[Any]) -> Iterator[dict[str, Any]]:
        started = time.monotonic()
        metrics = get_metrics()
        sampled_at_start = metrics.counters[SAMPLED]
        episodes_at_start = ctx.episodes.total
        # The sink is the blocking end of the flow: wait (not spin) while upstream is idle.
        for _item in ready_items(items):
            metrics = get_metrics()
            elapsed = time.monotonic() - started
            steps = metrics.counters[SAMPLED] - sampled_at_start
            if elapsed < p.min_iter_time_s or steps < p.min_env_steps_per_iter:
                continue
            ctx.iteration += 1
            ctx.time_total_s += elapsed
            yield _result(ctx, metrics, elapsed, steps, ctx.episodes.total - episodes_at_start)
            started = time.monotonic()
            sampled_at_start = metrics.counters[SAMPLED]
            episodes_at_start = ctx.episodes.total

    return inputs[0].transform(report, name=node.id)


def _result(
    ctx: BuildContext, metrics: Any, elapsed: float, steps: int, episodes: int
) -> dict[str, Any]:
    """One iteration's result dict (keys documented in the README)."""
    counters = {k: int(v) for k, v in sorted(metrics.counters.items())}
    result: dict[str, Any] = {
        "iteration": ctx.iteration,
        "time_this_iter_s": elapsed,
        "time_total_s": ctx.time_total_s,
        "timestamp": time.time(),
        SAMPLED: counters.get(SAMPLED, 0),
        TRAINED: counters.get(TRAINED, 0),
        TARGET_UPDATES: counters.get(TARGET_UPDATES, 0),
        "num_env_steps_sampled_this_iter": steps,
        "env_steps_per_s": steps / elapsed if elapsed > 0 else 0.0,
        "env_steps_per_s_total": (
            counters.get(SAMPLED, 0) / ctx.time_total_s if ctx.time_total_s > 0 else 0.0
        ),
        "episodes_this_iter": episodes,
        "episodes_total": ctx.episodes.total,
        "counters": counters,
        "timers": {k: t.mean for k, t in sorted(metrics.timers.items())},
        "learner": dict(metrics.info.get("learner", {})),
    }
    result.update(ctx.episodes.stats())
    return result
