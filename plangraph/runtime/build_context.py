"""What a lowering is given: the built resources of one plan and the run's state.

Resources (worker sets, replay buffers) are created once per plan and looked up by
resource id (``"@workers"`` -> ``ctx.worker_sets["workers"]``). Counters, iteration, time
and the episode window are not kept here: they live in ``ctx.run_state``
(``plangraph.runtime.run_state.RunState``), the one object the run owns.

Stateful operators. An operator whose implementation keeps state between items (the
batches ``ConcatBatches`` has not emitted yet, where a ``Concurrently`` is in its rotation)
registers it while it is lowered: ``ctx.register_operator_state(node.id, get_state,
set_state)``. ``get_state()`` returns a plain data tree; checkpoints hold them as
``{"operators": {node_id: state}}`` and a restore hands each back to the operator of the same
node id (before the restored dataflow's first pull). Counters an operator keeps in the run's
metrics (``TrainOneStep``'s update count, ``UpdateTarget``'s last update) need no hook, nor
does ``StandardMetricsReporting``: it marks an iteration's start when the driver asks for
the next result, which a restored dataflow does on its first pull just as a running one
does after each result. Not checkpointed (empty whenever a result is returned in the
built-in plans, where every item reaching the sink has just passed through them): the
partial list of ``Batch`` and the fan-out queues of ``duplicate``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import operator
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from pydantic import BaseModel

from plangraph.errors import BuildError, WaitTimeoutError
from plangraph.ops.env_extras import EnvDependencyError, missing_dependency, register_env_namespace
from plangraph.ops.resources import (
    OfflineDataParams,
    ReplayActorsParams,
    ReplayBufferParams,
    WorkerSetParams,
)
from plangraph.ops.wrappers import wrapped_env
from plangraph.runtime.run_state import RunState

if TYPE_CHECKING:
    from plangraph.compiler import CompiledPlan


def resource_id(ref: str) -> str:
    """``"@replay"`` -> ``"replay"`` (the compiler has already checked the reference)."""
    return ref[1:] if ref.startswith("@") else ref


def _resized(res: Any, updates: dict[str, Any]) -> dict[str, Any]:
    """``updates`` for worker set ``res``, plus its fragment length sized again when pass
    rollout-sizing sized it (``res.sized_for``) and ``num_workers`` is overridden: the
    round must still be the train batch."""
    if res.sized_for is None or "num_workers" not in updates:
        return updates
    from plangraph.compiler.passes.rollout_sizing import fragment_for

    frag = fragment_for(res.sized_for, updates["num_workers"], res.params.num_envs_per_worker)
    return {**updates, "rollout_fragment_length": frag}


_ParamsT = TypeVar("_ParamsT", bound=BaseModel)


def _params_as(rid: str, params: BaseModel | None, model: type[_ParamsT]) -> _ParamsT:
    """Resource ``rid``'s validated ``params`` as ``model``, the params model of its kind.

    Raises:
        BuildError: they are not (invalid params, None: a plan the compiler refused).
    """
    if not isinstance(params, model):
        raise BuildError(
            f"resource {rid!r}: expected validated {model.__name__} params, got "
            f"{type(params).__name__}; build a plan that compiles without errors"
        )
    return params


def _with_overrides(rid: str, params: _ParamsT, updates: dict[str, Any]) -> _ParamsT:
    """``params`` with ``build()``'s overrides, validated like the plan's own values."""
    import pydantic

    try:
        return type(params).model_validate({**params.model_dump(), **updates})
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise BuildError(f"resource {rid!r}: invalid override ({problems})") from exc


def resolve_worker_env(rid: str, env: Any) -> Any:
    """The creator of worker set ``rid``'s env (``plangraph.rl.envs.resolve_env``), resolved
    here in the driver, where the plan file and ``--import`` modules registered it, so that
    it travels to every rollout worker.

    Raises:
        BuildError: the env's module cannot be imported, or the id is not registered (the
            message names close ids and how a custom env is registered).
    """
    import gymnasium

    from plangraph.rl.envs import resolve_env

    module = env.rpartition(":")[0] if isinstance(env, str) else ""
    try:
        if isinstance(env, str):
            register_env_namespace(env.rpartition(":")[2])  # ALE/...: ale_py registers it
        return resolve_env(env)
    except EnvDependencyError as exc:
        raise BuildError(f"resource {rid!r} (/resources/{rid}/params/env): {exc}") from exc
    except (ImportError, gymnasium.error.Error) as exc:
        # A module the env needs is missing (an optional extra: mujoco, ale_py): say which
        # and how to install it, rather than that the env is unknown.
        missing = missing_dependency(str(env).rpartition(":")[2], exc)
        if missing is not None:
            raise BuildError(f"resource {rid!r} (/resources/{rid}/params/env): {missing}") from exc
        if isinstance(exc, ImportError):
            where = f"module {module!r}" if module else "its entry point"
            raise BuildError(
                f"resource {rid!r}: env {env!r}: cannot import {where} ({exc}); it must be "
                "importable here (the driver), from where it travels to the rollout workers"
            ) from exc
        raise BuildError(
            f"resource {rid!r}: env {env!r} is not a registered gymnasium env: {exc} (pass "
            "--env with an id from gymnasium.registry; a custom env is registered with "
            "gymnasium.register(...) in the Python plan file or in a module named with "
            "--import MODULE)"
        ) from exc


def _resolve_multi_agent_env(rid: str, env: Any) -> Any:
    """The creator of multi-agent worker set ``rid``'s env: a registered name resolved
    here in the driver (``plangraph.rl.multi_agent_env``), or a creator as given.

    Raises:
        BuildError: the name is not registered (close names listed).
    """
    if callable(env):
        return env
    from plangraph.rl.multi_agent_env import resolve_multi_agent_env

    try:
        return resolve_multi_agent_env(env)
    except KeyError as exc:
        raise BuildError(f"resource {rid!r}: {exc.args[0]}") from exc


def _check_creatable(rid: str, params: WorkerSetParams) -> None:
    """Refuse a registered env that cannot be created here (a missing optional extra:
    ``HalfCheetah-v5`` without ``mujoco``), naming what to install, before any actor
    starts. The compiler's space reading caches the envs it created, so only an env it
    could not create is made again here."""
    from plangraph.compiler.env_spaces import env_spaces
    from plangraph.rl.wrappers import make_env

    if ":" in params.env or env_spaces(params.env, params.wrappers) is not None:
        return
    try:
        env = wrapped_env(make_env(params.env), params.wrappers)
    except Exception as exc:
        missing = missing_dependency(params.env, exc)
        what = missing or f"env {params.env!r} cannot be created: {type(exc).__name__}: {exc}"
        raise BuildError(f"resource {rid!r} (/resources/{rid}/params/env): {what}") from exc
    env.close()


def _check_spaces(rid: str, params: WorkerSetParams) -> None:
    """Refuse an env (given with ``--env``) whose spaces the policy cannot act in, with
    the compiler's PG183/PG184 message (single-agent worker sets: one policy)."""
    from plangraph.compiler.env_spaces import env_spaces
    from plangraph.compiler.semantic_checks import space_problems

    if params.policy is None:
        return
    spaces = env_spaces(params.env, params.wrappers)
    if spaces is None:
        return
    problems = space_problems(params.policy, spaces, "the plan's policy algo")
    if problems:
        p = problems[0]
        raise BuildError(f"resource {rid!r}: {p.code}: {p.message} ({p.hint})")


