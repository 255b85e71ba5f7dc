"""Built-in replay operators: write to and read from a replay buffer resource.

A ``ReplayBuffer`` lives in the driver (``LocalReplay`` samples it); ``ReplayActors`` are
Ray actors holding one buffer shard each (Ape-X: ``ParallelReplay`` samples them
asynchronously, ``UpdatePriorities`` sends the learner's TD errors back).

Implementations: ``plangraph/runtime/ops/replay.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from plangraph.ops.builtin._shared import (
    WORKERS_READ,
    PolicyIds,
    ResourceRef,
    policies_field,
    same_as_input,
    workers_field,
)
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams
from plangraph.ops.sizes import MAX_BATCH, MAX_IN_FLIGHT, MAX_PASSES, MAX_QUEUE

__all__ = [
    "LocalReplay",
    "LocalReplayParams",
    "MixInReplay",
    "MixInReplayParams",
    "ParallelReplay",
    "ParallelReplayParams",
    "StoreToReplay",
    "StoreToReplayParams",
    "UpdatePriorities",
    "UpdatePrioritiesParams",
    "WriteExperiences",
    "WriteExperiencesParams",
]


class StoreToReplayParams(OpParams):
    """Add each batch to a replay buffer resource and pass it through unchanged.

    A ``ReplayBuffer`` (in the driver) stores every batch. ``ReplayActors`` get each batch
    on one shard (``shard``: round robin over the shards, or by the rollout worker that
    sampled it), as an object ref: the shard actor reads the batch from the object store,
    so the driver neither serialises nor sends its rows again (it passes the ref the
    rollout worker returned; a batch made in the driver is put once). Adds the batch's env
    steps to counter ``num_env_steps_stored`` (``ReplayActors`` only). With the
    ``ReplayActors``' ``training_intensity`` set, a batch is held (not ready) while replay
    is behind that ratio and a shard can be asked for it: its source, and so the rollout
    workers, wait for the learner.
    """

    buffer: ResourceRef = Field(
        description='The ReplayBuffer or ReplayActors resource to write, "@id".'
    )
    shard: Literal["round_robin", "by_worker"] = Field(
        "round_robin",
        description=(
            "ReplayActors only: which shard a batch goes to: round_robin over the shards, "
            "or by_worker (each rollout worker's batches to one shard, assigned round robin "
            "as workers are first seen)."
        ),
    )
    policies: PolicyIds = policies_field(
        "of a MultiAgentBatch, the one policy whose rows (agent steps) are stored; the "
        "buffer's capacity then counts its agent steps"
    )


StoreToReplay = register_op(
    "StoreToReplay",
    category="replay",
    apply="for_each",
    inputs=["SampleBatch | MultiAgentBatch"],
    output="SampleBatch",
    infer_output=same_as_input,
    params=StoreToReplayParams,
    resources={"buffer": (("ReplayBuffer", "ReplayActors"), "write")},
    builtin=True,
)


class LocalReplayParams(OpParams):
    """Replay batches from a replay buffer resource.

    Yields a not-ready marker (so a ``Concurrently`` moves on) until the buffer holds
    ``learning_starts`` env steps, then one sampled batch of ``batch_size`` env steps (a
    buffer of item ``"sequence"``: ``batch_size`` sequences, their rows back to back) per
    item (with ``batch_indexes``, and IS ``weights`` for prioritized buffers).
    """

    buffer: ResourceRef = Field(description='The ReplayBuffer resource to read, "@id".')
    batch_size: int = Field(
        ge=1,
        le=MAX_BATCH,
        description="Env steps per replayed batch; sequences from a resource of item "
        "'sequence' (R2D2).",
    )


LocalReplay = register_op(
    "LocalReplay",
    category="replay",
    apply="source",
    output="SampleBatch",
    params=LocalReplayParams,
    resources={"buffer": ("ReplayBuffer", "read")},
    builtin=True,
)


class ParallelReplayParams(OpParams):
    """Replay batches from the shards of a ``ReplayActors`` resource, asynchronously (Ape-X's
    ``Replay(actors=replay_actors, num_async=4)``).

    Keeps ``num_async`` sample requests in flight per shard and yields each batch of
    ``batch_size`` env steps as it arrives, in completion order. A shard is asked only once
    it holds its share of ``learning_starts`` (not-ready until some shard does, so a
    ``Concurrently`` moves on to the branch that stores rollouts). Each batch is tagged:
    ``replay_shard`` (int64 ``[B]``, the shard index) and ``batch_indexes`` (int64 ``[B]``,
    the rows' insertion ids in that shard: slot = id % shard capacity), plus IS ``weights``
    for prioritized shards, so ``UpdatePriorities`` can send TD errors back. Adds env steps
    to counter ``num_env_steps_replayed``. With the resource's ``training_intensity`` set,
    no request is made while replay is ahead of that ratio (not ready until
    ``StoreToReplay`` stores more). A dead shard is replaced (empty) or stops the run as
    its resource says (``max_shard_restarts``).
    """

    buffer: ResourceRef = Field(description='The ReplayActors resource to read, "@id".')
    batch_size: int = Field(
        ge=1,
        le=MAX_BATCH,
        description="Env steps per replayed batch; sequences from a resource of item "
        "'sequence' (R2D2).",
    )
    num_async: int = Field(
        4, ge=1, le=MAX_IN_FLIGHT, description="Sample requests in flight per shard."
    )


ParallelReplay = register_op(
    "ParallelReplay",
    category="replay",
    apply="source",
    output="SampleBatch",
    params=ParallelReplayParams,
    resources={"buffer": ("ReplayActors", "read")},
    builtin=True,
)


class UpdatePrioritiesParams(OpParams):
    """Send the learner's TD errors back to the replay shards as new priorities, and pass
    the ``TrainInfo`` through (Ape-X's ``update_prio_and_stats``).

    The rows of a trained batch go back to the shard named by their ``replay_shard`` tag
    and to the slot named by their ``batch_indexes`` (priority ``|td_error| + eps``,
    Schaul et al. 2016). A slot overwritten since it was sampled (FIFO eviction), or a row
    of a shard replaced since, is left alone: the shard compares insertion ids. One call
    per shard per item, not waited for (its reply is read on a later item: one that raised
    in the shard stops the run with ``RemoteCallError``); counters ``num_priorities_sent``
    and, as the shards reply, ``num_priorities_applied`` and ``num_priorities_stale``
    (rows). Items without TD errors (a uniform policy loss, a batch not from
    ``ParallelReplay``) pass untouched.
    """

    buffer: ResourceRef = Field(description='The ReplayActors resource to update, "@id".')


UpdatePriorities = register_op(
    "UpdatePriorities",
    category="replay",
    apply="for_each",
    inputs=["TrainInfo"],
    output="TrainInfo",
    params=UpdatePrioritiesParams,
    resources={"buffer": ("ReplayActors", "write")},
    builtin=True,
)


class WriteExperiencesParams(OpParams):
    """Record each batch's rows to a dataset folder and pass the batch through unchanged.

    Writes the rows in plangraph's open offline schema (``plangraph.rl.offline``; user
    page ``docs/offline.md``): ``obs, actions, rewards, terminateds, truncateds, eps_id,
    t``, the behaviour policy's ``action_logp`` and ``next_obs`` where the batch has them,
    ``agent_index`` and ``policy_id`` for a ``MultiAgentBatch``. Parquet files of at most
    about ``max_file_mb`` MiB of rows (before compression) are written by a background
    thread, each complete before it appears under its name; ``metadata.json`` records the
    env id and spaces, the plan, the run seed and the plangraph version. The last rows are
    written when the run stops. Adds the rows recorded to counter
    ``num_env_steps_recorded`` (agent steps for a multi-agent batch). ``plangraph run
    --record DIR`` adds one after every rollout source instead.
    """

    path: str = Field(
        min_length=1,
        description="Dataset folder to write (created; a local path or a URI pyarrow writes).",
    )
    format: Literal["parquet"] = Field("parquet", description="File format (Parquet only).")
    max_file_mb: float = Field(
        64.0, gt=0.0, le=4096.0, description="Rows per file, at most (MiB, before compression)."
    )
    workers: ResourceRef = workers_field()


WriteExperiences = register_op(
    "WriteExperiences",
    category="replay",
    apply="for_each",
    inputs=["SampleBatch | MultiAgentBatch"],
    output="SampleBatch",
    infer_output=same_as_input,
    params=WriteExperiencesParams,
    resources=WORKERS_READ,
    builtin=True,
)


class MixInReplayParams(OpParams):
    """Mix replayed batches into an on-policy stream (RLlib 1.x ``MixInReplay``,
    ``rllib/execution/replay_ops.py``; IMPALA's ``replay_proportion`` and
    ``replay_buffer_num_slots``).

    A flat-map (use with ``.combine``, before ``ConcatBatches``): each incoming
    ``SampleBatch`` (``[B]`` rows, one rollout fragment) is first stored in a buffer of
    ``num_slots`` slots (filled in order, then each new batch overwrites the oldest), and
    then emitted as a list: the batch itself, followed by ``k`` batches drawn uniformly, with
    replacement, from the buffer (which holds the incoming batch too, as RLlib's). ``k`` is
    drawn as RLlib draws it, ``f = replay_proportion; while u < f: k += 1; f -= 1`` with
    ``u ~ U[0, 1)`` drawn afresh each time: ``floor(f)`` replays plus one more with
    probability ``f - floor(f)``, so ``E[k] = replay_proportion`` and ``replay_proportion
    = 1`` replays exactly one batch per input: the learner then trains twice the rows that
    were sampled. The draws come from the node's own generator (run seed and node id), saved
    with the buffer in checkpoints, so a resumed run replays what the uninterrupted one would.

    A replayed batch is a whole stored batch (every column, whole trajectory segments, the
    behaviour policy's ``action_logp`` as recorded when it was sampled) without its episode
    statistics (its episodes were counted when sampled). It is off-policy: only a learner
    that corrects for that (V-trace: IMPALA, APPO) should train on it. Adds the replayed env
    steps to counter ``num_env_steps_replayed``; ``num_env_steps_trained`` downstream then
    counts them too.
    """

    num_slots: int = Field(
        ge=1,
        le=MAX_QUEUE,
        description="Batches the replay buffer holds (the oldest is overwritten when full).",
    )
    replay_proportion: float = Field(
        ge=0.0,
        le=MAX_PASSES,
        description=(
            "Mean number of replayed batches emitted with each incoming batch (0: none; "
            "1: one, so twice the rows are trained)."
        ),
    )


MixInReplay = register_op(
    "MixInReplay",
    category="replay",
    apply="combine",
    inputs=["SampleBatch"],
    output="SampleBatch",
    params=MixInReplayParams,
    builtin=True,
)
