"""Implementations of the built-in source operators (``plangraph/ops/builtin/sources.py``).

Both rollout sources look at the replies of the calls sent to their workers without waiting
(weight syncs, worker-side maps: ``WorkerSet.check_pending``) on every item they gather, so
a failed one raises ``RemoteCallError`` there. A bulk-synchronous round first notes the calls
sent so far: every worker has answered a later request when the round is in, so those have
finished, and a failed weight sync stops the run before the learner trains on the round.
"""

from __future__ import annotations

from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.flow.parallel import ParallelIterator
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.counters import DATASET_EPOCHS, READ, RESTARTS
from plangraph.runtime.implementations import register_lowering
from plangraph.runtime.items import GradInfo
from plangraph.runtime.shards import ShardStream, experience_recorder, rollout_recorder


@register_lowering("ParallelRollouts")
def _parallel_rollouts(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.rl import MultiAgentBatch, SampleBatch

    p = node.params
    ws = ctx.worker_set(p.workers)
    multi_agent = getattr(ws, "multi_agent", False)
    # The pure maps the compiler moved onto this source's workers (pass worker-side-maps);
    # set on every lowering, so a re-lowered dataflow never keeps an old chain.
    ws.set_batch_transforms(ctx.worker_maps.get(node.id, ()), node_id=node.id)
    if p.mode == "raw":
        # The stream stays on the workers: per-shard operators add to it, GatherShards
        # samples, gathers and counts (plangraph.runtime.shards).
        return ShardStream(node.id, p.workers)  # type: ignore[return-value]
    if not ws.remote_workers:
        stream: LocalIterator[Any] = LocalIterator.from_iterable(
            lambda: iter(ws.local_worker.sample, None), name=node.id
        )
    else:

        def replace(position: int, _actor: Any, error: Exception) -> Any:
            # A dead rollout worker is replaced (same index and seeds, current weights),
            # within the WorkerSet's restart bound; the fragments already collected from
            # the others are kept. Past the bound this raises WorkerRestartError.
            worker = ws.replace_dead_worker(position, error, node_id=node.id)
            get_metrics().counters[RESTARTS] += 1
            return worker

        par = ParallelIterator.from_actors(ws.remote_workers, method="sample", name=node.id)
        if p.mode == "bulk_sync":
            concat = MultiAgentBatch.concat_samples if multi_agent else SampleBatch.concat_samples
            stream = par.batch_across_shards(on_actor_failure=replace).for_each(
                concat, name=node.id
            )
        else:
            stream = par.gather_async(num_async=p.num_async, on_actor_failure=replace)

    bulk_sync = bool(ws.remote_workers) and p.mode == "bulk_sync"
    stream = stream.for_each(
        rollout_recorder(node.id, p.workers, ctx, bulk_sync=bulk_sync), name=node.id
    )
    if ctx.record_dir is not None:  # plangraph run --record DIR
        stream = stream.for_each(experience_recorder(ctx, node.id, p.workers), name=node.id)
    return stream


@register_lowering("AsyncGradients")
def _async_gradients(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)
    if not ws.remote_workers:
        # The local worker shares the learner policy: its gradients are the learner's own.
        worker = ws.local_worker
        stream: LocalIterator[Any] = LocalIterator.from_iterable(
            lambda: iter(worker.sample_and_compute_gradients, None), name=node.id
        )
    else:

        def replace(position: int, _actor: Any, error: Exception) -> Any:
            # As in ParallelRollouts: same index and seeds, the learner's current weights.
            worker = ws.replace_dead_worker(position, error, node_id=node.id)
            get_metrics().counters[RESTARTS] += 1
            return worker

        par = ParallelIterator.from_actors(
            ws.remote_workers, method="sample_and_compute_gradients", name=node.id
        )
        stream = par.gather_async(num_async=p.num_async, on_actor_failure=replace)

    def record(item: Any) -> GradInfo:
        ws.check_pending(node.id)  # the weights sent to the workers (never waits)
        ctx.record_sampled(item.count, item.episode_returns, item.episode_lengths)
        metrics = get_metrics()
        metrics.info["learner"] = dict(item.stats)
        # gather_async names the actor whose result this is (None when sampling locally).
        source = metrics.current_actor if ws.remote_workers else None
        return GradInfo(
            list(item.grads),
            item.count,
            dict(item.stats),
            source=source,
            policy_version=item.policy_version,
        )

    return stream.for_each(record, name=node.id)


@register_lowering("ReadExperiences")
def _read_experiences(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.rl import SampleBatch
    from plangraph.rl.offline import OfflineDataset, action_bounds
    from plangraph.runtime.build_context import resource_id

    p = node.params
    rid = resource_id(p.dataset)
    params: Any = ctx.resource_params[rid]  # OfflineDataParams
    policy = ctx.worker_set(p.workers).local_policy
    reads_returns = "returns" in getattr(policy, "loss_columns", ())
    dataset = OfflineDataset(
        ctx.datasets[rid],
        shuffle_buffer_size=params.shuffle_buffer_size,
        num_readers=params.num_readers,
        seed=ctx.seed,
        read_concurrency=params.read_concurrency,
        returns_gamma=float(policy.config.gamma) if reads_returns else None,
        action_bounds=action_bounds(policy.action_space),
    )
    # A restored run goes on with the epoch after those already read.
    stream = dataset.batches(
        p.batch_size, start_epoch=lambda: int(ctx.run_state.counters[DATASET_EPOCHS])
    )

    def record(columns: Any) -> Any:
        counters = get_metrics().counters
        if columns is None:  # the end of an epoch
            counters[DATASET_EPOCHS] += 1
            return None
        batch = SampleBatch(columns)
        counters[READ] += batch.count
        return batch

    ctx.closers.append(dataset.stop)
    return (
        LocalIterator.from_iterable(lambda: stream, name=node.id)
        .for_each(record, name=node.id)
        .filter(lambda item: item is not None, name=node.id)
    )