def _check_datasets(
    compiled: CompiledPlan,
    params: dict[str, Any],
    worker_set_params: dict[str, WorkerSetParams],
    envs: dict[str, Any],
) -> dict[str, Any]:
    """Read every ``OfflineData`` resource's footers and check its columns against the env
    and learner of each ``ReadExperiences`` node reading it (before Ray starts).

    Returns:
        ``DatasetInfo`` by resource id.

    Raises:
        BuildError: the dataset is missing, empty or unreadable, or a column does not fit
            (names the node, the resource's JSON path and the column).
    """
    from plangraph.runtime.dataset_check import check_datasets

    def needed(policy: Any) -> list[str]:
        from plangraph.rl.offline import DERIVED_COLUMNS
        from plangraph.rl.policies import policy_class

        learner = policy_class(policy)
        # Every column the learner's loss reads, but those ReadExperiences adds itself
        # (returns) and those it may lack (PPO's advantages: a dataset has none, so an
        # on-policy learner is refused here rather than at its first train step).
        return [
            c
            for c in learner.loss_columns
            if c not in learner.optional_loss_columns and c not in DERIVED_COLUMNS
        ]

    offline = {
        rid: _params_as(rid, params[rid], OfflineDataParams)
        for rid, res in compiled.resources.items()
        if res.kind == "OfflineData"
    }
    infos, problems = check_datasets(
        compiled,
        offline,
        {rid: p for rid, p in worker_set_params.items() if rid in envs},
        lambda rid: _driver_spaces(rid, worker_set_params[rid].env, envs[rid]),
        needed,
    )
    if problems:
        raise BuildError("\n".join(p.error_text() for p in problems))
    return infos


