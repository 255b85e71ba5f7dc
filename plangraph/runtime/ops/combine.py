"""Implementations of the built-in combine operators (``plangraph/ops/builtin/combine.py``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics, phase
from plangraph.runtime.build_context import BuildContext, resource_id
from plangraph.runtime.counters import SAMPLED, WEIGHT_SYNCS
from plangraph.runtime.implementations import register_lowering, register_map


@register_lowering("ConcatBatches")
def _concat_batches(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.rl import MultiAgentBatch, SampleBatch

    p = node.params
    min_size = p.min_batch_size
    by_agent_steps = p.count_steps_by == "agent_steps"
    counted = set(p.policies)
    pending: list[Any] = []
    count = 0

    def size(batch: Any) -> int:
        if not by_agent_steps:
            return int(batch.env_steps())
        if not isinstance(batch, MultiAgentBatch):
            raise TypeError(
                f"ConcatBatches {node.id!r} counts agent steps but got a "
                f"{type(batch).__name__}; agent steps are counted on MultiAgentBatch items"
            )
        steps = batch.policy_agent_steps()
        return sum(n for pid, n in steps.items() if not counted or pid in counted)

    def concat(batch: Any) -> list[Any]:
        nonlocal count
        pending.append(batch)
        count += size(batch)
        if count < min_size:
            return []
        kind = MultiAgentBatch if isinstance(pending[0], MultiAgentBatch) else SampleBatch
        out = kind.concat_samples(pending)
        pending.clear()
        count = 0
        return [out]

    # The batches not yet emitted are checkpointed (as data): under a union the run can
    # stop while some are pending, and the resumed run must emit the same train batches.
    def get_state() -> dict[str, Any]:
        multi = bool(pending) and isinstance(pending[0], MultiAgentBatch)
        return {"pending": [b.to_data() for b in pending], "count": count, "multi_agent": multi}

    def set_state(state: dict[str, Any]) -> None:
        nonlocal count
        kind = MultiAgentBatch if state.get("multi_agent") else SampleBatch
        pending[:] = [kind.from_data(b) for b in state["pending"]]
        count = int(state["count"])

    ctx.register_operator_state(node.id, get_state, set_state)
    return inputs[0].combine(concat, name=node.id)


_AGGREGATORS: dict[tuple[int, str], list[Any]] = {}
"""The aggregation actors of each lowered AggregateBatches, by (id of its BuildContext,
node id): a dataflow lowered again (``Algorithm.restore``) stops the last one's, which
would otherwise keep taking fragments from the same rollout workers."""


@register_lowering("AggregateBatches")
def _aggregate_batches(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    # Takes its source's place: the compiler made sure (PG215-PG217) that it reads an
    # async ParallelRollouts of the same worker set directly and alone, so that stream
    # (inputs[0]) is never pulled and its workers are sampled by the aggregators instead.
    import ray

    from plangraph.flow.parallel import ParallelIterator
    from plangraph.runtime.aggregation import start_aggregators

    p = node.params
    source: Any = ctx.compiled.nodes[node.inputs[0]].params  # ParallelRolloutsParams
    ws = ctx.worker_set(p.workers)
    ws_id = resource_id(p.workers)
    lock = ctx.policy_lock(p.workers)
    learners = [t for t in ctx.learners.values() if t.workers == ws_id]
    key = (id(ctx), node.id)
    for old in _AGGREGATORS.pop(key, ()):
        ray.kill(old)
    aggregators = start_aggregators(
        ws.remote_workers,
        p.num_aggregation_workers,
        p.min_batch_size,
        source.num_async,
        p.max_weight_sync_delay,
        node.id,
    )

    _AGGREGATORS[key] = aggregators

    def close() -> None:
        if _AGGREGATORS.get(key) is aggregators:
            del _AGGREGATORS[key]
        for agg in aggregators:
            ray.kill(agg)

    ctx.closers.append(close)
    cached: list[Any] = [None, -1]  # (object ref of the weights, learner version)
    sent: dict[int, int] = {}  # id(aggregator) -> learner version it holds
    pending: list[Any] = []  # replies of the set_weights calls, not looked at yet

    def version() -> int:
        return learners[0].version if learners else 0

    def record(item: Any) -> Any:
        batch, syncs = item
        if pending:  # nothing silent: a failed set_weights raises here (never waits)
            done, pending[:] = ray.wait(pending, num_returns=len(pending), timeout=0)
            if done:
                ray.get(done)
        metrics = get_metrics()
        ctx.record_batch(batch)  # env steps sampled, the episodes completed
        metrics.counters[WEIGHT_SYNCS] += syncs
        agg = metrics.current_actor
        current = version()
        if agg is not None and sent.get(id(agg)) != current:
            with phase("broadcast"):
                if cached[1] != current:
                    with lock:  # a consistent snapshot, never half an update
                        weights = ws.local_policy.get_weights()
                        current = version()
                    cached[0], cached[1] = ray.put(weights), current
                global_vars = {**ctx.run_state.global_vars(), "policy_version": cached[1]}
                # Boxed: the aggregator passes the ref on to its workers.
                pending.append(agg.set_weights.remote([cached[0]], global_vars))
            sent[id(agg)] = cached[1]
        return batch

    stream = ParallelIterator.from_actors(aggregators, method="next_batch", name=node.id)
    stream_in = stream.gather_async(num_async=p.max_requests_in_flight_per_aggregator)
    return stream_in.for_each(record, name=node.id)


@register_lowering("Batch")
def _batch(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0].batch(node.params.n)


@register_lowering("Flatten")
def _flatten(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0].flatten()


@register_lowering("WaitUntilTimestepsElapsed")
def _wait_until(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    target = node.params.target
    return inputs[0].filter(lambda _item: get_metrics().counters[SAMPLED] >= target, name=node.id)


@register_map("StandardizeFields")
def _standardize_fields(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    from plangraph.rl.standardize import standardize_fields

    # A module-level function and plain data: picklable, so the rollout workers can run
    # it when the compiler moves the node there (pass worker-side-maps).
    return functools.partial(standardize_fields, fields=tuple(node.params.fields))


@register_map("SelectExperiences")
def _select_experiences(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    keep = tuple(node.params.policies)

    def select(batch: Any) -> Any:
        return batch.select(keep)

    return select


@register_lowering("GatherShards")
def _gather_shards(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.runtime.shards import gather

    p = node.params
    return gather(inputs[0], node.id, ctx, p.mode, p.num_async)


@register_lowering("MAMLInnerAdaptation")
def _maml_inner_adaptation(node: Any, inputs: list[Any], ctx: BuildContext) -> Any:
    """``inner_adaptation(worker, batch)`` added to the input ``ShardStream``, to run
    inside each rollout worker (``plangraph.runtime.shards``)."""
    from plangraph.rl.meta_adaptation import inner_adaptation

    return inputs[0].then(node.id, inner_adaptation)
