"""Parameter models of the resources a plan declares once and references as ``"@id"``.

Resources are not edges: a ``WorkerSet`` (the learner policy plus its rollout workers),
replay buffers (``ReplayBuffer`` in the driver, ``ReplayActors`` sharded over Ray actors)
and learner threads are shared state that operators read or write.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from plangraph.ir.plan import Resource
from plangraph.ops.algorithms import PolicyConfig
from plangraph.ops.registry import ResourceKind, register_resource_kind
from plangraph.ops.sizes import (
    MAX_ENVS_PER_WORKER,
    MAX_FRAGMENT,
    MAX_MEMORY_BYTES,
    MAX_PASSES,
    MAX_QUEUE,
    MAX_REPLAY_CAPACITY,
    MAX_RESTARTS,
    MAX_SHARDS,
    MAX_WORKERS,
)
from plangraph.ops.wrappers import WrapperSpec

EnvConfigValue = str | int | float | bool | None

PlacementStrategy = Literal["PACK", "SPREAD", "STRICT_SPREAD"]
"""How a placement group lays out its bundles over a Ray cluster's nodes (Ray's names):
``PACK`` as few nodes as possible, ``SPREAD`` as many as possible (best effort),
``STRICT_SPREAD`` every bundle on its own node (or the group is not placed)."""


class WorkerResources(BaseModel):
    """What Ray reserves for each remote rollout worker (an actor's ``num_cpus``,
    ``num_gpus``, ``memory`` and custom ``resources``); with a ``placement_strategy`` also
    the worker's bundle in the worker set's placement group."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    num_cpus: float = Field(
        0.0,
        ge=0.0,
        description=(
            "CPUs reserved per rollout worker (may be fractional; 0: none, so a small "
            "machine can schedule every worker beside the driver)."
        ),
    )
    num_gpus: float = Field(
        0.0, ge=0.0, description="GPUs reserved per rollout worker (workers sample on CPU)."
    )
    memory: int = Field(
        0,
        ge=0,
        le=MAX_MEMORY_BYTES,
        description="Memory reserved per rollout worker (bytes; 0: none reserved).",
    )
    resources: dict[str, float] = Field(
        default_factory=dict,
        description=(
            'Custom Ray resources per rollout worker, e.g. {"sim_license": 1}; a node offers '
            "them with `ray start --resources`."
        ),
    )

    def bundle(self) -> dict[str, float]:
        """The worker's Ray resource request (``{"CPU": 1.0, "GPU": 0.5, ...}``), zeros
        left out; ``{}`` when it reserves nothing."""
        out = {"CPU": self.num_cpus, "GPU": self.num_gpus, "memory": float(self.memory)}
        out.update(self.resources)
        return {k: float(v) for k, v in sorted(out.items()) if v > 0}