def _driver_spaces(rid: str, name: Any, env: Any) -> tuple[Any, Any]:
    """``(observation space, action space)`` of one sub-env of worker set ``rid``, read
    from an env made (and closed) in this process, as the workers will make it (``env``:
    the resolved creator, wrappers included; ``name``: what the plan calls it).

    Raises:
        BuildError: the env cannot be created in this process.
    """
    from plangraph.rl.row_layout import env_spaces

    try:
        return env_spaces(env)
    except Exception as exc:
        raise BuildError(
            f"resource {rid!r}: env {name!r} could not be created ({type(exc).__name__}: {exc})"
        ) from exc


@dataclass(frozen=True)
class OperatorState:
    """The checkpoint hooks of one stateful operator (``register_operator_state``):
    ``get_state() -> data tree`` and ``set_state(data tree)``."""

    get_state: Callable[[], dict[str, Any]]
    set_state: Callable[[dict[str, Any]], None]


def _check_worker_counts(params: dict[str, Any], cpus: int, where: str) -> None:
    """Refuse a worker set with more remote workers than ``max_workers(cpus)``."""
    from plangraph.compiler.capacity import MAX_WORKERS_PER_CPU
    from plangraph.runtime.ray_session import max_workers

    bound = max_workers(cpus)
    for rid, p in sorted(params.items()):
        n = getattr(p, "num_workers", None)
        if isinstance(n, int) and n > bound:
            raise BuildError(
                f"resource {rid!r}: num_workers={n} is more than {where} can run: at most "
                f"{bound} ({MAX_WORKERS_PER_CPU} per CPU x {cpus} CPUs); pass a smaller "
                "--num-workers"
            )


def _ray_is_up() -> bool:
    """Whether this process is connected to Ray (without importing it when it is not:
    then it cannot be)."""
    import sys

    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


@dataclass(frozen=True)
class Preflight:
    """What :meth:`BuildContext.preflight` checked and resolved: the run ``seed``, each
    worker set's params with the overrides (``worker_sets``), every resource's validated
    params (``params``), the multi-agent worker sets (``multi_agent``) and each worker
    set's env creator (``envs``) and the offline datasets' checked footers
    (``datasets``, ``plangraph.rl.offline.DatasetInfo``), by resource id."""

    seed: int
    worker_sets: dict[str, WorkerSetParams]
    params: dict[str, BaseModel | None]
    multi_agent: set[str]
    envs: dict[str, Any]
    datasets: dict[str, Any]


