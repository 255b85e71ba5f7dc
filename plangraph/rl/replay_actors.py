"""Replay actors (Ape-X, Horgan et al. 2018): replay buffer shards held by Ray actors.

A ``ReplayActors`` resource is ``num_shards`` :class:`ReplayShard` actors, each holding a
``ReplayBuffer`` or ``PrioritizedReplayBuffer`` (``plangraph.rl.replay_buffer``: capacity
in env steps, FIFO eviction, Schaul et al. 2016 priorities) of its share of the capacity.
:class:`ReplayActorSet` is the driver's handle on them: which shard a rollout batch goes
to, whether a shard holds enough to be sampled, and what happens when one dies.

Ids. A sampled row is tagged with its shard (``replay_shard``) and its insertion id in
that shard (``batch_indexes``; slot = id % shard capacity). A replacement shard starts
empty with ids from ``generation * GENERATION_STRIDE``, so the ids of a shard's earlier
actors can never name a row of the new one: priorities computed on rows of a dead shard
are dropped like those of rows evicted by FIFO.

Traffic. ``add`` sends an object ref when it has one (the rollout worker's result), so the
shard reads the batch from the object store instead of the driver serialising it again.
Adds are not waited for, with at most ``MAX_PENDING_ADDS`` in flight per shard (more waits
for the oldest: back-pressure); their replies are looked at on the next add to the shard
and by ``get_state``: a failed add reveals a dead shard (replaced, or
``ReplayShardError``), an add that raised in the shard raises ``RemoteCallError`` naming
the plan node, the shard, the call and the remote traceback, and a batch the shard could not
read (its object lost with the node that held it) warns (``ReplayShardWarning``).

The driver counts the env steps it sent to each shard's current actor (``stored``); a
shard is sampled only once that reaches its share of ``learning_starts``. Ray runs an
actor's calls from one caller in submission order, so by then the shard holds them (a
shard that still answers "not ready", because an add failed, is asked again after the
next add).

Replay ratio. With ``training_intensity`` (RLlib's name; Reverb's ``SampleToInsertRatio``
rate limiter does the same for a replay table) the set keeps ``replayed ~= intensity *
(inserted - learning_starts)`` in env steps. ``ParallelReplay`` asks the shards only while
replay is owed (:meth:`ReplayActorSet.may_replay`), and ``StoreToReplay`` holds its next
batch while replay is owed and a shard can be asked (:meth:`ReplayActorSet.store_waits`),
so the rollout workers, whose next sample request waits for their last batch to be taken,
wait for the learner. Without it the ratio is whatever the learner's and the workers' speeds
make it, which changes with the machine's load (Ape-X on 2 cores: 1 to 6).

Deadlines. Every wait on a shard's reply (its node id when it starts, an add when
``MAX_PENDING_ADDS`` are in flight, its stats or state) lasts at most
``plangraph.flow.deadlines.REPLY_DEADLINE_S`` seconds, then raises ``WaitTimeoutError``
(``OperatorTimeoutError`` when a plan node waited) naming the shard.
"""

from __future__ import annotations

import collections
import math
import time
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from plangraph.errors import WaitTimeoutError
from plangraph.flow import deadlines
from plangraph.flow.errors import OperatorError, OperatorTimeoutError, RemoteCallError
from plangraph.rl.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer, SequenceReplayBuffer
from plangraph.rl.restarts import RestartPolicy, describe_actor_death
from plangraph.rl.sample_batch import SampleBatch

if TYPE_CHECKING:
    from plangraph.ops.resources import ReplayActorsParams

__all__ = [
    "GENERATION_STRIDE",
    "MAX_PENDING_ADDS",
    "ReplayActorSet",
    "ReplayShard",
    "ReplayShardError",
    "ReplayShardWarning",
]

GENERATION_STRIDE = 1 << 40
"""Insertion ids of a shard's ``g``-th actor start at ``g * GENERATION_STRIDE`` (env steps:
no shard adds 10**12 rows, so generations never overlap)."""

MAX_PENDING_ADDS = 32
"""Adds in flight per shard before ``add`` waits for the oldest one."""

_SB = SampleBatch


