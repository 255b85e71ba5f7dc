"""Per-shard streams at runtime: ``Shard[T]`` plan nodes lowered onto ``ParallelIterator``.

A ``Shard[T]`` node (``ParallelRollouts(mode="raw")``, then per-shard operators,
``register_op(..., placement="shard")``) lowers to a :class:`ShardStream`, not a driver
``LocalIterator``: a description of each rollout worker's own stream, built lazily. Each
per-shard operator adds one ``fn(worker, item) -> item`` to it, which runs INSIDE every
rollout worker actor (``ParallelIterator.for_each_actor``: ``worker`` is that actor's
``RolloutWorker`` instance). ``GatherShards`` turns it into the driver stream
(``gather_sync`` / ``gather_async`` / ``batch_across_shards`` of
``plangraph.flow.parallel``) and counts what it gathers there, as ``ParallelRollouts``
counts its items (env steps, episodes, agent steps, the recorder of ``--record``): a sync
round counts what one ``bulk_sync`` item counts, an async item what an ``async`` one does.

Without remote workers (``num_workers == 0``) the local worker is the one shard: the
functions run in the driver on ``local_worker.sample()``'s batches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.flow.parallel import ParallelIterator
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.counters import AGENT_SAMPLED, RESTARTS, policy_counter

__all__ = ["ShardFn", "ShardStream", "experience_recorder", "gather", "rollout_recorder"]

ShardFn = Callable[[Any, Any], Any]
"""``fn(worker, item) -> item``: a per-shard operator's function, run in each worker."""


@dataclass(frozen=True)
class ShardStream:
    """The lowered stream of a ``Shard[T]`` node: rollout source ``source_id`` sampling
    worker set ``workers`` (an ``"@id"``), then ``fns`` (``(node id, fn)``) in order, in
    every worker. Immutable: :meth:`then` returns a longer one."""

    source_id: str
    workers: str
    fns: tuple[tuple[str, ShardFn], ...] = field(default=())

    def then(self, node_id: str, fn: ShardFn) -> ShardStream:
        """This stream with per-shard function ``fn`` (of node ``node_id``) after it."""
        return ShardStream(self.source_id, self.workers, (*self.fns, (node_id, fn)))

    # What lower_plan asks of every stream: shards are neither timed on the driver (their
    # work runs in the workers) nor fanned out (the compiler refuses a shared shard stream).
    def profiled(self, _node_id: str) -> ShardStream:
        return self


def rollout_recorder(
    node_id: str, workers: str, ctx: BuildContext, *, bulk_sync: bool
) -> Callable[[Any], Any]:
    """The driver's bookkeeping of one gathered rollout batch (an item of
    ``ParallelRollouts``, or one of ``GatherShards``): looks at the workers' pending calls,
    counts the batch (``BuildContext.record_batch``; per-agent and per-policy steps of a
    ``MultiAgentBatch``). ``bulk_sync``: a round of requests to every worker comes before
    each item, so the calls sent before that round have finished (``_on_fetch_start``
    notes them). ``Record.count(batch)`` counts without the pending-call look."""
    ws = ctx.worker_set(workers)
    multi_agent = getattr(ws, "multi_agent", False)

    def record_agent_steps(batch: Any) -> None:
        # Env steps once (record_batch); agent steps per agent, and per policy for its
        # schedules.
        counters = get_metrics().counters
        counters[AGENT_SAMPLED] += batch.agent_steps()
        for pid, b in batch.policy_batches.items():
            counters[policy_counter(AGENT_SAMPLED, pid)] += b.count
            ctx.run_state.policy_window(pid).add(b.episode_returns, b.episode_lengths)

    class Record:
        """Counts a gathered batch; first, looks at the workers' pending calls."""

        def __init__(self) -> None:
            self.mark: int | None = None

        def _on_fetch_start(self) -> None:
            # Before the pull that sends a bulk-synchronous round's sample requests.
            self.mark = ws.pending_calls.mark() if bulk_sync else None

        def count(self, batch: Any) -> Any:
            ctx.record_batch(batch)  # the call a user's source makes too
            if multi_agent:
                record_agent_steps(batch)
            return batch

        def __call__(self, batch: Any) -> Any:
            ws.check_pending(node_id, settled=self.mark)
            return self.count(batch)

    return Record()