@dataclass
class BuildContext:
    """The built plan every lowering shares: compiled plan, run seed, resources by id
    (``worker_sets``, ``buffers``), ``run_state`` (the run's counters and iteration) and
    ``operator_states`` (the checkpoint hooks of stateful operators, by node id)."""

    compiled: CompiledPlan
    seed: int
    worker_sets: dict[str, Any]
    buffers: dict[str, Any]
    run_state: RunState
    learners: dict[str, Any] = field(default_factory=dict)
    """Learner threads by resource id (``plangraph.runtime.learner_thread.LearnerThread``)."""
    replay_actors: dict[str, Any] = field(default_factory=dict)
    """Sharded replay by resource id (``plangraph.rl.replay_actors.ReplayActorSet``)."""
    policy_locks: dict[str, threading.RLock] = field(default_factory=dict)
    """One lock per worker set, held by whoever touches its learner policy: a learner
    thread while it trains, driver operators while they read weights or sync a target."""
    operator_states: dict[str, OperatorState] = field(default_factory=dict)
    stages: dict[str, str] = field(default_factory=dict)
    """Node id -> the flow stage its work runs in, as lowered: its own id, a fused stage's
    name (``"train+target"``, pass ``map-fusion``) or ``"<source>@workers"`` for a node
    the rollout workers run (pass ``worker-side-maps``)."""
    worker_maps: dict[str, tuple[tuple[str, Callable[[Any], Any]], ...]] = field(
        default_factory=dict
    )
    """Rollout source node id -> ``(node id, item function)`` of the maps its rollout
    workers apply to each fragment, in order (filled by the lowering)."""
    resource_params: dict[str, Any] = field(default_factory=dict)
    """The validated params of every resource as built (``build()``'s env id and
    ``num_workers`` applied to the worker sets), by resource id."""
    unsaved_states: dict[str, str] = field(default_factory=dict)
    """Node id -> what state its operator keeps without checkpoint hooks (a user
    operator's RNG or buffers, see ``plangraph.runtime.implementations``): a checkpoint
    warns (``ResumeWarning``) for each, as for sub-envs that cannot be captured."""
    rng_nodes: set[str] = field(default_factory=set)
    """Nodes that took their per-node RNG (:meth:`node_rng`) in this dataflow."""
    datasets: dict[str, Any] = field(default_factory=dict)
    """Offline datasets by resource id (``plangraph.rl.offline.DatasetInfo``: the footers
    read and checked before launch)."""
    record_dir: str | None = None
    """``plangraph run --record DIR``: every rollout source's batches are recorded there."""
    closers: list[Callable[[], None]] = field(default_factory=list)
    """Called by ``stop()`` in order (an experience writer's last file)."""

    @classmethod
    def preflight(
        cls,
        compiled: CompiledPlan,
        *,
        env: str | Callable[..., Any] | None,
        num_workers: int | None,
        seed: int,
        address: str | None = None,
    ) -> Preflight:
        """Every check :meth:`create` makes before Ray starts, without starting it: the
        seed, the overrides, each env (resolved, creatable, its spaces against the policy),
        the driver's replay memory and, unless joining a cluster (``address``), the number
        of remote workers against this machine's CPUs. ``plangraph tune`` runs it for every
        trial's plan before Ray Tune starts.

        Raises:
            BuildError: as :meth:`create` does before Ray starts.
        """
        from plangraph.runtime.memory_check import (
            available_memory_bytes,
            check_replay_actor_memory,
            check_replay_memory,
        )
        from plangraph.runtime.ray_session import cluster_cpus, local_cpus

        try:
            seed_ok = not isinstance(seed, bool) and 0 <= operator.index(seed) < 2**63
        except TypeError:
            seed_ok = False
        if not seed_ok:
            raise BuildError(f"seed {seed!r}: the run seed must be an integer in [0, 2**63 - 1]")
        seed = operator.index(seed)
        updates: dict[str, Any] = {}
        if isinstance(env, str):
            updates["env"] = env
        elif env is not None and not callable(env):
            raise BuildError(
                f"env {env!r}: pass a gymnasium env id or a callable that returns a gym.Env"
            )
        if num_workers is not None:
            updates["num_workers"] = num_workers
        # Every override is checked before Ray starts or any actor is created.
        worker_set_params = {
            rid: _with_overrides(
                rid, _params_as(rid, res.params, WorkerSetParams), _resized(res, updates)
            )
            for rid, res in compiled.resources.items()
            if res.kind == "WorkerSet"
        }
        params: dict[str, BaseModel | None] = {
            rid: worker_set_params[rid] if res.kind == "WorkerSet" else res.params
            for rid, res in compiled.resources.items()
        }
        # Each worker set's env, resolved here so that it travels to the workers (a
        # callable passed to build() replaces the plan's env id).
        # Multi-agent worker sets resolve their registered env name themselves
        # (plangraph.rl.multi_agent_env); they have no gymnasium spaces to warm up.
        multi = {rid for rid, p in worker_set_params.items() if p.multi_agent}
        from plangraph.rl.wrappers import with_wrappers

        envs = {
            rid: with_wrappers(resolve_worker_env(rid, env if callable(env) else p.env), p.wrappers)
            for rid, p in worker_set_params.items()
            if rid not in multi
        }
        for rid in sorted(multi):
            envs[rid] = _resolve_multi_agent_env(
                rid, env if env is not None else worker_set_params[rid].env
            )
        if not callable(env):  # a registered env that cannot be made here: say what to install
            for rid in sorted(set(envs) - multi):
                if isinstance(worker_set_params[rid].env, str):
                    _check_creatable(rid, worker_set_params[rid])
        if isinstance(env, str):  # the plan's own env was checked by the compiler
            for rid in envs:
                if rid not in multi:
                    _check_spaces(rid, worker_set_params[rid])
        # A buffer that can never fill is refused now, not after the workers started.
        check_replay_memory(compiled, params, envs=envs)
        # Offline datasets: footers read and checked against their readers' envs now.
        datasets = _check_datasets(compiled, params, worker_set_params, envs)
        # Bound the worker count by the CPUs Ray will have: before Ray starts when it is
        # started here; a cluster's CPUs are only known once joined.
        if _ray_is_up():
            _check_worker_counts(params, cluster_cpus(), "the Ray cluster")
        elif not address:
            _check_worker_counts(params, local_cpus(), "this machine")
            # Ray started here offers at most the memory available now: replay actors
            # that exceed it are refused before it starts (create checks Ray's figure).
            available = available_memory_bytes()
            if available is not None:
                check_replay_actor_memory(
                    compiled, params, available, envs=envs, where="this machine has available"
                )
        return Preflight(seed, worker_set_params, params, multi, envs, datasets)

    @classmethod
    def create(
        cls,
        compiled: CompiledPlan,
        *,
        env: str | Callable[..., Any] | None,
        num_workers: int | None,
        seed: int,
        address: str | None = None,
        run_state: RunState | None = None,
        record_dir: str | None = None,
    ) -> BuildContext:
        """Start the plan's worker sets and create its replay buffers (``env``, an env id
        or a creator callable, and ``num_workers`` override every ``WorkerSet``);
        ``run_state`` defaults to a fresh ``RunState.for_plan(compiled)``; ``record_dir``
        (``plangraph run --record``): every rollout source's batches are recorded there.

        Raises:
            BuildError: the seed is not an integer in [0, 2**63 - 1], an override is
                invalid, the env id is unknown, the replay buffers cannot fit in the
                available memory (replay actors: in the memory Ray reports, once Ray
                is up; a located PG185 diagnostic), or a worker set asks for more than
                ``MAX_WORKERS_PER_CPU`` (4) remote workers per CPU (all before Ray starts),
                or ``address`` is unreachable (within seconds); with ``address``, the
                worker bound is checked against the cluster's CPUs once joined.
        """

        from plangraph.rl import make_replay_buffer
        from plangraph.runtime.memory_check import check_replay_actor_memory
        from plangraph.runtime.ray_session import cluster_cpus, ensure_ray

        checked = cls.preflight(
            compiled, env=env, num_workers=num_workers, seed=seed, address=address
        )
        seed, worker_set_params, params = checked.seed, checked.worker_sets, checked.params
        multi, envs, datasets = checked.multi_agent, checked.envs, checked.datasets
        ensure_ray(address)
        if address:
            _check_worker_counts(params, cluster_cpus(), f"the cluster at {address}")
        from plangraph.rl import WorkerSet

        # Replay actors live wherever Ray places them: checked against Ray's memory.
        shard_memory = {
            e.resource: e.shard_nbytes
            for e in check_replay_actor_memory(compiled, params, envs=envs)
        }
        worker_sets: dict[str, Any] = {}
        buffers: dict[str, Any] = {}
        shard_sets: dict[str, Any] = {}
        # Each resource gets its own seed stream derived from the run seed.
        seeds = np.random.SeedSequence(seed).spawn(max(1, len(compiled.resources)))
        for (rid, res), ss in zip(sorted(compiled.resources.items()), seeds, strict=False):
            res_seed = int(ss.generate_state(1)[0])
            if res.kind == "WorkerSet" and rid in multi:
                from plangraph.rl.multi_agent_worker_set import MultiAgentWorkerSet

                worker_sets[rid] = MultiAgentWorkerSet.from_params(
                    worker_set_params[rid], seed=res_seed, env=envs[rid], name=rid
                )
            elif res.kind == "WorkerSet":
                p = worker_set_params[rid]
                # The actors are created first; this process reads the spaces and builds
                # the learner while they start (a cluster's workers may have an env that
                # this process cannot make: there the first worker is asked).
                worker_sets[rid] = WorkerSet.from_params(
                    p,
                    seed=res_seed,
                    env=envs[rid],
                    name=rid,
                    spaces=None
                    if address
                    else functools.partial(_driver_spaces, rid, p.env, envs[rid]),
                )
            elif res.kind == "ReplayBuffer":
                buffers[rid] = make_replay_buffer(
                    _params_as(rid, params[rid], ReplayBufferParams), seed=res_seed
                )
            elif res.kind == "ReplayActors":
                from plangraph.rl.replay_actors import ReplayActorSet

                shard_sets[rid] = ReplayActorSet(
                    _params_as(rid, params[rid], ReplayActorsParams),
                    seed=res_seed,
                    name=rid,
                    shard_memory=shard_memory.get(rid),
                )
            elif res.kind in ("LearnerThread", "OfflineData"):
                pass  # a learner thread: built below; a dataset: read by its readers
            else:
                raise NotImplementedError(
                    f"resource {rid!r}: no runtime implementation for kind {res.kind!r}"
                )
        ctx = cls(
            compiled=compiled,
            seed=seed,
            worker_sets=worker_sets,
            buffers=buffers,
            run_state=run_state if run_state is not None else RunState.for_plan(compiled),
            policy_locks={rid: threading.RLock() for rid in worker_sets},
            resource_params=params,
            replay_actors=shard_sets,
            datasets=datasets,
            record_dir=record_dir,
        )
        for rid, res in sorted(compiled.resources.items()):
            if res.kind == "LearnerThread":
                ctx.learners[rid] = ctx._learner_thread(rid, params[rid])
        return ctx

    def _learner_thread(self, rid: str, params: Any) -> Any:
        from plangraph.runtime.learner_thread import LearnerThread

        ws_id = resource_id(params.workers)
        if ws_id not in self.worker_sets:
            self.stop()
            raise BuildError(
                f"resource {rid!r}: workers {params.workers!r} names no WorkerSet resource "
                f"(worker sets: {', '.join(sorted(self.worker_sets)) or 'none'})"
            )
        return LearnerThread(
            self.worker_sets[ws_id].local_policy,
            name=rid,
            inqueue_size=params.inqueue_size,
            outqueue_size=params.outqueue_size,
            num_sgd_iter=params.num_sgd_iter,
            minibatch_buffer_size=params.minibatch_buffer_size,
            global_vars=self.run_state.global_vars,
            lock=self.policy_locks[ws_id],
            workers=ws_id,
        )

    def learner(self, ref: str) -> Any:
        """The (started) learner thread ``ref`` names."""
        thread = self.learners[resource_id(ref)]
        thread.start()
        return thread

    def policy_lock(self, ref: str) -> threading.RLock:
        """The lock of worker set ``ref``'s learner policy (see :attr:`policy_locks`)."""
        return self.policy_locks[resource_id(ref)]

    def worker_set(self, ref: str) -> Any:
        return self.worker_sets[resource_id(ref)]

    def buffer(self, ref: str) -> Any:
        return self.buffers[resource_id(ref)]

    def replay_actor_set(self, ref: str) -> Any:
        """The ``ReplayActorSet`` of the ``ReplayActors`` resource ``ref`` names."""
        return self.replay_actors[resource_id(ref)]

    # -- what an operator is given -----------------------------------------------------

    def node_rng(self, node_id: str) -> np.random.Generator:
        """A fresh ``numpy`` generator for node ``node_id``, seeded from the run seed and
        the node id (the same stream in every run of the same seed; independent of every
        other node's and of the resources' seeds). An RNG is state: a node that takes one
        saves it with :meth:`register_operator_state` (``rng.bit_generator.state`` is plain
        data), or a checkpoint warns (``ResumeWarning``) that a resumed run will differ."""
        self.rng_nodes.add(node_id)
        digest = hashlib.sha256(node_id.encode("utf-8", "surrogatepass")).digest()
        # spawn_key keeps the node streams apart from SeedSequence(seed).spawn(n), which the
        # resources use (their keys are (0,), (1,), ...; a node's is two words long).
        key = (int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:8], "little"))
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=key))

    def record_sampled(
        self,
        env_steps: int,
        episode_returns: Any = (),
        episode_lengths: Any = (),
    ) -> None:
        """Count samples as the built-in sources do: ``env_steps`` (every sub-env step
        once) added to ``num_env_steps_sampled``, and the episodes completed in them
        (``episode_returns`` float ``[E]``, ``episode_lengths`` int ``[E]`` env steps) added
        to the run's episode window (``episode_return_mean``, ``episodes_total``). A source
        operator calls it for each item it emits; ``record_batch`` takes a ``SampleBatch``.

        Raises:
            ValueError: ``env_steps`` is not an integer >= 0, or returns and lengths are
                not 1-D of the same size.
        """
        from plangraph.runtime.counters import SAMPLED

        if isinstance(env_steps, bool) or not isinstance(env_steps, int | np.integer):
            raise ValueError(f"env_steps={env_steps!r}: must be an integer >= 0")
        if env_steps < 0:
            raise ValueError(f"env_steps={env_steps!r}: must be an integer >= 0")
        returns = np.asarray(episode_returns, dtype=np.float64)
        lengths = np.asarray(episode_lengths, dtype=np.int64)
        if returns.ndim != 1 or lengths.shape != returns.shape:
            raise ValueError(
                f"episode_returns {returns.shape} and episode_lengths {lengths.shape}: "
                "must be 1-D arrays of the same size (one entry per completed episode)"
            )
        self.run_state.counters[SAMPLED] += int(env_steps)
        self.run_state.episodes.add(returns, lengths)

    def record_batch(self, batch: Any) -> None:
        """:meth:`record_sampled` for a ``SampleBatch`` (its ``env_steps()`` and the
        episodes it completed: ``episode_returns``, ``episode_lengths``)."""
        self.record_sampled(int(batch.env_steps()), batch.episode_returns, batch.episode_lengths)

    # -- checkpoint state ------------------------------------------------------------------

    def register_operator_state(
        self,
        node_id: str,
        get_state: Callable[[], dict[str, Any]],
        set_state: Callable[[dict[str, Any]], None],
    ) -> None:
        """Checkpoint node ``node_id``'s operator state with these hooks (call it while
        lowering the node). ``get_state`` must return a plain data tree: dicts with str
        keys, lists, str/int/float/bool/None and numpy arrays.

        Raises:
            ValueError: ``node_id`` already registered (lower each node once per dataflow).
        """
        if node_id in self.operator_states:
            raise ValueError(f"node {node_id!r}: operator state registered twice")
        self.operator_states[node_id] = OperatorState(get_state, set_state)

    # -- checkpoint state ------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Checkpoint data of the resources and the dataflow: ``policies`` (learner policy
        state by worker set id), ``workers`` (``WorkerSet.get_state()`` by id: every
        rollout worker's envs, partial episodes, RNGs and policy copy), ``buffers``
        (replay contents by id), ``operators`` (stateful operators' states by node id)
        and, for async plans, ``learners`` (each learner thread's policy version) and
        ``replay_actors`` (every shard's buffer, by resource id). The run's own state is
        ``run_state.get_state()``."""
        # Every learner policy and its learner thread's version at one moment: holding the
        # policy locks (a learner thread's own lock) keeps a running thread from updating
        # between the two, which would pair weights with the version after them. Sorted,
        # so that two callers never take them in opposite orders.
        with contextlib.ExitStack() as held:
            for rid in sorted(self.policy_locks):
                held.enter_context(self.policy_locks[rid])
            policies = {rid: ws.local_policy.get_state() for rid, ws in self.worker_sets.items()}
            learners = {rid: t.get_state() for rid, t in self.learners.items()}
        self._warn_unsaved_states()
        state: dict[str, Any] = {
            "policies": policies,
            "workers": {rid: ws.get_state() for rid, ws in self.worker_sets.items()},
            "buffers": {rid: buf.get_state() for rid, buf in self.buffers.items()},
            "operators": {nid: op.get_state() for nid, op in sorted(self.operator_states.items())},
        }
        if learners:
            state["learners"] = learners
        if self.replay_actors:
            state["replay_actors"] = {rid: r.get_state() for rid, r in self.replay_actors.items()}
        return state

    def _warn_unsaved_states(self) -> None:
        """``ResumeWarning`` for every operator that keeps state a checkpoint cannot hold."""
        from plangraph.rl.worker_set import ResumeWarning

        unsaved = dict(self.unsaved_states)
        for nid in self.rng_nodes - set(self.operator_states):
            unsaved.setdefault(nid, "it draws from its per-node RNG")
        for nid, what in sorted(unsaved.items()):
            if nid in self.operator_states:
                continue
            warnings.warn(
                f"node {nid!r}: {what} but registers no way to save it, so the checkpoint "
                "does not hold it and a resumed run differs from an uninterrupted one; save "
                "it with the operator context's save_state(get_state, set_state) "
                "(docs/extending.md, Operators)",
                ResumeWarning,
                stacklevel=3,
            )

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore ``get_state()`` output (restore ``run_state`` first: the weights sent to
        the workers carry its global vars). The rollout workers get their own checkpointed
        state back (weights as they last received them, envs, RNGs); a checkpoint without
        ``workers`` (written before they were saved) sends them the learner's weights.

        Raises:
            ValueError: the checkpoint's worker count or sub-envs do not match this build, or
                it holds state for an operator this dataflow does not have.
        """
        for rid, policy_state in state["policies"].items():
            ws = self.worker_sets[rid]
            ws.local_policy.set_state(policy_state)
            if rid in state.get("workers", {}):
                ws.set_state(state["workers"][rid])
            elif getattr(ws, "multi_agent", False):
                ws.sync_weights(self.run_state.policy_global_vars(ws.local_policy))
            else:
                ws.sync_weights(self.run_state.global_vars())
        for rid, buf_state in state["buffers"].items():
            self.buffers[rid].set_state(buf_state)
        for rid, learner_state in state.get("learners", {}).items():
            self.learners[rid].set_state(learner_state)
        for rid, shards_state in state.get("replay_actors", {}).items():
            self.replay_actors[rid].set_state(shards_state)
        operators = state.get("operators", {})
        unknown = sorted(set(operators) - set(self.operator_states))
        if unknown:
            raise ValueError(
                f"checkpoint holds operator state for nodes {unknown}, which this plan's "
                f"dataflow does not have (stateful nodes: {sorted(self.operator_states)})"
            )
        for nid, op_state in operators.items():
            self.operator_states[nid].set_state(op_state)

    def stop(self) -> None:
        """Join the learner threads, then release every actor. Idempotent.

        Raises:
            WaitTimeoutError: a learner thread did not stop in time (raised once every
                actor is released).
        """
        late: list[WaitTimeoutError] = []
        closers, self.closers = self.closers, []
        failed: list[BaseException] = []
        for close in closers:
            try:
                close()
            except Exception as exc:  # every resource is still released below
                failed.append(exc)
        for thread in self.learners.values():
            try:
                thread.stop()
            except WaitTimeoutError as exc:
                late.append(exc)
        for ws in self.worker_sets.values():
            ws.stop()
        for shards in self.replay_actors.values():
            shards.stop()
        if failed:
            raise failed[0]
        if late:
            raise late[0]