class LearnerResources(BaseModel):
    """Where the worker set's learner policy trains: in the driver, on ``device``."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description=(
            '"auto": CUDA when torch sees a GPU, else the CPU; "cpu"; "cuda" (an error '
            "when torch sees none). Batches are copied host-to-device from pinned memory; "
            "weights reach the rollout workers as CPU arrays (workers stay on the CPU)."
        ),
    )
    num_gpus: float = Field(
        0.0,
        ge=0.0,
        description=(
            "GPUs the learner counts against the machine or cluster in the capacity check "
            "(the driver is not a Ray actor, so Ray reserves nothing for it)."
        ),
    )


class WorkerSetParams(BaseModel):
    """A local learner policy plus ``num_workers`` remote rollout workers (Ray actors).

    Single-agent: ``env`` is a gymnasium env id and ``policy`` the one policy. Multi-agent:
    ``env`` is a registered multi-agent env name (``plangraph.rl.multi_agent_env``, e.g.
    ``MultiAgentCartPole``) built with ``env_config``, ``policies`` declares the policies
    by id (``{"ppo_policy": {"algo": "ppo", ...}, ...}``) and ``policy_mapping`` maps each
    agent id or glob pattern to one of them (``plangraph.ops.policy_mapping``); the
    rollouts are then ``MultiAgentBatch``es.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    env: str = Field("CartPole-v1", description="Gymnasium env id (overridden by --env).")
    num_workers: int = Field(
        2, ge=0, le=MAX_WORKERS, description="Remote rollout workers; 0 samples locally."
    )
    num_envs_per_worker: int = Field(
        8, ge=1, le=MAX_ENVS_PER_WORKER, description="Sub-envs in each worker's vector env."
    )
    rollout_fragment_length: Annotated[int, Field(ge=1, le=MAX_FRAGMENT)] | Literal["auto"] = Field(
        64,
        description=(
            'Env steps per sub-env in one sample() call; "auto": sized by the compiler so '
            "that one bulk-sync round (num_workers x num_envs_per_worker x this) is the "
            "train batch (pass rollout-sizing; 64 where it cannot)."
        ),
    )
    policy: PolicyConfig | None = Field(
        None, description="Algorithm and its hyperparameters (single-agent; else policies)."
    )
    policies: dict[str, PolicyConfig] | None = Field(
        None,
        description=(
            "Multi-agent: policy id -> algorithm and hyperparameters; the env is then a "
            "registered multi-agent env name."
        ),
    )
    policy_mapping: dict[str, str] = Field(
        default_factory=dict,
        description=(
            'Multi-agent: agent id or glob pattern ("agent_*") -> policy id; an exact id '
            "wins, else the pattern with the most literal characters."
        ),
    )
    env_config: dict[str, EnvConfigValue] = Field(
        default_factory=dict,
        description='Multi-agent: keyword arguments of the env creator ({"num_agents": 2}).',
    )
    wrappers: tuple[WrapperSpec, ...] = Field(
        (),
        description=(
            'Env preprocessing on the workers: [{"name": ..., "params": {...}}, ...], '
            "registered wrappers (plangraph.ops.wrappers) applied in order, the first "
            "innermost."
        ),
    )
    max_worker_restarts: int = Field(
        3,
        ge=0,
        le=MAX_RESTARTS,
        description=(
            "Replacements of one dead rollout worker allowed within worker_restart_window_s; "
            "its next death stops the run with WorkerRestartError (0: never replace)."
        ),
    )
    worker_restart_window_s: float = Field(
        300.0,
        gt=0.0,
        description="Sliding window in which a worker's replacements are counted (s).",
    )
    worker_restart_backoff_s: float = Field(
        1.0,
        ge=0.0,
        description=(
            "Wait before replacing a dead worker (s), doubled for each earlier replacement "
            "of that worker within the window (at most 60 s)."
        ),
    )
    worker_resources: WorkerResources = Field(
        default_factory=WorkerResources,
        description="What Ray reserves for each remote rollout worker (CPUs, GPUs, memory).",
    )
    placement_strategy: PlacementStrategy | None = Field(
        None,
        description=(
            "Place the rollout workers through a Ray placement group of one bundle per "
            "worker (worker_resources) with this strategy: PACK, SPREAD or STRICT_SPREAD; "
            "null: no placement group (Ray places each actor)."
        ),
    )
    learner: LearnerResources = Field(
        default_factory=LearnerResources,
        description="The learner's device and GPUs.",
    )

    @model_validator(mode="after")
    def _one_policy_table(self) -> WorkerSetParams:
        if (self.policy is None) == (self.policies is None):
            raise ValueError(
                "a WorkerSet declares either policy (single-agent) or policies (multi-agent), "
                "exactly one of them"
            )
        if self.policies is not None and not self.policies:
            raise ValueError("policies must declare at least one policy")
        if self.policies is None and (self.policy_mapping or self.env_config):
            raise ValueError(
                "policy_mapping and env_config are for multi-agent worker sets: declare "
                "policies, or remove them"
            )
        if self.policies is not None and not self.policy_mapping:
            raise ValueError(
                'a multi-agent WorkerSet needs a policy_mapping (e.g. {"*": "<policy id>"})'
            )
        return self

    @property
    def multi_agent(self) -> bool:
        """Whether this worker set samples a multi-agent env (``policies`` declared)."""
        return self.policies is not None


