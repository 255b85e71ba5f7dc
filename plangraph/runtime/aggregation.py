"""Aggregation actors of ``AggregateBatches`` (IMPALA's tree aggregation; RLlib 1.x
``rllib/execution/tree_agg.py``: ``gather_experiences_tree_aggregation``,
``AggregationWorker``).

Each :class:`AggregationWorker` owns a subset of the rollout workers: it keeps sample
requests in flight to them (``ParallelIterator.gather_async``, run inside the actor),
fetches their fragments itself, syncs each worker's weights per fragment (the object ref
the driver handed it, passed on: the weights never go through the aggregator's memory)
and concatenates the fragments into train batches, which the driver pulls with
:meth:`AggregationWorker.next_batch`. So the fragments' bytes travel rollout worker ->
aggregator -> (one train batch) -> driver, and the driver never concatenates.

``set_weights`` runs in a concurrency group of its own (it only stores the ref), so it is
never queued behind a ``next_batch`` that is waiting for fragments; ``next_batch`` calls
run one at a time, in order, so the driver may keep several in flight (the next one starts
as soon as the last returns, without a round trip to the driver).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import ray

__all__ = ["AggregationWorker", "assign_workers", "start_aggregators"]


def assign_workers(workers: Sequence[Any], num_aggregators: int) -> list[list[Any]]:
    """Round-robin: aggregator ``i`` owns ``workers[i::num_aggregators]`` (RLlib's
    ``shard_assignment``).

    Raises:
        ValueError: ``num_aggregators`` is below 1 or above ``len(workers)`` (an aggregator
            would own no worker; the compiler reports it first as PG216).
    """
    if not 1 <= num_aggregators <= len(workers):
        raise ValueError(
            f"num_aggregation_workers={num_aggregators} must be between 1 and the "
            f"{len(workers)} rollout workers"
        )
    return [list(workers[i::num_aggregators]) for i in range(num_aggregators)]


def start_aggregators(
    workers: Sequence[Any],
    num_aggregators: int,
    min_batch_size: int,
    num_async: int,
    max_weight_sync_delay: int,
    node_id: str,
) -> list[Any]:
    """Start ``num_aggregators`` :class:`AggregationWorker` actors (0 CPUs each: they
    mostly wait for fragments) over ``workers``, assigned round-robin
    (:func:`assign_workers`, whose ``ValueError`` this raises). Nothing is sampled until
    the first ``next_batch``."""
    remote: Any = ray.remote  # typed stubs miss concurrency_groups
    remote_cls = remote(num_cpus=0, concurrency_groups={"weights": 1})(AggregationWorker)
    return [
        remote_cls.remote(group, min_batch_size, num_async, max_weight_sync_delay, node_id)
        for group in assign_workers(workers, num_aggregators)
    ]


class AggregationWorker:
    """One aggregation actor (:func:`start_aggregators`; 0 CPUs, ``set_weights`` in
    concurrency group ``"weights"``, ``next_batch`` one call at a time).

    Args:
        workers: the rollout worker actor handles it owns (each with ``sample()`` and
            ``set_weights(weights, global_vars)``).
        min_batch_size: env steps per train batch, at least (``ConcatBatches``'s rule:
            fragments are never split).
        num_async: sample requests in flight per owned worker.
        max_weight_sync_delay: fragments of one worker between two weight syncs to it.
        node_id: the plan node (named in errors).
    """

    def __init__(
        self,
        workers: Sequence[Any],
        min_batch_size: int,
        num_async: int,
        max_weight_sync_delay: int,
        node_id: str,
    ) -> None:
        self._workers = list(workers)
        self._min_batch_size = int(min_batch_size)
        self._num_async = int(num_async)
        self._delay = int(max_weight_sync_delay)
        self._node_id = node_id
        self._lock = threading.Lock()
        # (object ref of the weights, global vars incl. policy_version), newest first.
        self._weights: tuple[Any, dict[str, Any]] | None = None
        self._it: Iterator[Any] | None = None

    @ray.method(concurrency_group="weights")
    def set_weights(self, boxed: list[Any], global_vars: dict[str, Any]) -> None:
        """Store the learner weights to pass on: ``boxed`` is ``[object ref]`` (boxed, so
        that Ray hands over the ref, not the weights)."""
        with self._lock:
            self._weights = (boxed[0], dict(global_vars))

    def num_workers(self) -> int:
        return len(self._workers)

    def next_batch(self) -> tuple[Any, int]:
        """The next train batch and the weight syncs sent since the last one.

        Raises ``OperatorError`` (naming the node) when a rollout worker's sample or
        weight sync failed, a dead worker included."""
        if self._it is None:
            self._it = self._batches()
        return next(self._it)

    def _batches(self) -> Iterator[tuple[Any, int]]:
        from plangraph.flow.metrics import get_metrics
        from plangraph.flow.parallel import ParallelIterator
        from plangraph.rl import SampleBatch

        since_sync: dict[int, int] = {}
        sent_version: dict[int, int] = {}
        pending: list[Any] = []  # replies of the weight syncs sent, not looked at yet
        syncs = 0

        def check_pending() -> None:
            # Nothing silent: a failed set_weights raises here (never waits).
            if not pending:
                return
            done, rest = ray.wait(pending, num_returns=len(pending), timeout=0)
            pending[:] = rest
            if done:
                ray.get(done)

        def sync(batch: Any) -> Any:
            nonlocal syncs
            check_pending()
            actor = get_metrics().current_actor
            key = id(actor)
            since_sync[key] = since_sync.get(key, 0) + 1
            with self._lock:
                weights = self._weights
            if since_sync[key] < self._delay or weights is None:
                return batch
            since_sync[key] = 0
            ref, global_vars = weights
            version = int(global_vars.get("policy_version", -1))
            if sent_version.get(key) == version:
                return batch  # the worker has these weights already
            sent_version[key] = version
            pending.append(actor.set_weights.remote(ref, global_vars))
            syncs += 1
            return batch

        fragments: list[Any] = []
        count = 0

        def concat(batch: Any) -> list[Any]:
            nonlocal count
            fragments.append(batch)
            count += int(batch.env_steps())
            if count < self._min_batch_size:
                return []
            out = SampleBatch.concat_samples(fragments)
            fragments.clear()
            count = 0
            return [out]

        stream = (
            ParallelIterator.from_actors(self._workers, method="sample", name=self._node_id)
            .gather_async(num_async=self._num_async)
            .for_each(sync, name=self._node_id)
            .combine(concat, name=self._node_id)
        )
        for train_batch in stream:
            done, syncs = syncs, 0
            yield train_batch, done
