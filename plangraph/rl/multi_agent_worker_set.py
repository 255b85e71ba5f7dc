"""``MultiAgentWorkerSet``: one learner policy per policy id plus multi-agent rollout workers.

The multi-agent counterpart of ``WorkerSet`` (whose restart policy and health checks it
keeps): ``num_workers`` remote ``MultiAgentRolloutWorker`` actors (worker index 1..N, or
one in-process worker with ``num_workers == 0`` that acts with the learner policies
themselves), and ``local_policy``, a :class:`PolicyMap` of the learner policies by id.

Weights and global vars are per policy: ``sync_weights(global_vars_by_policy,
policies=...)`` puts the weights of the listed policies (all by default) into the object
store once and sends each worker ``set_weights(weights, global_vars)``; every policy's
global vars are its own (``{"timestep": <its agent steps sampled>}``), so one policy's
schedule (DQN's epsilon) never advances with another's experience.

Policies: built only for policy ids some agent maps to (the others cannot be trained and
the compiler warns, PG193). Learner policies are seeded from ``(seed, 0)`` and the policy
id's sorted position (``multi_agent_worker.policy_seeds``); all workers start from their
weights.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plangraph.flow.deadlines import wait_all
from plangraph.ops.algorithms import as_policy_config
from plangraph.rl.multi_agent_batch import MultiAgentBatch
from plangraph.rl.multi_agent_env import make_multi_agent_env, resolve_multi_agent_env
from plangraph.rl.multi_agent_worker import (
    MultiAgentRolloutWorker,
    PolicyMapping,
    policy_seeds,
    resolve_mapping,
)
from plangraph.rl.policy_map import PolicyMap
from plangraph.rl.registrations import user_registrations
from plangraph.rl.restarts import RestartPolicy
from plangraph.rl.seeding import derive_seeds
from plangraph.rl.worker_set import (
    ResumeWarning,
    WorkerSet,
    _late_workers,
    _set_torch_threads,
    fragment_length,
    warn_unsaved,
)

if TYPE_CHECKING:
    import gymnasium as gym

    from plangraph.ops.resources import WorkerResources, WorkerSetParams

__all__ = ["MultiAgentWorkerSet", "PolicyMap"]


class MultiAgentWorkerSet(WorkerSet):
    """Learner policies + multi-agent rollout workers.

    Args:
        env: a registered multi-agent env name or creator (resolved here, in the driver).
        env_config: the env creator's keyword arguments.
        num_workers: remote rollout workers (0 = sample in-process).
        num_envs_per_worker: env copies per worker.
        rollout_fragment_length: env steps per env copy per ``sample()``.
        policies: policy id -> policy config (model or dict).
        policy_mapping: agent id or glob -> policy id, or a function of the agent id.
        seed: the run seed.
        num_cpus_per_worker, learner_torch_threads, restart_policy, name: as ``WorkerSet``.

    Attributes:
        local_policy: :class:`PolicyMap` of the learner policies.
        agent_policy: agent id -> policy id.
        multi_agent: True.

    Raises:
        KeyError: an unknown env name, or an agent the mapping does not map to a
            declared policy.
    """

    multi_agent = True
    local_policy: PolicyMap
    policy_config: None

    def __init__(
        self,
        env: Any,
        env_config: Mapping[str, Any] | None,
        num_workers: int,
        num_envs_per_worker: int,
        rollout_fragment_length: int,
        policies: Mapping[str, Any],
        policy_mapping: PolicyMapping,
        seed: int = 0,
        *,
        num_cpus_per_worker: float = 0.0,
        learner_torch_threads: int | None = 1,
        restart_policy: RestartPolicy | None = None,
        worker_resources: WorkerResources | None = None,
        placement_strategy: str | None = None,
        learner_device: str = "auto",
        name: str = "workers",
    ) -> None:
        from plangraph.flow.pending import PendingCalls

        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        self.env = resolve_multi_agent_env(env) if isinstance(env, str) else env
        self.env_config = dict(env_config or {})
        self.obs_filter = False
        self.num_workers = int(num_workers)
        self.num_envs_per_worker = int(num_envs_per_worker)
        self.rollout_fragment_length = int(rollout_fragment_length)
        self.policy_configs = {pid: as_policy_config(c) for pid, c in sorted(policies.items())}
        self.policy_config = None
        self.policy_mapping = policy_mapping
        self.seed = int(seed)
        from plangraph.ops.resources import WorkerResources

        if worker_resources is None:
            worker_resources = WorkerResources(num_cpus=num_cpus_per_worker)
        self.worker_resources = worker_resources
        self.placement_strategy = placement_strategy
        self.placement_group: Any = None
        self.learner_device = learner_device
        self.name = name
        self.pending_calls = PendingCalls(name)
        self.num_cpus_per_worker = float(worker_resources.num_cpus)
        self._global_vars: dict[str, Any] = {}
        self.restart_policy = restart_policy if restart_policy is not None else RestartPolicy()
        self.num_worker_restarts = 0
        self.num_weight_broadcasts = 0
        self._batch_transforms: tuple[Any, ...] = ()
        self._first_death: dict[int, str] = {}
        self.remote_workers: list[Any] = []
        self.local_worker: Any = None
        _set_torch_threads(learner_torch_threads)
        probe = make_multi_agent_env(self.env, self.env_config)
        try:
            self.agent_policy = {
                a: resolve_mapping(policy_mapping, a) for a in probe.possible_agents
            }
            spaces: dict[str, tuple[gym.Space[Any], gym.Space[Any]]] = {}
            for a, pid in self.agent_policy.items():
                if pid not in self.policy_configs:
                    raise KeyError(
                        f"policy_mapping maps agent {a!r} to {pid!r}, which is not a declared "
                        f"policy ({', '.join(self.policy_configs)})"
                    )
                spaces.setdefault(pid, (probe.observation_space(a), probe.action_space(a)))
        finally:
            probe.close()
        from plangraph.rl.policies import make_policy

        policy_seed, _ = derive_seeds(self.seed, 0, 0)
        seeds = policy_seeds(policy_seed, list(self.policy_configs))
        # As WorkerSet: the in-process worker acts with the learners, so they stay on CPU.
        device = "cpu" if self.num_workers == 0 else learner_device
        self.local_policy = PolicyMap(
            {
                pid: make_policy(*spaces[pid], self.policy_configs[pid], seeds[pid], device)
                for pid in sorted(spaces)
            }
        )
        if self.num_workers == 0:
            self.local_worker = MultiAgentRolloutWorker(
                self.env,
                self.env_config,
                self.num_envs_per_worker,
                self.rollout_fragment_length,
                self.policy_configs,
                policy_mapping,
                self.seed,
                worker_index=0,
                policy_objects=self.local_policy,
            )
            return
        from plangraph.rl.envs import ship_by_value

        ship_by_value(self.env)
        if placement_strategy is not None:
            self.placement_group = self._reserve_placement_group(placement_strategy)
        self.remote_workers = [self._make_remote(i + 1) for i in range(self.num_workers)]
        for policy in self.local_policy.values():  # the learners', while the workers start
            policy.build_optimizers()
        self.sync_weights()

    @classmethod
    def from_params(
        cls, params: WorkerSetParams, seed: int = 0, *, env: Any = None, **kwargs: Any
    ) -> MultiAgentWorkerSet:
        """Build from a plan's multi-agent ``WorkerSetParams``; ``env`` (a name or
        creator) replaces ``params.env``, ``policy_mapping`` (a function, from a Python
        caller) replaces ``params.policy_mapping``.

        Raises:
            ValueError: ``params`` declare no ``policies``, or an unsized fragment length.
        """
        kwargs.setdefault(
            "restart_policy",
            RestartPolicy(
                params.max_worker_restarts,
                params.worker_restart_window_s,
                params.worker_restart_backoff_s,
            ),
        )
        kwargs.pop("spaces", None)
        kwargs.setdefault("worker_resources", params.worker_resources)
        kwargs.setdefault("placement_strategy", params.placement_strategy)
        kwargs.setdefault("learner_device", params.learner.device)
        mapping = kwargs.pop("policy_mapping", None) or dict(params.policy_mapping)
        if params.policies is None:
            raise ValueError(
                "MultiAgentWorkerSet.from_params needs multi-agent params (policies); these "
                "declare one policy: build a WorkerSet"
            )
        return cls(
            env if env is not None else params.env,
            params.env_config,
            params.num_workers,
            params.num_envs_per_worker,
            fragment_length(params),
            params.policies,
            mapping,
            seed,
            **kwargs,
        )

    def _make_remote(self, worker_index: int, node_id: str | None = None) -> Any:
        import ray

        actor_cls = ray.remote(MultiAgentRolloutWorker)
        return actor_cls.options(**self._actor_options(worker_index)).remote(
            self.env,
            self.env_config,
            self.num_envs_per_worker,
            self.rollout_fragment_length,
            self.policy_configs,
            self.policy_mapping,
            self.seed,
            worker_index,
            torch_threads=1,
            registrations=user_registrations(),
        )

    def set_batch_transforms(self, transforms: Any, *, node_id: str | None = None) -> None:
        """Worker-side maps act on single-agent fragments: a multi-agent worker set takes
        none (pass ``worker-side-maps`` moves no map next to a ``MultiAgentBatch``).

        Raises:
            ValueError: ``transforms`` is not empty.
        """
        if tuple(transforms):
            raise ValueError("a multi-agent worker set runs no worker-side maps")

    # --- weights ----------------------------------------------------------------------
    def sync_weights(
        self,
        global_vars: Mapping[str, Mapping[str, Any]] | None = None,
        policies: Sequence[str] | None = None,
        *,
        node_id: str | None = None,
    ) -> None:
        """Broadcast the weights of ``policies`` (all when None; one ``ray.put``) and each
        policy's own global vars (``{pid: {"timestep": ...}}``, merged into those last
        sent); no waiting (the replies are looked at by ``check_pending``, here first and
        by the rollout source, which name ``node_id`` if one failed). In-process: the
        global vars go to the learner policies.

        Raises:
            RemoteCallError: a call sent to a worker earlier failed (``check_pending``).
        """
        self.check_pending(node_id)
        for pid, gv in (global_vars or {}).items():
            self._global_vars[pid] = {**self._global_vars.get(pid, {}), **gv}
        if not self.remote_workers:
            for pid, gv in (global_vars or {}).items():
                if pid in self.local_policy:
                    self.local_policy[pid].set_global_vars(gv)
            return
        import ray

        pids = [p for p in (policies if policies is not None else self.local_policy)]
        ref = ray.put({pid: self.local_policy[pid].get_weights() for pid in pids})
        gv_all = {pid: dict(v) for pid, v in self._global_vars.items()} or None
        for i, worker in enumerate(self.remote_workers):
            self._send(i + 1, worker, "set_weights", ref, gv_all, node_id=node_id)
        self.num_weight_broadcasts += 1

    def sync_weights_to(
        self, worker: Any, global_vars: Any = None, *, node_id: str | None = None
    ) -> None:
        """Not used by multi-agent plans (A3C-style per-worker updates).

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("per-worker weight syncs are single-agent only")

    def recreate_worker(self, position: int, node_id: str | None = None) -> Any:
        """Replace ``remote_workers[position]`` by a fresh actor with the same index and
        seeds, given the learner weights and global vars of every policy (sent without
        waiting on behalf of plan node ``node_id``; ``check_pending`` looks at the reply).

        Raises:
            IndexError: no remote worker at ``position``.
        """
        import ray

        if not 0 <= position < len(self.remote_workers):
            raise IndexError(
                f"no remote worker at position {position}; there are {len(self.remote_workers)}"
            )
        try:
            ray.kill(self.remote_workers[position], no_restart=True)
        except Exception:  # already dead is fine
            pass
        worker = self._make_remote(position + 1, node_id)
        self._send(
            position + 1,
            worker,
            "set_weights",
            ray.put(self.local_policy.get_weights()),
            {pid: dict(v) for pid, v in self._global_vars.items()} or None,
            node_id=node_id,
        )
        self.remote_workers[position] = worker
        return worker

    # --- sampling ---------------------------------------------------------------------
    def sample(self) -> MultiAgentBatch:  # type: ignore[override]
        """One fragment from every worker, concatenated per policy in worker order."""
        if self.local_worker is not None:
            return self.local_worker.sample()
        return MultiAgentBatch.concat_samples(
            self._get_from_workers([w.sample.remote() for w in self.remote_workers], "sample()")
        )

    # --- checkpoints ------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """``{"global_vars": {pid: ...}, "workers": [MultiAgentRolloutWorker.get_state()]}``
        (the in-process worker's without the learner policies it shares). Warns
        (``ResumeWarning``) for an env copy whose state cannot be captured.

        Raises:
            RemoteCallError: a call sent to a worker without waiting (a weight sync) failed.
            WaitTimeoutError: a worker did not answer within ``REPLY_DEADLINE_S``.
        """
        if self.local_worker is not None:
            workers: list[Any] = [self.local_worker.get_state(include_policy=False)]
        else:
            refs = [w.get_state.remote() for w in self.remote_workers]
            wait_all(refs, lambda late, s: _late_workers(late, "get_state()", s))
            # Queued behind the weight syncs sent before: one that failed fails the save.
            self.check_pending(block=True)
            workers = self._get_from_workers(refs, "get_state()")
        warn_unsaved(workers)
        for w in workers:
            for k, entry in enumerate(w["envs"]):
                if entry["snapshot"] is None:
                    warnings.warn(
                        f"worker {w['worker_index']} env copy {k}: its state cannot be "
                        f"checkpointed ({entry['reason']}); a restore resets it",
                        ResumeWarning,
                        stacklevel=2,
                    )
        return {"global_vars": dict(self._global_vars), "workers": workers}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_state()`` onto the workers (same number of workers and env copies)
        and wait until each has it.

        Raises:
            ValueError: another number of workers.
        """
        workers = list(state["workers"])
        have = len(self.remote_workers) if self.local_worker is None else 1
        if len(workers) != have:
            raise ValueError(
                f"checkpoint holds the state of {len(workers)} rollout worker(s), this "
                f"worker set has {have}; restore with the num_workers it was saved with"
            )
        self._global_vars = {pid: dict(v) for pid, v in state["global_vars"].items()}
        if self.local_worker is not None:
            self.local_worker.set_state(workers[0])
            return
        self._get_from_workers(
            [w.set_state.remote(s) for w, s in zip(self.remote_workers, workers, strict=True)],
            "set_state()",
        )