class ReplayShardWarning(RuntimeWarning):
    """A replay shard died and was replaced by an empty one (the run goes on)."""


class ReplayShardError(OperatorError):
    """A replay shard died and may not be replaced (``max_shard_restarts`` spent or 0)."""


class ReplayShard:
    """One shard: a replay buffer in a Ray actor (also usable in-process).

    Args:
        index: shard index in its resource (``0 .. num_shards - 1``).
        capacity: env steps this shard keeps (FIFO).
        learning_starts: env steps it must hold before ``replay`` returns batches.
        buffer: ``ReplayBuffer``/``PrioritizedReplayBuffer`` keyword arguments plus
            ``prioritized`` (bool) and ``item`` (``"sequence"``: a
            ``SequenceReplayBuffer``).
        seed: seeds the sampling RNG.
        generation: how many actors of this shard died before (ids start at
            ``generation * GENERATION_STRIDE``).
    """

    def __init__(
        self,
        index: int,
        capacity: int,
        learning_starts: int,
        buffer: Mapping[str, Any],
        seed: int,
        generation: int = 0,
    ) -> None:
        self.index = int(index)
        self.learning_starts = int(learning_starts)
        self.generation = int(generation)
        self.offset = self.generation * GENERATION_STRIDE
        kwargs = dict(buffer)
        self.buffer: ReplayBuffer
        if kwargs.pop("item", "transition") == "sequence":
            self.buffer = SequenceReplayBuffer(capacity, seed=seed, **kwargs)
        elif kwargs.pop("prioritized", False):
            self.buffer = PrioritizedReplayBuffer(capacity, seed=seed, **kwargs)
        else:
            self.buffer = ReplayBuffer(capacity, seed=seed)

    def add(self, batch: SampleBatch) -> int:
        """Store the batch's rows (FIFO eviction); returns the env steps now stored."""
        self.buffer.add(batch)
        return len(self.buffer)

    def replay(self, batch_size: int) -> SampleBatch | None:
        """``batch_size`` rows sampled as the buffer samples them, tagged ``replay_shard``
        (int64 ``[B]``) and ``batch_indexes`` (int64 ``[B]``, this generation's ids);
        ``None`` while the shard holds fewer than ``max(1, learning_starts)`` env steps."""
        if len(self.buffer) < max(1, self.learning_starts):
            return None
        batch = self.buffer.sample(batch_size)
        batch[_SB.BATCH_INDEXES] = batch[_SB.BATCH_INDEXES] + self.offset
        batch[_SB.REPLAY_SHARD] = np.full(batch.count, self.index, dtype=np.int64)
        return batch

    def _local_ids(self, batch_indexes: np.ndarray) -> np.ndarray:
        ids = np.asarray(batch_indexes, dtype=np.int64).reshape(-1) - self.offset
        # Rows of an earlier (or later) actor of this shard are never stored here.
        return np.where((ids >= 0) & (ids < GENERATION_STRIDE), ids, -1)

    def update_priorities(self, batch_indexes: np.ndarray, td_errors: np.ndarray) -> list[int]:
        """New priorities ``|td_error| + eps`` for the rows still stored; returns
        ``[applied, stale]`` (rows; stale: evicted since they were sampled, or sampled
        from an earlier actor of this shard; a uniform shard applies none)."""
        ids = self._local_ids(batch_indexes)
        held = self.buffer.holds(ids)
        applied = self.buffer.update_priorities(ids, td_errors)
        return [int(applied), int((~held).sum())]

    def priorities(self, batch_indexes: np.ndarray) -> np.ndarray:
        """float64 ``[k]``: the current priority of each row (NaN where not stored; NaN for
        every row of a uniform shard)."""
        ids = self._local_ids(batch_indexes)
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            return self.buffer.priorities(ids)
        return np.full(ids.shape, np.nan)

    def stats(self) -> dict[str, float]:
        """Buffer statistics (env steps) plus ``shard`` and ``generation``."""
        return {
            **self.buffer.stats(),
            "shard": float(self.index),
            "generation": float(self.generation),
        }

    def node_id(self) -> str:
        """The Ray node this actor runs on (hex id; ``"driver"`` outside Ray)."""
        import ray

        if not ray.is_initialized():
            return "driver"
        return str(ray.get_runtime_context().get_node_id())

    def get_state(self) -> dict[str, Any]:
        return {"generation": self.generation, "buffer": self.buffer.get_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_state()``; ids keep the generation they were stored with."""
        self.generation = int(state["generation"])
        self.offset = self.generation * GENERATION_STRIDE
        self.buffer.set_state(state["buffer"])

    def ping(self) -> bool:
        return True


class ReplayActorSet:
    """The driver's handle on a ``ReplayActors`` resource.

    Args:
        params: the resource's validated ``ReplayActorsParams``.
        seed: the resource's seed (each shard's, and each replacement's, derive from it).
        name: the resource id (messages).
        shard_memory: bytes each shard holds when full (``memory_check``); each actor
            reserves them as Ray ``memory``, so Ray places it where that much is free.

    Attributes:
        shards: the shard actor handles (index ``k`` is shard ``k``).
        capacities, learning_starts: each shard's share (env steps).
        generations: per shard, how many of its actors died.
        node_ids: per shard, the Ray node its actor runs on.
        stored: per shard, env steps sent to its current actor.
        inserted: env steps sent over all shards since the run began (monotone: a
            replaced shard's are kept).
        replayed: env steps of the replayed batches the shards delivered.
        num_restarts: dead shards replaced so far.
    """

    def __init__(
        self,
        params: ReplayActorsParams,
        seed: int = 0,
        name: str = "replay",
        shard_memory: tuple[int, ...] | None = None,
    ) -> None:
        from plangraph.ops.resources import shard_split

        self.params = params
        self.name = name
        self.num_shards = params.num_shards
        self.capacities = shard_split(params.capacity, self.num_shards)
        self.learning_starts = shard_split(params.learning_starts, self.num_shards)
        self._beta_steps = shard_split(params.beta_annealing_steps, self.num_shards)
        self._seed = int(seed)
        self._memory = tuple(shard_memory) if shard_memory else None
        self.generations = [0] * self.num_shards
        self.stored = [0] * self.num_shards
        self.inserted = 0
        self.replayed = 0
        # (inserted, replayed) when the current training_intensity took effect: the start,
        # or a restore whose checkpoint kept another ratio (it applies from then on).
        self._ratio_mark = (0, 0)
        self._in_flight: dict[str, int] = {}  # reader node id -> env steps asked, not delivered
        self._retry_after = [0] * self.num_shards
        self.num_restarts = 0
        self.restart_policy = RestartPolicy(
            params.max_shard_restarts, params.shard_restart_window_s, backoff_s=0.0
        )
        # Per shard: adds in flight, ref -> the plan node that sent it (oldest first).
        self._adds: list[collections.OrderedDict[Any, str]] = [
            collections.OrderedDict() for _ in range(self.num_shards)
        ]
        self._next_shard = 0
        self._worker_shards: dict[Any, int] = {}
        self.shards = [self._make(k) for k in range(self.num_shards)]
        self.node_ids: list[str] = self._get_from_shards(
            [s.node_id.remote() for s in self.shards], "node_id()"
        )

    # -- actors ------------------------------------------------------------------------

    def _shard_seed(self, shard: int) -> int:
        ss = np.random.SeedSequence([self._seed, shard, self.generations[shard]])
        return int(ss.generate_state(1)[0])

    def _make(self, shard: int) -> Any:
        import ray

        p = self.params
        buffer: dict[str, Any] = {"prioritized": p.prioritized}
        if p.item == "sequence":
            buffer["item"] = "sequence"
        if p.prioritized:
            buffer.update(
                alpha=p.alpha,
                beta=p.beta,
                beta_final=p.beta_final,
                beta_annealing_steps=self._beta_steps[shard],
                eps=p.eps,
            )
        # Zero CPUs: a shard is idle between calls (RLlib co-locates them with the driver).
        options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0}
        if self._memory is not None:
            options["memory"] = max(1, int(self._memory[shard]))
        return ray.remote(**options)(ReplayShard).remote(
            shard,
            self.capacities[shard],
            self.learning_starts[shard],
            buffer,
            self._shard_seed(shard),
            self.generations[shard],
        )

    def replace_dead_shard(self, shard: int, dead: Any, error: BaseException, node_id: str) -> Any:
        """Handle the death of shard ``shard``'s actor ``dead`` (seen by plan node
        ``node_id``): replace it by an empty shard of the next generation, with a
        ``ReplayShardWarning`` naming the node, the shard, its Ray node and the cause;
        returns the current actor (the same one if ``dead`` was already replaced).

        Raises:
            ReplayShardError: ``max_shard_restarts`` is 0, or that many replacements of this
                shard happened within ``shard_restart_window_s``.
        """
        if self.shards[shard] is not dead:
            return self.shards[shard]  # another operator saw this death first
        cause = describe_actor_death(error)
        where = f"replay shard {shard} of {self.name!r} (Ray node {self.node_ids[shard]})"
        if self.restart_policy.admit(shard) is None:
            n = self.params.max_shard_restarts
            how = (
                f"it was replaced {n} time(s) within {self.params.shard_restart_window_s:g} s "
                "already (max_shard_restarts)"
                if n
                else f"set max_shard_restarts on resource {self.name!r} to replace a dead "
                "shard by an empty one and go on"
            )
            raise ReplayShardError(
                node_id,
                f"ReplayShardError: {where} died: {cause}; {how}",
                str(getattr(error, "error_msg", "") or error),
                f"replay shard {shard}",
            ) from error
        import ray

        try:
            ray.kill(dead, no_restart=True)
        except Exception:  # already dead is fine
            pass
        self.generations[shard] += 1
        self.stored[shard] = 0
        self._retry_after[shard] = 0
        self._adds[shard].clear()
        self.shards[shard] = self._make(shard)
        self.node_ids[shard] = self._get_from_shards(
            [self.shards[shard].node_id.remote()], "node_id()", [shard]
        )[0]
        self.num_restarts += 1
        warnings.warn(
            ReplayShardWarning(
                f"plan node {node_id!r}: {where} died: {cause}; replaced by an empty shard "
                f"(generation {self.generations[shard]}, on Ray node {self.node_ids[shard]}); "
                "its stored env steps are lost, the run goes on"
            ),
            stacklevel=2,
        )
        return self.shards[shard]

    # -- writing -----------------------------------------------------------------------

    def shard_for(self, worker: Any = None) -> int:
        """The shard the next batch goes to: round robin, or (``worker`` given) the shard
        assigned to that rollout worker when it was first seen (round robin)."""
        if worker is not None and worker in self._worker_shards:
            return self._worker_shards[worker]
        shard = self._next_shard
        self._next_shard = (shard + 1) % self.num_shards
        if worker is not None:
            self._worker_shards[worker] = shard
        return shard

    def add(self, shard: int, batch: Any, count: int, node_id: str) -> None:
        """Send ``batch`` (a ``SampleBatch`` or an object ref to one) of ``count`` env steps
        to shard ``shard`` without waiting, at most ``MAX_PENDING_ADDS`` in flight; the
        replies of the earlier adds to it are looked at first.

        Raises:
            ReplayShardError: the shard died and may not be replaced (see
                :meth:`replace_dead_shard`).
            RemoteCallError: an earlier ``add`` raised in the shard (names ``node_id``,
                the shard, its Ray node and the remote traceback).
            OperatorTimeoutError: ``MAX_PENDING_ADDS`` were in flight and the oldest got
                no reply within ``REPLY_DEADLINE_S``.
        """
        self._reap(shard, node_id, block=len(self._adds[shard]) >= MAX_PENDING_ADDS)
        ref = self.shards[shard].add.remote(batch)
        self._adds[shard][ref] = node_id
        self.stored[shard] += int(count)
        self.inserted += int(count)

    def _reap(self, shard: int, node_id: str, block: bool) -> None:
        """Collect finished adds of ``shard``; a dead actor is replaced (or raises), an add
        that raised in the shard raises ``RemoteCallError``, a lost batch warns."""
        import ray
        from ray.exceptions import RayActorError, RayError, RayTaskError

        pending = self._adds[shard]
        if not pending:
            return
        refs = list(pending)
        if block:  # back-pressure: the oldest add first
            deadline_s = deadlines.REPLY_DEADLINE_S
            deadlines.wait_refs(
                refs[:1],
                1,
                time.monotonic() + deadline_s,
                lambda _pending: self.late_error(
                    [shard], f"add() ({len(refs)} in flight)", deadline_s, node_id
                ),
            )
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        actor = self.shards[shard]
        for ref in done:
            sender = pending.pop(ref, None) or node_id
            try:
                ray.get(ref)
            except RayActorError as exc:
                self.replace_dead_shard(shard, actor, exc, node_id)
                return
            except RayTaskError as exc:
                raise RemoteCallError.from_ray_error(
                    sender, "add()", f"replay shard {shard} of {self.name!r}", exc
                ) from exc
            except RayError as exc:
                # The batch could not be read (its object lost with the node or worker that
                # held it): that batch is lost, the shard is fine and holds fewer env steps.
                warnings.warn(
                    ReplayShardWarning(
                        f"plan node {sender!r}: replay shard {shard} of {self.name!r} could "
                        f"not read a batch sent to it ({type(exc).__name__}); that batch is "
                        "lost, the run goes on"
                    ),
                    stacklevel=2,
                )

    # -- reading -----------------------------------------------------------------------

    def ready(self, shard: int) -> bool:
        """Whether shard ``shard`` is worth asking for a batch: the env steps sent to its
        actor reached its ``learning_starts`` share (and grew since it last said no)."""
        need = max(1, self.learning_starts[shard], self._retry_after[shard])
        return self.stored[shard] >= need

    def not_ready_after(self, shard: int) -> None:
        """Shard ``shard`` answered "not ready" (an add was lost): ask it again only after
        more env steps were sent to it."""
        self._retry_after[shard] = self.stored[shard] + 1

    # -- replay ratio ------------------------------------------------------------------

    def replay_owed(self) -> float:
        """Env steps of replay that ``training_intensity`` asks for beyond those delivered
        and those in flight: ``intensity * max(0, inserted - max(learning_starts,
        inserted_0)) - (replayed - replayed_0) - in_flight``, where ``(inserted_0,
        replayed_0)`` is where this ratio took effect ((0, 0) unless a restore changed
        it); ``+inf`` without ``training_intensity``."""
        intensity = self.params.training_intensity
        if intensity is None:
            return math.inf
        inserted_0, replayed_0 = self._ratio_mark
        past = max(0, self.inserted - max(self.params.learning_starts, inserted_0))
        return intensity * past - (self.replayed - replayed_0) - sum(self._in_flight.values())

    def may_replay(self) -> bool:
        """Whether a reader may ask a shard for another batch (replay is owed)."""
        return self.replay_owed() > 0

    def store_waits(self) -> bool:
        """Whether a writer should hold its next batch: ``training_intensity`` is set,
        replay is owed, and some shard can be asked for it. While no shard can be, storing
        is what lets replay start (or resume after a shard was replaced), so it goes on."""
        if self.params.training_intensity is None or self.replay_owed() <= 0:
            return False
        return any(self.ready(k) for k in range(self.num_shards))

    def set_in_flight(self, reader: str, env_steps: int) -> None:
        """Reader ``reader`` (a plan node id) has requests for ``env_steps`` env steps in
        flight (set, not added: a rebuilt reader cannot leave a stale count behind)."""
        self._in_flight[reader] = int(env_steps)

    def add_replayed(self, env_steps: int) -> None:
        """A shard delivered a replayed batch of ``env_steps`` env steps."""
        self.replayed += int(env_steps)

    # -- priorities --------------------------------------------------------------------

    def update_priorities(
        self, shard: int, batch_indexes: np.ndarray, td_errors: np.ndarray
    ) -> Any:
        """Send new priorities to shard ``shard`` without waiting; returns the object ref of
        its ``[applied, stale]`` reply, for the caller to read (``UpdatePriorities`` does,
        on its later items)."""
        return self.shards[shard].update_priorities.remote(batch_indexes, td_errors)

    # -- state and teardown --------------------------------------------------------------

    def stats(self) -> list[dict[str, float]]:
        """Each shard's ``ReplayShard.stats()`` (one Ray call per shard, waited for)."""
        return self._get_from_shards([s.stats.remote() for s in self.shards], "stats()")

    def get_state(self) -> dict[str, Any]:
        """Every shard's buffer and generation, and the driver-side counts (a data tree).

        The adds sent before are looked at once the shards answered (their ``get_state``
        ran after them).

        Raises:
            RemoteCallError: an add raised in its shard (the state would lack that batch).
            WaitTimeoutError: a shard did not answer within ``REPLY_DEADLINE_S``.
        """
        shards = self._get_from_shards([s.get_state.remote() for s in self.shards], "get_state()")
        for k in range(self.num_shards):
            pending = list(self._adds[k])
            if pending:  # finished (queued before get_state); their replies are arriving
                self._wait_settled(k, pending)
                self._reap(k, self.name, block=False)
        return {
            "shards": shards,
            "generations": list(self.generations),
            "stored": list(self.stored),
            "inserted": self.inserted,
            "replayed": self.replayed,
            "training_intensity": self.params.training_intensity,
            "ratio_mark": list(self._ratio_mark),
            "next_shard": self._next_shard,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_state()`` of a resource with as many shards.

        Raises:
            ValueError: another number of shards.
        """
        shards = state["shards"]
        if len(shards) != self.num_shards:
            raise ValueError(
                f"replay state has {len(shards)} shards, resource {self.name!r} has "
                f"{self.num_shards}"
            )
        self.generations = [int(g) for g in state["generations"]]
        self.stored = [int(s) for s in state["stored"]]
        self.inserted = int(state.get("inserted", sum(self.stored)))
        self.replayed = int(state.get("replayed", 0))
        if "ratio_mark" in state and state.get("training_intensity") == (
            self.params.training_intensity
        ):
            mark = state["ratio_mark"]
            self._ratio_mark = (int(mark[0]), int(mark[1]))
        else:
            # Another ratio (or a checkpoint from before the ratio was kept): the new one
            # applies from here on, not to every env step stored since learning_starts,
            # which would owe (or forgive) a burst of replay at once.
            self._ratio_mark = (self.inserted, self.replayed)
        self._in_flight.clear()
        self._next_shard = int(state["next_shard"])
        self._get_from_shards(
            [s.set_state.remote(st) for s, st in zip(self.shards, shards, strict=True)],
            "set_state()",
        )

    def _wait_settled(self, shard: int, refs: list[Any]) -> None:
        """Wait (at most ``REPLY_DEADLINE_S``) until ``refs``, calls to ``shard`` that
        have finished, have their replies here (failed or not)."""
        deadlines.wait_all(
            refs, lambda _late, deadline_s: self.late_error([shard], "add()", deadline_s)
        )

    def _get_from_shards(
        self, refs: list[Any], call: str, shards: list[int] | None = None
    ) -> list[Any]:
        """The replies ``refs`` of ``call`` from ``shards`` (default: every shard, in
        order), waited for at most ``REPLY_DEADLINE_S`` seconds.

        Raises:
            WaitTimeoutError: a shard did not answer in time (the message names it).
        """
        which = list(range(self.num_shards)) if shards is None else shards
        return deadlines.get_all(
            refs,
            lambda late, deadline_s: self.late_error([which[i] for i in late], call, deadline_s),
        )

    def late_error(
        self, shards: list[int], call: str, deadline_s: float, node_id: str | None = None
    ) -> WaitTimeoutError:
        """The error for shards ``shards`` not answering ``call`` within ``deadline_s``
        seconds: an ``OperatorTimeoutError`` of plan node ``node_id`` when one waited."""
        names = ", ".join(map(str, shards))
        text = deadlines.not_answered(
            f"replay shard {names} of {self.name!r}", call, deadline_s, "the shard actor stuck"
        )
        if node_id is None:
            return WaitTimeoutError(text)
        return OperatorTimeoutError(
            node_id, f"OperatorTimeoutError: {text}", actor=f"replay shard {names}"
        )

    def stop(self) -> None:
        """Kill the shard actors. Idempotent."""
        import ray

        for s in self.shards:
            try:
                ray.kill(s, no_restart=True)
            except Exception:  # already dead is fine
                pass
        self.shards = []
