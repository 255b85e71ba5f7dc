"""Implementations of the built-in replay operators (``plangraph/ops/builtin/replay.py``).

``LocalReplay`` samples a driver-side ``ReplayBuffer``; ``ParallelReplay`` and
``UpdatePriorities`` talk to the shard actors of a ``ReplayActors`` resource
(``plangraph.rl.replay_actors.ReplayActorSet``), and ``StoreToReplay`` writes either.

A request to a shard actor is waited for at most ``plangraph.flow.deadlines.REPLY_DEADLINE_S``
seconds (``OperatorTimeoutError`` naming the node and the shard), blocking or not. Calls not
waited for (``add``, ``update_priorities``) have their replies looked at later, on the
node's next item: one that raised in the shard raises ``RemoteCallError`` naming the node,
the shard, the call and the remote traceback.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from plangraph.flow import deadlines
from plangraph.flow.errors import OperatorError, RemoteCallError
from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.flow.sentinel import NOT_READY, note_local_wait, note_pending
from plangraph.flow.watchdog import note_waiting
from plangraph.runtime.build_context import BuildContext, resource_id
from plangraph.runtime.counters import (
    PRIORITIES_APPLIED,
    PRIORITIES_SENT,
    PRIORITIES_STALE,
    REPLAYED,
    SHARD_RESTARTS,
    STORED,
)
from plangraph.runtime.implementations import register_lowering, register_map

_MAX_PRIORITY_REPLIES = 256
"""Priority updates awaiting a shard's reply before ``UpdatePriorities`` waits for one."""


def _count_restarts(shards: Any, before: int) -> None:
    """Add the shards replaced since ``before`` to counter ``num_replay_shard_restarts``
    (an increment, so the counter stays monotone across a resumed run)."""
    if shards.num_restarts > before:
        get_metrics().counters[SHARD_RESTARTS] += shards.num_restarts - before


def _policy_rows(nid: str, batch: Any, policies: tuple[str, ...]) -> Any:
    """What a replay buffer stores of ``batch``: a ``SampleBatch`` as it is; of a
    ``MultiAgentBatch``, the rows of the one policy in ``policies`` (the compiler's PG194
    asks for exactly one), so the buffer holds one policy's agent steps."""
    per_policy = getattr(batch, "policy_batches", None)
    if per_policy is None:
        return batch
    if len(policies) != 1:
        raise ValueError(
            f"StoreToReplay {nid!r} got a MultiAgentBatch but policies={list(policies)}; "
            "name exactly the one policy whose rows it stores"
        )
    from plangraph.rl import SampleBatch

    rows = per_policy.get(policies[0])
    return rows if rows is not None else SampleBatch()