class ReplayBufferParams(BaseModel):
    """Experience replay; capacity in env steps, FIFO eviction."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    capacity: int = Field(
        50_000, ge=1, le=MAX_REPLAY_CAPACITY, description="Capacity in env steps (FIFO eviction)."
    )
    learning_starts: int = Field(
        1_000, ge=0, description="Readers yield nothing until this many env steps are stored."
    )
    prioritized: bool = Field(False, description="Prioritized replay (Schaul et al. 2016).")
    alpha: float = Field(0.6, gt=0.0, description="Priority exponent (PER).")
    beta: float = Field(0.4, ge=0.0, le=1.0, description="Initial IS-weight exponent (PER).")
    beta_final: float = Field(1.0, ge=0.0, le=1.0, description="Final IS-weight exponent.")
    beta_annealing_steps: int = Field(
        100_000, ge=0, description="Env steps sampled from the buffer over which beta anneals."
    )
    eps: float = Field(1e-6, gt=0.0, description="Added to |TD error| to form a priority.")
    item: Literal["transition", "sequence"] = Field(
        "transition",
        description=(
            "What one sampled item is: a transition (one stored row), or a sequence (R2D2, "
            "Kapturowski et al. 2019: the consecutive rows its writer's policy marked in "
            "column seq_len, each starting from the recurrent state stored with its first "
            "row; prioritized per sequence). Capacity and learning_starts stay in env steps; "
            "a reader's batch_size counts sequences."
        ),
    )


class ReplayActorsParams(ReplayBufferParams):
    """Distributed experience replay (Ape-X, Horgan et al. 2018): ``num_shards`` Ray actors,
    each holding one shard, a (prioritized) replay buffer with FIFO eviction.

    ``capacity``, ``learning_starts`` and ``beta_annealing_steps`` are totals over all
    shards, in env steps; each shard gets an equal share (``shard_split``: the first
    ``total % num_shards`` shards one env step more), as RLlib's ``ReplayActor`` divides
    them. ``StoreToReplay`` sends each rollout batch to one shard; ``ParallelReplay``
    samples a shard once it holds its share of ``learning_starts``; ``UpdatePriorities``
    sends TD-error priorities back to the shard and slot they were sampled from. A shard
    whose actor dies is reported (plan node, shard, Ray node) and, within
    ``max_shard_restarts``, replaced by an empty one while the run goes on.

    ``training_intensity`` fixes the replay ratio, so that a run learns the same on a fast
    and a loaded machine: after ``learning_starts`` env steps are stored, replay keeps
    ``replayed = training_intensity * (stored - learning_starts)`` (env steps), give or
    take the requests in flight, in both directions: ParallelReplay waits while replay is
    ahead, StoreToReplay (and so sampling) while it is behind.
    """

    capacity: int = Field(
        50_000,
        ge=1,
        le=MAX_REPLAY_CAPACITY,
        description="Capacity in env steps over all shards (FIFO per shard).",
    )
    learning_starts: int = Field(
        1_000,
        ge=0,
        description=(
            "Env steps stored over all shards before replay; a shard is sampled once it "
            "holds its share."
        ),
    )
    beta_annealing_steps: int = Field(
        100_000,
        ge=0,
        description="Env steps sampled over all shards over which beta anneals (per-shard share).",
    )
    num_shards: int = Field(
        4, ge=1, le=MAX_SHARDS, description="Replay actors, one buffer shard each."
    )
    max_shard_restarts: int = Field(
        0,
        ge=0,
        le=MAX_RESTARTS,
        description=(
            "Replacements (empty) of one dead shard allowed within shard_restart_window_s; "
            "0: a dead shard stops the run with an error naming it."
        ),
    )
    shard_restart_window_s: float = Field(
        300.0, gt=0.0, description="Sliding window in which a shard's replacements count (s)."
    )
    training_intensity: float | None = Field(
        None,
        gt=0.0,
        description=(
            "Env steps replayed per env step stored past learning_starts (RLlib's "
            "training_intensity; Reverb's samples-per-insert rate limiter). While replay "
            "is ahead of it, ParallelReplay asks the shards for no more batches; while "
            "replay is behind, StoreToReplay holds the next rollout batch, so the rollout "
            "workers wait for the learner. A restored run whose checkpoint had another "
            "value applies the new one from the restore on. None (null in JSON and "
            "--set): no bound; the learner trains as fast as it can while the workers "
            "sample as fast as they can."
        ),
    )

    @model_validator(mode="after")
    def _a_row_per_shard(self) -> ReplayActorsParams:
        if self.capacity < self.num_shards:
            raise ValueError(
                f"capacity {self.capacity} env steps cannot be split over num_shards="
                f"{self.num_shards} shards (at least one env step each); raise capacity or "
                "lower num_shards"
            )
        return self


class OfflineDataParams(BaseModel):
    """A recorded dataset of experience (``plangraph.rl.offline``'s schema; user page
    ``docs/offline.md``), read through Ray Data by ``ReadExperiences``.

    ``path`` is a folder of Parquet files (every ``*.parquet`` below it; hidden names
    skipped), one file, or a URI Ray Data and pyarrow read (``s3://bucket/run``). Before
    any actor starts, only the files' footers are read: a missing or empty dataset, a file
    that is not Parquet, or columns that do not fit the env (a missing column, a dtype or
    shape its spaces do not allow) stop the build with a message naming the column.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    path: str = Field(min_length=1, description="Dataset folder, file or URI.")
    format: Literal["parquet"] = Field("parquet", description="File format (Parquet only).")
    shuffle_buffer_size: int = Field(
        10_000,
        ge=0,
        description=(
            "Rows in the shuffle buffer each reader draws batches from (0: no shuffling; "
            "else the file order is shuffled each epoch too)."
        ),
    )
    num_readers: int = Field(
        1,
        ge=1,
        le=64,
        description=(
            "Reader actors the dataset is split over (Ray Data streaming_split); 1: the "
            "driver pulls the stream itself."
        ),
    )
    read_concurrency: int = Field(
        2, ge=1, le=256, description="Ray Data read tasks running at once, at most."
    )


def shard_split(total: int, num_shards: int) -> list[int]:
    """``total`` env steps split over ``num_shards`` shards as evenly as possible (the first
    ``total % num_shards`` shards hold one more): ``shard_split(10, 4) == [3, 3, 2, 2]``."""
    base, extra = divmod(int(total), int(num_shards))
    return [base + (1 if k < extra else 0) for k in range(num_shards)]


class LearnerThreadParams(BaseModel):
    """A learner thread in the driver (IMPALA/APPO): trains the worker set's learner policy
    on batches from a bounded in-queue while the driver keeps sampling; ``Enqueue`` feeds
    it, ``Dequeue`` reads one ``TrainInfo`` per trained batch from its out-queue."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    workers: str = Field(
        "@workers",
        pattern=r"^@[A-Za-z_][A-Za-z0-9_.\-]*$",
        description='The WorkerSet whose learner policy this thread trains, "@id".',
    )
    inqueue_size: int = Field(
        16,
        ge=1,
        le=MAX_QUEUE,
        description="Train batches waiting for the learner, at most (back-pressure).",
    )
    outqueue_size: int = Field(
        16, ge=1, le=MAX_QUEUE, description="Train results waiting for the driver, at most."
    )
    num_sgd_iter: int = Field(
        1, ge=1, le=MAX_PASSES, description="Passes (optimizer steps) over each batch."
    )
    minibatch_buffer_size: int = Field(
        1,
        ge=1,
        le=MAX_QUEUE,
        description="Batches whose passes are interleaved (RLlib MinibatchBuffer).",
    )


def _resource_params(params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, BaseModel):  # e.g. a PolicyConfig instance
            v = v.model_dump(mode="json", exclude_unset=True) | {
                f: getattr(v, f) for f in ("algo",) if hasattr(v, f)
            }
        out[k] = v
    return out


def worker_set(**params: Any) -> Resource:
    """A ``WorkerSet`` resource (params: :class:`WorkerSetParams`; ``"${key}"`` allowed)."""
    return Resource(kind="WorkerSet", params=_resource_params(params))


def replay_buffer(**params: Any) -> Resource:
    """A ``ReplayBuffer`` resource (params: :class:`ReplayBufferParams`)."""
    return Resource(kind="ReplayBuffer", params=_resource_params(params))


def replay_actors(**params: Any) -> Resource:
    """A ``ReplayActors`` resource (params: :class:`ReplayActorsParams`)."""
    return Resource(kind="ReplayActors", params=_resource_params(params))


def offline_data(**params: Any) -> Resource:
    """An ``OfflineData`` resource (params: :class:`OfflineDataParams`)."""
    return Resource(kind="OfflineData", params=_resource_params(params))


def learner_thread(**params: Any) -> Resource:
    """A ``LearnerThread`` resource (params: :class:`LearnerThreadParams`)."""
    return Resource(kind="LearnerThread", params=_resource_params(params))


def _worker_set_notes(params: WorkerSetParams) -> list[str]:
    """What the worker set's algorithm says about it (``AlgorithmConfig.worker_set_notes``,
    e.g. DQN's per-worker exploration)."""
    if params.policy is None:
        return []
    notes = params.policy.worker_set_notes(max(1, params.num_workers))
    model = params.policy.model
    if model is not None and model.recurrent and params.policy.replay_item != "sequence":
        size = model.state_size()
        state = "" if size is None else f" ({size} float32 per sub-env, stored with every row)"
        notes.append(
            f"recurrent model {model.type!r}: each rollout worker carries the state of its "
            f"{params.num_envs_per_worker} sub-envs{state}, reset where a sub-env's episode "
            f"ends; the learner trains on whole sequences of at most "
            f"{model.sequence_length()} env steps (docs/recurrent.md)"
        )
    return notes


def _replay_item_notes(params: ReplayBufferParams) -> list[str]:
    """What one sampled item is, for a resource of sequences (R2D2)."""
    if params.item != "sequence":
        return []
    how = "prioritized per sequence" if params.prioritized else "uniform over sequences"
    return [
        "items: sequences (R2D2), each from the state stored at its first row; "
        f"{how}; capacity and learning_starts in env steps, a reader's batch_size in "
        "sequences"
    ]


def _replay_actors_notes(params: ReplayActorsParams) -> list[str]:
    """The shards of a ``ReplayActors`` resource: sizes and readiness per shard."""
    n = params.num_shards
    caps = shard_split(params.capacity, n)
    starts = shard_split(params.learning_starts, n)

    def span(xs: list[int]) -> str:
        return f"{xs[0]:,}" if min(xs) == max(xs) else f"{min(xs):,}-{max(xs):,}"

    kind = (
        f"prioritized (alpha {params.alpha:g}, beta {params.beta:g} -> {params.beta_final:g})"
        if params.prioritized
        else "uniform"
    )
    dead = (
        f"replaced (empty) up to {params.max_shard_restarts} times per shard within "
        f"{params.shard_restart_window_s:g} s"
        if params.max_shard_restarts
        else "stops the run"
    )
    ratio = (
        [
            f"  replay ratio: {params.training_intensity:g} env steps replayed per env step "
            "stored past learning_starts",
            "    (replay waits when ahead, StoreToReplay when behind)",
        ]
        if params.training_intensity is not None
        else ["  replay ratio: not bound (the learner's and the workers' speeds set it)"]
    )
    return [
        *_replay_item_notes(params),
        f"shards: {n} Ray actor{'s' if n != 1 else ''}, {kind}, FIFO",
        f"  per shard: {span(caps)} env steps, sampled once holding {span(starts)}",
        f"  a dead shard {dead}",
        *ratio,
    ]


register_resource_kind(
    ResourceKind(
        "WorkerSet",
        WorkerSetParams,
        doc=(WorkerSetParams.__doc__ or "").strip(),
        notes=_worker_set_notes,
    )
)
register_resource_kind(
    ResourceKind(
        "LearnerThread",
        LearnerThreadParams,
        doc=(LearnerThreadParams.__doc__ or "").strip(),
    )
)
register_resource_kind(
    ResourceKind(
        "ReplayBuffer",
        ReplayBufferParams,
        doc=(ReplayBufferParams.__doc__ or "").strip(),
        needs_writer_and_reader=True,
        notes=_replay_item_notes,
    )
)
register_resource_kind(
    ResourceKind(
        "ReplayActors",
        ReplayActorsParams,
        doc=(ReplayActorsParams.__doc__ or "").strip(),
        needs_writer_and_reader=True,
        notes=_replay_actors_notes,
    )
)
register_resource_kind(
    ResourceKind(
        "OfflineData",
        OfflineDataParams,
        doc=(OfflineDataParams.__doc__ or "").strip(),
    )
)