def gather(
    shards: ShardStream,
    node_id: str,
    ctx: BuildContext,
    mode: Literal["sync", "async", "batch"],
    num_async: int = 1,
) -> LocalIterator[Any]:
    """The driver stream of ``shards`` (``GatherShards`` node ``node_id``): ``sync``: one
    item of every worker per round, one by one in worker order; ``async``: items in
    completion order, ``num_async`` requests in flight per worker; ``batch``: one list per
    round. Every gathered item is counted here (:func:`rollout_recorder`), each once. A
    dead rollout worker is replaced (same index and seeds, current weights; its per-shard
    functions start afresh), within the WorkerSet's restart bound."""
    ws = ctx.worker_set(shards.workers)
    record = rollout_recorder(
        node_id, shards.workers, ctx, bulk_sync=bool(ws.remote_workers) and mode != "async"
    )
    if not ws.remote_workers:
        worker = ws.local_worker
        local: LocalIterator[Any] = LocalIterator.from_iterable(
            lambda: iter(worker.sample, None), name=shards.source_id
        )
        for fn_node, fn in shards.fns:
            local = local.for_each(_bound(fn, worker), name=fn_node)
        local = local.for_each(record, name=node_id)
        stream = local.for_each(lambda b: [b], name=node_id) if mode == "batch" else local
    else:

        def replace(position: int, _actor: Any, error: Exception) -> Any:
            # As in ParallelRollouts: the fragments already collected from the others are
            # kept; past the restart bound this raises WorkerRestartError.
            new = ws.replace_dead_worker(position, error, node_id=shards.source_id)
            get_metrics().counters[RESTARTS] += 1
            return new

        from plangraph.rl.envs import ship_code

        par = ParallelIterator.from_actors(ws.remote_workers, method="sample", name=node_id)
        for fn_node, fn in shards.fns:
            # A module-level function of a local module (a plan file, my_ops.py) travels
            # by value, as user envs and models do: the workers need not import it.
            ship_code(fn)
            par = par.for_each_actor(fn, name=fn_node)
        if mode == "async":
            stream = par.gather_async(num_async=num_async, on_actor_failure=replace)
            stream = stream.for_each(record, name=node_id)
        else:
            rounds = par.batch_across_shards(on_actor_failure=replace)
            # The pending-call look once per round (its requests went to every worker),
            # then each worker's item counted.
            stream = rounds.for_each(_RoundRecord(record), name=node_id)
            if mode == "sync":
                stream = stream.flatten()
    if ctx.record_dir is None:  # plangraph run --record DIR
        return stream
    rec = experience_recorder(ctx, node_id, shards.workers)
    return stream.for_each(_each(rec) if mode == "batch" else rec, name=node_id)


class _RoundRecord:
    """A barrier round (one item of every worker) counted as ``bulk_sync`` counts one
    item: the pending-call look once, then every worker's batch."""

    def __init__(self, record: Any) -> None:
        self.record = record

    def _on_fetch_start(self) -> None:
        self.record._on_fetch_start()

    def __call__(self, items: list[Any]) -> list[Any]:
        if items:
            self.record(items[0])
            for item in items[1:]:
                self.record.count(item)
        return items


def _bound(fn: ShardFn, worker: Any) -> Callable[[Any], Any]:
    def call(item: Any) -> Any:
        return fn(worker, item)

    return call


def _each(fn: Callable[[Any], Any]) -> Callable[[list[Any]], list[Any]]:
    def call(items: list[Any]) -> list[Any]:
        return [fn(x) for x in items]

    return call


def experience_recorder(ctx: BuildContext, node_id: str, workers: str) -> Callable[[Any], Any]:
    """``plangraph run --record DIR``'s recorder of the batches node ``node_id`` gathers."""
    from plangraph.runtime.recording import experience_recorder as recorder

    assert ctx.record_dir is not None
    return recorder(
        ctx, path=ctx.record_dir, workers=workers, max_file_bytes=64 * 2**20, prefix=node_id
    )