@register_map("StoreToReplay")
def _store_to_replay(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    if ctx.compiled.resources[resource_id(node.params.buffer)].kind == "ReplayActors":
        return _store_to_replay_actors(node, ctx)
    buffer = ctx.buffer(node.params.buffer)
    policies = tuple(node.params.policies)

    def store(batch: Any) -> Any:
        buffer.add(_policy_rows(node.id, batch, policies))
        return batch

    return store


@register_lowering("LocalReplay")
def _local_replay(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    buffer = ctx.buffer(p.buffer)
    rid = resource_id(p.buffer)
    params: Any = ctx.compiled.resources[rid].params  # ReplayBufferParams
    learning_starts = params.learning_starts
    needed = max(1, learning_starts)

    def why() -> str:
        # Only evaluated when the sink's idle watchdog fires.
        text = (
            f"LocalReplay: buffer {rid!r} holds {len(buffer)} env steps, fewer than "
            f"learning_starts={learning_starts}"
        )
        if buffer.capacity < needed:
            text += (
                f"; its capacity ({buffer.capacity} env steps) is below learning_starts, so "
                "it never will (raise capacity or lower learning_starts)"
            )
        else:
            text += " (is its writer, StoreToReplay, driven and fed?)"
        return text

    def base(timeout: float | None) -> Iterator[Any]:
        # Not ready (rather than blocking) until learning_starts env steps are stored, so
        # a Concurrently moves on to the branch that fills the buffer.
        while True:
            if len(buffer) < needed:
                note_waiting(node.id, why)
                yield NOT_READY
            else:
                yield buffer.sample(p.batch_size)

    return LocalIterator(base, name=node.id)


def _store_to_replay_actors(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    p = node.params
    rid = resource_id(p.buffer)
    shards = ctx.replay_actor_set(p.buffer)
    by_worker = p.shard == "by_worker"
    policies = tuple(p.policies)

    # The batch held back while replay is behind (training_intensity), with the rollout
    # worker and object ref it came with: other branches run before it is stored and may
    # set the metrics' current actor and ref meanwhile.
    waiting: list[Any] = []  # [batch, current_actor, current_ref] while one is held

    def why() -> str:
        # Only evaluated when the sink's idle watchdog fires.
        return (
            f"StoreToReplay: holds a rollout batch until replay of {rid!r} catches up with "
            f"training_intensity={shards.params.training_intensity:g} "
            f"({shards.replayed:,} env steps replayed for {shards.inserted:,} stored); is "
            "its reader, ParallelReplay, driven, and its learner training?"
        )

    def store(batch: Any) -> Any:
        metrics = get_metrics()
        if waiting and waiting[0] is batch:
            metrics.current_actor, metrics.current_ref = waiting[1], waiting[2]
        if shards.store_waits():
            # (For the held batch itself, the actor and ref just restored from `waiting`.)
            waiting[:] = [batch, metrics.current_actor, metrics.current_ref]
            note_waiting(node.id, why)
            note_local_wait()
            return NOT_READY
        waiting.clear()
        rows = _policy_rows(node.id, batch, policies)  # one policy's rows of a multi-agent batch
        count = rows.env_steps() if rows is batch else rows.count
        if count == 0:
            return batch
        shard = shards.shard_for(metrics.current_actor if by_worker else None)
        # The object ref the rollout worker's result came in, when this is that very
        # batch: the shard reads it from the object store, the driver sends nothing again.
        held = metrics.current_ref
        payload = held[0] if held is not None and held[1] is rows else rows
        before = shards.num_restarts
        shards.add(shard, payload, count, node.id)
        _count_restarts(shards, before)
        metrics.counters[STORED] += count
        return batch

    return store


@register_lowering("ParallelReplay")
def _parallel_replay(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    import ray
    from ray.exceptions import RayActorError, RayError

    p = node.params
    rid = resource_id(p.buffer)
    shards = ctx.replay_actor_set(p.buffer)

    def why() -> str:
        # Only evaluated when the sink's idle watchdog fires.
        held = ", ".join(
            f"shard {k}: {shards.stored[k]:,} of {max(1, shards.learning_starts[k]):,}"
            for k in range(shards.num_shards)
        )
        return (
            f"ParallelReplay: no shard of {rid!r} holds its share of learning_starts yet "
            f"(env steps sent: {held}; is its writer, StoreToReplay, driven and fed?)"
        )

    def ask(pending: dict[Any, tuple[int, Any, float]]) -> None:
        # Up to num_async requests per ready shard, while the replay ratio allows
        # (ReplayActors' training_intensity); shards are asked in turn, one request each.
        asked = [0] * shards.num_shards
        for kk, a, _since in pending.values():
            if a is shards.shards[kk]:
                asked[kk] += 1
        more = True
        while more:
            more = False
            for k in range(shards.num_shards):
                if asked[k] >= p.num_async or not shards.ready(k) or not shards.may_replay():
                    continue
                actor = shards.shards[k]
                pending[actor.replay.remote(p.batch_size)] = (k, actor, time.monotonic())
                asked[k] += 1
                shards.set_in_flight(node.id, len(pending) * p.batch_size)
                more = True

    def ratio_why() -> str:
        intensity = shards.params.training_intensity
        return (
            f"ParallelReplay: replay of {rid!r} is ahead of its training_intensity="
            f"{intensity:g} ({shards.replayed:,} env steps replayed for {shards.inserted:,} "
            "stored); is its writer, StoreToReplay, driven and fed?"
        )

    def waiting_why(in_flight: int) -> str:
        # Only evaluated when the sink's idle watchdog fires.
        return (
            f"ParallelReplay: waiting for the shards of {rid!r} to answer its {in_flight} "
            "replay requests"
        )

    def late(pending: dict[Any, tuple[int, Any, float]], unanswered: list[Any]) -> Exception:
        """The error for the oldest request of ``unanswered`` (requests in ``pending``)."""
        oldest = min(unanswered, key=lambda ref: pending[ref][2])
        shard = pending[oldest][0]
        return shards.late_error(
            [shard], f"replay({p.batch_size})", deadlines.REPLY_DEADLINE_S, node.id
        )

    def check_deadline(pending: dict[Any, tuple[int, Any, float]]) -> None:
        """Raise if a request has been unanswered for the deadline (checked each round, so
        that other shards' replies cannot hide a silent one)."""
        now = time.monotonic()
        old = [
            r for r, (_, _, since) in pending.items() if now - since >= deadlines.REPLY_DEADLINE_S
        ]
        if old:
            _, still = ray.wait(old, num_returns=len(old), timeout=0, fetch_local=False)
            if still:
                raise late(pending, still)

    def base(timeout: float | None) -> Iterator[Any]:
        # request -> (shard, the actor asked, when it was asked: time.monotonic())
        pending: dict[Any, tuple[int, Any, float]] = {}
        while True:
            ask(pending)
            if not pending:
                if not shards.may_replay():
                    note_waiting(node.id, ratio_why)
                else:
                    note_waiting(node.id, why)
                note_local_wait()
                yield NOT_READY
                continue
            check_deadline(pending)
            refs = list(pending)
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if not ready and timeout is None:
                oldest = min(since for _, _, since in pending.values())
                ready = deadlines.wait_refs(
                    refs,
                    1,
                    oldest + deadlines.REPLY_DEADLINE_S,
                    functools.partial(late, pending),
                    note=(node.id, functools.partial(waiting_why, len(refs))),
                )
            elif not ready and timeout != 0:
                ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
            if not ready:
                note_pending(refs)
                yield NOT_READY
                continue
            in_ready = set(ready)
            batches = []
            for ref in [r for r in refs if r in in_ready]:  # submission order
                shard, actor, _since = pending.pop(ref)
                shards.set_in_flight(node.id, len(pending) * p.batch_size)
                try:
                    batch = ray.get(ref)
                except RayActorError as exc:
                    before = shards.num_restarts
                    shards.replace_dead_shard(shard, actor, exc, node.id)
                    _count_restarts(shards, before)
                    continue
                except RayError as exc:
                    raise OperatorError.from_exception(
                        node.id, exc, f"replay shard {shard}"
                    ) from exc
                if batch is None:  # an add was lost: ask again after the next one
                    shards.not_ready_after(shard)
                    continue
                shards.add_replayed(batch.env_steps())
                batches.append(batch)
            for batch in batches:
                get_metrics().counters[REPLAYED] += batch.env_steps()
                yield batch

    return LocalIterator(base, name=node.id)


@register_map("UpdatePriorities")
def _update_priorities(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    """Sends each trained batch's TD errors to the shards it was replayed from, without
    waiting; the replies (rows applied and stale) are read on later items, at most
    ``_MAX_PRIORITY_REPLIES`` outstanding. A shard that died is left to ``ParallelReplay``
    (it replaces it); an ``update_priorities`` that raised in a shard raises
    ``RemoteCallError`` (names the node, the shard, its Ray node, the remote traceback)."""
    import ray
    from ray.exceptions import RayActorError, RayError

    shards = ctx.replay_actor_set(node.params.buffer)
    # (object ref of a shard's [applied, stale] reply, that shard), oldest first
    replies: list[tuple[Any, int]] = []

    def collect(block: bool) -> None:
        if not replies:
            return
        if block:  # bounded: wait for the oldest reply
            deadline_s = deadlines.REPLY_DEADLINE_S
            oldest, shard = replies[0]
            deadlines.wait_refs(
                [oldest],
                1,
                time.monotonic() + deadline_s,
                lambda _still: shards.late_error(
                    [shard], "update_priorities()", deadline_s, node.id
                ),
            )
        refs = [ref for ref, _ in replies]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        finished = set(done)
        counters = get_metrics().counters
        shard_of = dict(replies)
        failed: Exception | None = None
        for ref in [r for r in refs if r in finished]:  # submission order
            try:
                applied, stale = ray.get(ref)
            except RayActorError:
                continue  # the shard died: ParallelReplay reports and replaces it
            except RayError as exc:  # the call raised in the shard
                if failed is None:
                    failed = RemoteCallError.from_ray_error(
                        node.id,
                        "update_priorities()",
                        f"replay shard {shard_of[ref]} of {shards.name!r}",
                        exc,
                    )
                    failed.__cause__ = exc
                continue
            counters[PRIORITIES_APPLIED] += applied
            counters[PRIORITIES_STALE] += stale
        replies[:] = [(ref, k) for ref, k in replies if ref not in finished]
        if failed is not None:
            raise failed

    def update(info: Any) -> Any:
        collect(block=len(replies) >= _MAX_PRIORITY_REPLIES)
        keys = info.replay
        if keys is None:
            return info
        for shard in np.unique(keys.shards):
            k = int(shard)
            if not 0 <= k < shards.num_shards:
                raise ValueError(
                    f"a trained batch names replay shard {k}, but {shards.name!r} has "
                    f"{shards.num_shards}; was it replayed from another ReplayActors resource?"
                )
            rows = keys.shards == shard
            reply = shards.update_priorities(k, keys.batch_indexes[rows], keys.td_errors[rows])
            replies.append((reply, k))
        get_metrics().counters[PRIORITIES_SENT] += int(keys.td_errors.shape[0])
        return info

    return update


@register_map("WriteExperiences")
def _write_experiences(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    from plangraph.runtime.recording import experience_recorder

    p = node.params
    return experience_recorder(
        ctx,
        path=p.path,
        workers=p.workers,
        max_file_bytes=int(p.max_file_mb * 2**20),
        prefix=node.id,
    )


@register_lowering("MixInReplay")
def _mix_in_replay(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    """RLlib's ``MixInReplay`` (``plangraph/ops/builtin/replay.py`` has the semantics):
    store, then emit the batch and ``k`` uniform replays, ``k`` drawn as RLlib draws it."""
    from plangraph.rl import SampleBatch

    p = node.params
    rng = ctx.node_rng(node.id)
    # The ring of stored batches (RLlib's SimpleReplayBuffer): filled in order, then slot
    # ``next_slot`` (the oldest) is overwritten. Stored as read-only copies without their
    # episode statistics; each replay is a new SampleBatch over the same arrays.
    slots: list[Any] = []
    next_slot = 0

    def store(batch: Any) -> None:
        nonlocal next_slot
        columns = {}
        for key in batch.keys():
            column = np.array(batch[key], copy=True)
            column.flags.writeable = False
            columns[key] = column
        kept = SampleBatch(columns)
        if len(slots) < p.num_slots:
            slots.append(kept)
        else:
            slots[next_slot] = kept
            next_slot = (next_slot + 1) % p.num_slots

    def mix(batch: Any) -> list[Any]:
        if not isinstance(batch, SampleBatch):
            raise TypeError(
                f"MixInReplay {node.id!r} mixes SampleBatch items, got {type(batch).__name__}"
            )
        store(batch)
        out = [batch]
        f = p.replay_proportion
        while rng.random() < f:  # RLlib: floor(f) replays, and one more w.p. f - floor(f)
            f -= 1.0
            stored = slots[int(rng.integers(len(slots)))]
            out.append(SampleBatch({k: stored[k] for k in stored.keys()}))
        replayed = sum(b.env_steps() for b in out[1:])
        if replayed:
            get_metrics().counters[REPLAYED] += replayed
        return out

    def get_state() -> dict[str, Any]:
        return {
            "rng": rng.bit_generator.state,
            "slots": [b.to_data() for b in slots],
            "next_slot": next_slot,
        }

    def set_state(state: dict[str, Any]) -> None:
        nonlocal next_slot
        rng.bit_generator.state = state["rng"]
        slots.clear()
        for data in state["slots"]:
            restored = SampleBatch.from_data(data)
            store(restored)
        next_slot = int(state["next_slot"])

    ctx.register_operator_state(node.id, get_state, set_state)
    return inputs[0].combine(mix, name=node.id)
