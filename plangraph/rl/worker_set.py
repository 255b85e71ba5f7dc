"""``WorkerSet``: the local learner policy plus ``num_workers`` remote ``RolloutWorker`` actors.

* ``num_workers > 0``: remote actors with ``worker_index`` 1..N, each seeded from
  ``(seed, worker_index)`` (``seeding``); the learner policy is seeded from
  ``(seed, 0)`` and its weights are broadcast to every worker at construction, so all
  workers start from the learner's weights.
* ``num_workers == 0``: a local ``RolloutWorker`` (``worker_index`` 0) samples in-process
  and *shares* the learner policy object, so no weight sync is needed.

Remote workers act with the learner's policy class (torch, one thread, inference mode;
their copy builds no optimizer), each from the learner's weights: the broadcast below.

``sync_weights(global_vars)`` puts the learner weights into the object store once
(``ray.put``) and sends ``set_weights(ref, global_vars)`` to every worker without waiting;
Ray runs an actor's calls in submission order, so the worker's next ``sample()`` uses the
new weights.

Calls not waited for (``set_weights``, ``set_batch_transforms``) are not forgotten: their
replies are kept in ``pending_calls`` (``plangraph.flow.pending.PendingCalls``) and looked
at by ``check_pending``, which the rollout sources call on every batch they gather (no Ray
call while none is pending; after a bulk-synchronous round, the calls sent before it have
finished, so a failed weight sync stops the run before the learner trains on that round)
and which ``get_state`` calls (a checkpoint never holds a worker that missed a broadcast).
A call that raised on a worker raises ``RemoteCallError`` naming the plan node that sent
it, the worker (index, Ray node, pid), the call and the remote traceback. Such a failure is
not a death and is not restarted: a replacement would get the same weights and fail alike
(as an env that raises in ``step``). A worker that *died* is replaced where it is sampled.

A remote worker whose process dies is replaced by ``replace_dead_worker`` under a
``RestartPolicy`` (``plangraph.rl.restarts``: at most ``max_worker_restarts`` per worker
within ``worker_restart_window_s``, exponential backoff), then the run stops with
``WorkerRestartError``; ``num_worker_restarts`` counts the replacements.

Checkpoints: ``get_state()`` collects every rollout worker's ``RolloutWorker.get_state()``
(one Ray call per worker; the calls queue behind any weight broadcast already sent, so
they see the weights the workers will sample with) and the global vars last broadcast;
``set_state()`` sends each worker its own state back (one call per worker, waited for).
Together with the learner policy's state this resumes sampling exactly where it stopped.

Actors reserve ``worker_resources`` (``plangraph.ops.resources.WorkerResources``: CPUs,
GPUs, memory, custom resources; default nothing: on a 2-core machine the driver, the
workers and any replay/learner actors must all be schedulable at once; rollout workers
call ``torch.set_num_threads(1)`` themselves). With a ``placement_strategy`` (``PACK``,
``SPREAD``, ``STRICT_SPREAD``) the workers are placed through a Ray placement group of one
bundle per worker, reserved (and waited for, at most ``PLACEMENT_TIMEOUT_S``) before any
worker starts; worker ``i`` runs in bundle ``i - 1``, and so does its replacement. When a
node dies, Ray re-reserves its bundles on the remaining nodes where they fit, and the
replaced workers start there.

Every wait on a remote worker's reply (its spaces, a sample, its state, the observation
filter's moments) lasts at most ``plangraph.flow.deadlines.REPLY_DEADLINE_S`` seconds, then
raises ``WaitTimeoutError`` naming the workers that did not answer.

The learner runs in the process that builds the ``WorkerSet`` (the driver), on
``learner_device`` (``"auto"``: CUDA when torch sees it) when there are remote workers
(with ``num_workers == 0`` the learner is the local worker's policy, on the CPU); it sets
``torch.set_num_threads(learner_torch_threads)`` (default 1). The policies are small MLPs
updated on minibatches of a few hundred rows: a second intra-op thread buys nothing there,
and its spin-waiting competes with the rollout workers for the same cores (measured on
2 cores under load: a PPO epoch 50x slower, a DQN step 100x slower with torch's default).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from plangraph.errors import BuildError, WaitTimeoutError
from plangraph.flow.deadlines import get_all, not_answered, wait_all
from plangraph.ops.algorithms import as_policy_config
from plangraph.rl.envs import resolve_env, ship_by_value
from plangraph.rl.registrations import user_registrations
from plangraph.rl.restarts import (
    RestartPolicy,
    WorkerRestartError,
    describe_actor_death,
    missing_module,
)
from plangraph.rl.rollout_worker import UNSAVED_KEY, EnvSpec, RolloutWorker
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.seeding import derive_seeds

if TYPE_CHECKING:
    from plangraph.ops.policies import AlgorithmConfig
    from plangraph.ops.resources import WorkerResources, WorkerSetParams
    from plangraph.rl.policy import TorchPolicy
    from plangraph.rl.policy_map import PolicyMap

PLACEMENT_TIMEOUT_S = 60.0
"""How long (s) a worker set waits for its placement group to be reserved before the
build fails (the cluster lacks the resources, or they are held by others)."""


def _set_torch_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)`` in this (the learner's) process; None: leave it."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def fragment_length(params: WorkerSetParams) -> int:
    """``params.rollout_fragment_length`` as the number the compiler gave it.

    Raises:
        ValueError: it is still ``"auto"`` (params that did not go through the compiler,
            whose pass rollout-sizing gives ``"auto"`` a number, 64 where it cannot size it).
    """
    frag = params.rollout_fragment_length
    if frag == "auto":
        raise ValueError(
            'rollout_fragment_length "auto" is sized by the compiler (pass rollout-sizing); '
            "build the worker set from a compiled plan's params, or give a number"
        )
    return frag


class ResumeWarning(UserWarning):
    """A checkpoint cannot make the resumed run identical to the uninterrupted one."""


def warn_unsaved(workers: Sequence[dict[str, Any] | None]) -> None:
    """Pop each worker state's list of what it does not save (``UNSAVED_KEY``) and warn
    (``ResumeWarning``) once per kind, naming the workers: a restore starts that afresh."""
    by_what: dict[str, list[str]] = {}
    for w in workers:
        if w is None:
            continue
        for what in w.pop(UNSAVED_KEY, ()):
            by_what.setdefault(what, []).append(str(w["worker_index"]))
    for what, indexes in by_what.items():
        warnings.warn(
            f"rollout worker{'s' * (len(indexes) > 1)} {', '.join(indexes)}: the {what} is "
            "not in the checkpoint; a restored worker starts without it, so the resumed run "
            "may differ from an uninterrupted one",
            ResumeWarning,
            stacklevel=3,
        )


class WorkerSet:
    """Learner policy + rollout workers.

    Args:
        env: gymnasium env id or env creator; resolved here (``plangraph.rl.envs``), so an
            env registered only in this process still reaches every rollout worker.
        num_workers: remote rollout workers (0 = sample in-process).
        num_envs_per_worker: sub-envs per worker.
        rollout_fragment_length: env steps per sub-env per ``sample()``.
        policy_config: policy config model or dict (``plangraph.ops.policies``).
        seed: the run seed.
        num_cpus_per_worker: CPUs each remote actor reserves in Ray (may be fractional);
            used when ``worker_resources`` is None.
        worker_resources: what Ray reserves for each remote worker (CPUs, GPUs, memory,
            custom resources); None: ``num_cpus_per_worker`` CPUs and nothing else.
        placement_strategy: ``"PACK"``, ``"SPREAD"`` or ``"STRICT_SPREAD"``: place the
            remote workers through a placement group of one ``worker_resources`` bundle
            each; None: no placement group.
        learner_device: ``"auto"``, ``"cpu"`` or ``"cuda"`` for the learner policy (with
            remote workers; ``plangraph.rl.policy.resolve_device``).
        learner_torch_threads: ``torch.set_num_threads`` of this (the learner's) process;
            None leaves torch's setting alone.
        restart_policy: how often a dead remote worker is replaced (default
            ``RestartPolicy()``: 3 per worker per 300 s, backoff from 1 s).
        spaces: ``(observation space, action space)`` of one sub-env, when the caller has
            read them: the learner is then built without waiting for a remote worker to
            start; or a function returning them (or None), called once the actors are
            created, so that they start while it runs; None asks the first remote worker.
        name: the plan's resource id of this worker set, named by errors.

    Attributes:
        local_policy: the learner ``TorchPolicy`` (a ``MultiAgentWorkerSet``'s is a
            ``PolicyMap`` of them by policy id).
        policy_config: the policy's validated config (None in a ``MultiAgentWorkerSet``,
            whose ``policy_configs`` hold one per policy id).
        remote_workers: list of ``RolloutWorker`` actor handles (index ``i`` has
            ``worker_index = i + 1``).
        local_worker: the in-process ``RolloutWorker`` when ``num_workers == 0``, else None.
        num_worker_restarts: dead workers replaced by ``replace_dead_worker`` (count).
        num_weight_broadcasts: ``sync_weights`` calls that sent weights to remote workers.
        name: the plan's resource id of this worker set (messages).
        pending_calls: ``PendingCalls`` of the calls sent to the workers without waiting.
    """

    local_policy: TorchPolicy[AlgorithmConfig] | PolicyMap
    policy_config: AlgorithmConfig | None

    def __init__(
        self,
        env: EnvSpec,
        num_workers: int,
        num_envs_per_worker: int,
        rollout_fragment_length: int,
        policy_config: Any,
        seed: int = 0,
        *,
        num_cpus_per_worker: float = 0.0,
        learner_torch_threads: int | None = 1,
        restart_policy: RestartPolicy | None = None,
        spaces: tuple[Any, Any] | Callable[[], tuple[Any, Any] | None] | None = None,
        worker_resources: WorkerResources | None = None,
        placement_strategy: str | None = None,
        learner_device: str = "auto",
        obs_filter: bool = False,
        name: str = "workers",
    ) -> None:
        from plangraph.flow.pending import PendingCalls
        from plangraph.ops.resources import WorkerResources

        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        if worker_resources is None:
            worker_resources = WorkerResources(num_cpus=num_cpus_per_worker)
        self.worker_resources = worker_resources
        self.placement_strategy = placement_strategy
        self.placement_group: Any = None
        self.learner_device = learner_device
        self.name = name
        #: replies of calls sent to the workers and not waited for (``check_pending``)
        self.pending_calls = PendingCalls(name)
        # Resolved here, in the driver where it is registered: the creator travels to
        # the workers, whose own gymnasium registries may not know the id.
        self.env = resolve_env(env)
        #: the env normalises observations: pool their moments at every broadcast
        self.obs_filter = bool(obs_filter)
        self.num_workers = int(num_workers)
        self.num_envs_per_worker = int(num_envs_per_worker)
        self.rollout_fragment_length = int(rollout_fragment_length)
        self.policy_config = as_policy_config(policy_config)
        self.seed = int(seed)
        self.num_cpus_per_worker = float(worker_resources.num_cpus)
        self._global_vars: dict[str, Any] = {}
        self.restart_policy = restart_policy if restart_policy is not None else RestartPolicy()
        self.num_worker_restarts = 0
        self.num_weight_broadcasts = 0
        self._batch_transforms: tuple[Any, ...] = ()
        # The first death of each worker in its current restart window (the original cause).
        self._first_death: dict[int, str] = {}
        self.remote_workers: list[Any] = []
        self.local_worker: RolloutWorker | None = None
        if self.num_workers == 0:
            _set_torch_threads(learner_torch_threads)
            self.local_worker = RolloutWorker(
                env,
                self.num_envs_per_worker,
                self.rollout_fragment_length,
                self.policy_config,
                self.seed,
                worker_index=0,
            )
            self.local_policy = self.local_worker.policy
            return

        ship_by_value(self.env)
        if placement_strategy is not None:
            self.placement_group = self._reserve_placement_group(placement_strategy)
        self.remote_workers = [self._make_remote(i + 1) for i in range(self.num_workers)]
        known: tuple[Any, Any] | None
        if callable(spaces):
            try:
                known = spaces()
            except BaseException:
                self.stop()  # the actors just created must not outlive a failed build
                raise
        else:
            known = spaces
        if known is None:
            try:
                (known,) = self._get_from_workers(
                    [self.remote_workers[0].get_spaces.remote()], "get_spaces()"
                )
            except BaseException:
                self.stop()
                raise
        obs_space, act_space = known
        # Torch only now, after the actors were created: they start while it loads.
        from plangraph.rl.policies import make_policy

        _set_torch_threads(learner_torch_threads)
        policy_seed, _ = derive_seeds(self.seed, 0, 0)
        try:
            self.local_policy = make_policy(
                obs_space, act_space, self.policy_config, policy_seed, learner_device
            )
            self.local_policy.build_optimizers()  # while the workers start, too
        except BaseException:
            self.stop()
            raise
        self.sync_weights()

    @classmethod
    def from_params(
        cls,
        params: WorkerSetParams,
        seed: int = 0,
        *,
        env: EnvSpec | None = None,
        **kwargs: Any,
    ) -> WorkerSet:
        """Build from a plan's validated ``WorkerSetParams`` resource; ``env`` (an id or a
        creator, already inside the declared wrappers) replaces ``params.env`` and its
        ``wrappers`` when given.

        Raises:
            ValueError: ``rollout_fragment_length`` is still ``"auto"`` (``fragment_length``).
        """
        kwargs.setdefault(
            "restart_policy",
            RestartPolicy(
                params.max_worker_restarts,
                params.worker_restart_window_s,
                params.worker_restart_backoff_s,
            ),
        )
        if env is None:
            from plangraph.rl.wrappers import with_wrappers

            env = with_wrappers(params.env, params.wrappers)
        kwargs.setdefault(
            "obs_filter", any(w.name == "normalize_observation" for w in params.wrappers)
        )
        kwargs.setdefault("worker_resources", params.worker_resources)
        kwargs.setdefault("placement_strategy", params.placement_strategy)
        kwargs.setdefault("learner_device", params.learner.device)
        return cls(
            env,
            params.num_workers,
            params.num_envs_per_worker,
            fragment_length(params),
            params.policy,
            seed,
            **kwargs,
        )

    # --- placement --------------------------------------------------------------------
    def _reserve_placement_group(self, strategy: str) -> Any:
        """Reserve one ``worker_resources`` bundle per remote worker with ``strategy`` and
        wait (at most ``PLACEMENT_TIMEOUT_S``) until Ray has placed them all.

        Raises:
            BuildError: the bundle is empty, or the group is not placed in time (the
                cluster's free resources, as Ray reports them, are in the message).
        """
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        bundle = self.worker_resources.bundle()
        if not bundle:
            raise BuildError(
                f"placement_strategy {strategy!r}: each rollout worker's bundle is empty; "
                "a placement group needs a resource per bundle (set worker_resources.num_cpus, "
                "e.g. 1)"
            )
        pg = placement_group([dict(bundle) for _ in range(self.num_workers)], strategy=strategy)
        try:
            ray.get(pg.ready(), timeout=PLACEMENT_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            remove_placement_group(pg)
            free = ray.available_resources()
            raise BuildError(
                f"placement group of {self.num_workers} rollout workers x {bundle} "
                f"({strategy}) was not placed within {PLACEMENT_TIMEOUT_S:g} s; the cluster has "
                f"free {_fmt_resources(free)}: lower worker_resources or num_workers, pick "
                "another placement_strategy, or add nodes"
            ) from None
        return pg

    def _actor_options(self, worker_index: int) -> dict[str, Any]:
        """``ray.remote(...).options`` of remote worker ``worker_index``."""
        r = self.worker_resources
        opts: dict[str, Any] = {"num_cpus": r.num_cpus, "max_restarts": 0}
        if r.num_gpus:
            opts["num_gpus"] = r.num_gpus
        if r.memory:
            opts["memory"] = r.memory
        if r.resources:
            opts["resources"] = dict(r.resources)
        if self.placement_group is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                self.placement_group, placement_group_bundle_index=worker_index - 1
            )
        return opts

    def worker_locations(self, timeout_s: float = 30.0) -> list[dict[str, Any] | None]:
        """Where each remote worker runs (``RolloutWorker.location``: node id and IP, pid),
        in ``remote_workers`` order; ``None`` for a worker that does not answer (dead, or
        not started within ``timeout_s`` seconds). ``[]`` without remote workers."""
        import ray

        out: list[dict[str, Any] | None] = []
        for ref in [w.location.remote() for w in self.remote_workers]:
            try:
                out.append(ray.get(ref, timeout=timeout_s))
            except (ray.exceptions.RayError, TimeoutError):
                out.append(None)
        return out

    def _make_remote(self, worker_index: int, node_id: str | None = None) -> Any:
        """A new remote worker ``worker_index``, running the current worker-side maps
        (their ``set_batch_transforms`` sent by plan node ``node_id``, not waited for)."""
        import ray

        actor_cls = ray.remote(RolloutWorker)
        worker = actor_cls.options(**self._actor_options(worker_index)).remote(
            self.env,
            self.num_envs_per_worker,
            self.rollout_fragment_length,
            self.policy_config,
            self.seed,
            worker_index,
            torch_threads=1,
            num_workers=self.num_workers,
            registrations=user_registrations(),
        )
        if self._batch_transforms:  # a replacement runs the same worker-side maps
            self._send(
                worker_index,
                worker,
                "set_batch_transforms",
                self._batch_transforms,
                node_id=node_id,
            )
        return worker

    # --- calls not waited for ---------------------------------------------------------
    def _send(
        self, worker_index: int, worker: Any, method: str, *args: Any, node_id: str | None
    ) -> None:
        """``worker.<method>.remote(*args)`` without waiting; its reply is kept in
        ``pending_calls`` (sent by plan node ``node_id``, None outside any)."""
        ref = getattr(worker, method).remote(*args)
        who = f"rollout worker {worker_index}" if worker_index else "a replaced rollout worker"
        self.pending_calls.add(ref, f"{who} of {self.name!r}", f"{method}()", node_id)

    def check_pending(
        self, node_id: str | None = None, *, settled: int | None = None, block: bool = False
    ) -> None:
        """Look at the replies of the calls sent to the workers without waiting
        (``set_weights``, ``set_batch_transforms``): never waits, except for the calls
        sent up to ``settled`` (a ``pending_calls.mark()`` taken before a request every
        worker has since answered: they have finished) and, with ``block``, for all of
        them (at most ``REPLY_DEADLINE_S``). No Ray call while none is pending. A call
        whose worker died is dropped (its gather replaces the worker). ``node_id``: the
        plan node checking.

        Raises:
            RemoteCallError: a call raised on its worker: names the plan node that sent it
                (else ``node_id``, else the worker set), the worker (index, Ray node, pid),
                the call and the remote exception with its traceback.
            WaitTimeoutError: a reply waited for did not come within the deadline.
        """
        self.pending_calls.check(node_id, settled=settled, block=block)

    # --- worker-side maps -------------------------------------------------------------
    def set_batch_transforms(self, transforms: Any, *, node_id: str | None = None) -> None:
        """Have every rollout worker (and replacements of dead ones) apply ``transforms``
        (``RolloutWorker.set_batch_transforms``: ``(node id, pure map)`` pairs) to each
        fragment it samples; ``()`` removes them. Sent once per worker by plan node
        ``node_id``, no waiting (a worker runs it before any later ``sample``; its reply
        is looked at by ``check_pending``)."""
        self._batch_transforms = tuple(transforms)
        if self.local_worker is not None:
            self.local_worker.set_batch_transforms(self._batch_transforms)
            return
        if not self.remote_workers:
            return
        import ray

        ref = ray.put(self._batch_transforms)
        for i, worker in enumerate(self.remote_workers):
            self._send(i + 1, worker, "set_batch_transforms", ref, node_id=node_id)

    # --- weights ----------------------------------------------------------------------
    def sync_weights(
        self, global_vars: Mapping[str, Any] | None = None, *, node_id: str | None = None
    ) -> None:
        """Broadcast the learner weights (one ``ray.put``) and global vars; no waiting
        (except with ``obs_filter``: see :meth:`sync_obs_filter`). ``node_id``: the plan
        node broadcasting, named if a worker's ``set_weights`` fails (``check_pending``,
        which runs here first, without waiting).

        Raises:
            RemoteCallError: a call sent to a worker earlier failed (``check_pending``).
        """
        self.check_pending(node_id)
        if global_vars:
            self._global_vars.update(global_vars)
        if self.obs_filter:
            self.sync_obs_filter()
        if not self.remote_workers:
            if self.local_worker is not None and (global_vars or self.obs_filter):
                self.local_worker.set_global_vars(self._global_vars)
            return
        import ray

        ref = ray.put(self.local_policy.get_weights())
        gv = dict(self._global_vars) or None
        for i, worker in enumerate(self.remote_workers):
            self._send(i + 1, worker, "set_weights", ref, gv, node_id=node_id)
        self.num_weight_broadcasts += 1

    def sync_weights_to(
        self,
        worker: Any,
        global_vars: Mapping[str, Any] | None = None,
        *,
        node_id: str | None = None,
    ) -> None:
        """Send the learner weights (one ``ray.put``) and global vars to ``worker`` alone,
        without waiting (A3C: the worker whose gradients were just applied), on behalf of
        plan node ``node_id``.

        ``global_vars`` are also kept as the ones last sent, so a worker that is replaced
        later starts from the same (e.g. ``policy_version``) as the learner's weights it
        gets. Does nothing without remote workers (the local worker shares the policy).

        Raises:
            RemoteCallError: a call sent to a worker earlier failed (``check_pending``,
                run here first without waiting).
        """
        if global_vars:
            self._global_vars.update(global_vars)
        if not self.remote_workers:
            return
        import ray

        self.check_pending(node_id)
        ref = ray.put(self.local_policy.get_weights())
        self.send_weights(worker, ref, dict(self._global_vars) or None, node_id=node_id)

    def send_weights(
        self,
        worker: Any,
        weights: Any,
        global_vars: Mapping[str, Any] | None = None,
        *,
        node_id: str | None = None,
    ) -> None:
        """Send ``set_weights(weights, global_vars)`` (``weights``: an object ref, or the
        weights) to remote worker ``worker`` (a handle in ``remote_workers``) without
        waiting; its reply is looked at by ``check_pending``, which names ``node_id``."""
        self._send(
            self._index_of(worker), worker, "set_weights", weights, global_vars, node_id=node_id
        )

    def _index_of(self, worker: Any) -> int:
        """The ``worker_index`` of handle ``worker`` (0 if it is not, or no longer, one of
        ``remote_workers``: a replaced actor)."""
        for i, w in enumerate(self.remote_workers):
            if w is worker:
                return i + 1
        return 0

    def sync_obs_filter(self) -> dict[str, Any]:
        """Pool the observation moments the workers' ``normalize_observation`` layers saw
        since the last sync into the worker set's (``global_vars["obs_filter"]``: count,
        mean and M2, float64), which the next broadcast hands to every worker; returns
        them. Waits for each worker to answer (after the fragment it is sampling): one Ray
        call per worker, made only by plans that normalise observations.
        """
        from plangraph.rl.wrappers import merge_moments

        if self.local_worker is not None:
            deltas = [self.local_worker.take_obs_filter_delta()]
        else:
            deltas = self._get_from_workers(
                [w.take_obs_filter_delta.remote() for w in self.remote_workers],
                "take_obs_filter_delta()",
            )
        pooled = self._global_vars.get("obs_filter")
        for d in deltas:
            if d is None:
                continue
            if pooled is None:
                pooled = d
            else:
                count, mean, m2 = merge_moments(
                    (pooled["count"], np.asarray(pooled["mean"]), np.asarray(pooled["m2"])),
                    (d["count"], np.asarray(d["mean"]), np.asarray(d["m2"])),
                )
                pooled = {"count": count, "mean": mean, "m2": m2}
        if pooled is not None:
            self._global_vars["obs_filter"] = pooled
        return pooled or {}

    # --- checkpoints ------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """The rollout side of a checkpoint, as plain data: ``global_vars`` (as last
        broadcast) and ``workers``, one ``RolloutWorker.get_state()`` per worker in
        ``remote_workers`` order (the local worker's, without the policy it shares with
        the learner, when ``num_workers == 0``).

        Warns (``ResumeWarning``) for every sub-env whose state cannot be captured: on
        restore it is reset instead (``RolloutWorker`` docstring), so that resume is not
        the uninterrupted run; and for a worker that died (its entry is ``None``: a restore
        leaves that worker as it was built), so a checkpoint is still written.

        Raises:
            RemoteCallError: a call sent to a worker without waiting (a weight sync)
                failed: the workers do not hold the state a checkpoint would claim.
            WaitTimeoutError: a worker did not answer within ``REPLY_DEADLINE_S``.
        """
        workers: list[dict[str, Any] | None]
        if self.local_worker is not None:
            workers = [self.local_worker.get_state(include_policy=False)]
        else:
            import ray

            workers = []
            refs = [w.get_state.remote() for w in self.remote_workers]
            wait_all(refs, lambda late, s: _late_workers(late, "get_state()", s))
            # Queued behind every call sent before: a worker that missed a weight sync
            # would be saved with stale weights. Its replies are in (or arriving).
            self.check_pending(block=True)
            for i, ref in enumerate(refs):
                try:
                    workers.append(ray.get(ref))
                except ray.exceptions.RayActorError as exc:
                    warnings.warn(
                        f"rollout worker {i + 1} is dead ({type(exc).__name__}); the "
                        "checkpoint holds no state for it, so a restore sends it only the "
                        "learner's weights",
                        ResumeWarning,
                        stacklevel=2,
                    )
                    workers.append(None)
        warn_unsaved(workers)
        for w in workers:
            if w is None:
                continue
            for k, entry in enumerate(w["envs"]):
                if entry["snapshot"] is None:
                    warnings.warn(
                        f"worker {w['worker_index']} sub-env {k}: its state cannot be "
                        f"checkpointed ({entry['reason']}); a restore resets it with a seed "
                        "derived from its own seed and the env steps sampled, dropping its "
                        "partial episode, so the resumed run differs from an uninterrupted one",
                        ResumeWarning,
                        stacklevel=2,
                    )
        return {"global_vars": dict(self._global_vars), "workers": workers}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_state()`` onto this worker set's workers (same number of workers,
        sub-envs and env) and wait until every worker has it; a worker whose entry is
        ``None`` (dead at save time) gets the learner's weights and global vars instead.

        Raises:
            ValueError: the state is of a worker set with another number of workers (or
                sub-envs per worker, or another env).
        """
        workers = list(state["workers"])
        have = len(self.remote_workers) if self.local_worker is None else 1
        if len(workers) != have:
            raise ValueError(
                f"checkpoint holds the state of {len(workers)} rollout worker(s), this "
                f"worker set has {have}; restore with the num_workers it was saved with"
            )
        self._global_vars = dict(state["global_vars"])
        if self.local_worker is not None:
            self.local_worker.set_state(workers[0])
            return
        import ray

        refs, weights_ref = [], None
        for w, s in zip(self.remote_workers, workers, strict=True):
            if s is not None:
                refs.append(w.set_state.remote(s))
                continue
            if weights_ref is None:
                weights_ref = ray.put(self.local_policy.get_weights())
            refs.append(w.set_weights.remote(weights_ref, dict(self._global_vars) or None))
        self._get_from_workers(refs, "set_state()")

    # --- sampling ---------------------------------------------------------------------
    def sample(self) -> SampleBatch:
        """One fragment from every worker, concatenated in worker order (bulk-synchronous).

        ``env_steps() == max(1, num_workers) * num_envs_per_worker * rollout_fragment_length``.
        """
        if self.local_worker is not None:
            return self.local_worker.sample()
        return SampleBatch.concat_samples(
            self._get_from_workers([w.sample.remote() for w in self.remote_workers], "sample()")
        )

    def _get_from_workers(self, refs: list[Any], call: str) -> list[Any]:
        """The replies ``refs`` of ``call``, one per remote worker in ``remote_workers``
        order (or the first few), waited for at most ``REPLY_DEADLINE_S`` seconds.

        Raises:
            WaitTimeoutError: a worker did not answer in time (the message names it).
        """
        return get_all(refs, lambda late, s: _late_workers(late, call, s))

    # --- fault tolerance --------------------------------------------------------------
    def probe_unhealthy_workers(self, timeout_s: float = 30.0) -> list[int]:
        """Positions (0-based, in ``remote_workers``) of actors that fail a ``ping``."""
        import ray

        bad = []
        refs = [w.ping.remote() for w in self.remote_workers]
        for i, ref in enumerate(refs):
            try:
                ray.get(ref, timeout=timeout_s)
            except (ray.exceptions.RayError, TimeoutError):
                bad.append(i)
        return bad

    def recreate_worker(self, position: int, node_id: str | None = None) -> Any:
        """Replace ``remote_workers[position]`` by a fresh actor with the same index and seeds.

        The old actor is killed (if still alive); the new one gets the current learner
        weights and global vars before its first ``sample()`` (sent without waiting on
        behalf of plan node ``node_id``; ``check_pending`` looks at the reply). Returns the
        new handle.

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
            dict(self._global_vars) or None,
            node_id=node_id,
        )
        self.remote_workers[position] = worker
        return worker

    def replace_dead_worker(self, position: int, error: BaseException, node_id: str) -> Any:
        """Replace ``remote_workers[position]``, whose process died with ``error`` (a
        ``RayActorError``), after the policy's backoff; returns the new handle.

        Blocks the calling thread for the backoff (s). ``node_id`` is the plan node whose
        stream saw the death, for the error message.

        Raises:
            WorkerRestartError: the worker was already replaced ``max_restarts`` times
                within the window; names ``node_id``, the worker index, the original
                cause (the first death in the window) and the last one.
            IndexError: no remote worker at ``position``.
        """
        import time

        worker_index = position + 1
        policy = self.restart_policy
        cause = describe_actor_death(error)
        missing = missing_module(error)
        if missing is not None:
            # A node without a package: a replacement there would fail the same way.
            raise WorkerRestartError(
                node_id,
                worker_index,
                0,
                cause,
                f"WorkerRestartError: rollout worker {worker_index} cannot import module "
                f"{missing!r} on its node ({cause}). Every package the env or the plan's "
                "operators import must be installed on every node (pip install "
                f"{missing.split('.')[0]} there); a module of your own is shipped when the "
                "plan file imports it or --import names it (plangraph run --address ships "
                "them as a runtime_env)",
                str(getattr(error, "error_msg", "") or error),
            ) from error
        if policy.restarts_in_window(worker_index) == 0:
            self._first_death[worker_index] = cause  # a new window: this is the original
        original = self._first_death.setdefault(worker_index, cause)
        backoff_s = policy.admit(worker_index)
        if backoff_s is None:
            n = policy.max_restarts
            last = "" if cause == original else f"; last death: {cause}"
            raise WorkerRestartError(
                node_id,
                worker_index,
                n,
                original,
                f"WorkerRestartError: rollout worker {worker_index} died again after {n} "
                f"replacement(s) within {policy.window_s:g} s (max_worker_restarts={n}, "
                f"worker_restart_window_s={policy.window_s:g}); original cause: "
                f"{original}{last}. Fix the env (the worker's stderr is above), or raise "
                "max_worker_restarts on the WorkerSet resource if deaths are expected",
                str(getattr(error, "error_msg", "") or error),
            ) from error
        if backoff_s > 0:
            time.sleep(backoff_s)  # exponential backoff: a crash loop must not spin
        worker = self.recreate_worker(position, node_id)
        self.num_worker_restarts += 1
        print(
            f"plangraph: rollout worker {worker_index} died ({cause}); replaced it "
            f"(replacement {policy.restarts_in_window(worker_index)} of at most "
            f"{policy.max_restarts} within {policy.window_s:g} s)"
            + (
                "; it starts where its placement group bundle is re-reserved"
                if self.placement_group is not None
                else ""
            ),
            file=sys.stderr,
            flush=True,
        )
        return worker

    def recreate_failed_workers(self, timeout_s: float = 30.0) -> list[int]:
        """Probe all workers and recreate the unhealthy ones; returns their positions."""
        bad = self.probe_unhealthy_workers(timeout_s)
        for i in bad:
            self.recreate_worker(i)
        return bad

    def stop(self) -> None:
        """Kill the remote actors and close the local env."""
        if self.local_worker is not None:
            self.local_worker.stop()
        if self.remote_workers:
            import ray

            for w in self.remote_workers:
                try:
                    ray.kill(w, no_restart=True)
                except Exception:  # already dead is fine
                    pass
            self.remote_workers = []
        if self.placement_group is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self.placement_group)
            except Exception:  # Ray already shut down: nothing is reserved any more
                pass
            self.placement_group = None


def _late_workers(positions: list[int], call: str, deadline_s: float) -> WaitTimeoutError:
    """The error for the remote workers at ``positions`` (0-based) not answering ``call``
    within ``deadline_s`` seconds."""
    which = ", ".join(str(i + 1) for i in positions)
    return WaitTimeoutError(
        not_answered(
            f"rollout worker {which}",
            call,
            deadline_s,
            "its env stuck inside a step (a call queues behind the sample() in progress)",
        )
    )


def _fmt_resources(resources: Mapping[str, float]) -> str:
    """``{"CPU": 2.0, "memory": 1e9, "node:...": 1}`` -> ``"CPU 2, memory 0.9 GiB"``."""
    parts = []
    for k, v in sorted(resources.items()):
        if k.startswith("node:") or k == "object_store_memory":
            continue
        parts.append(f"{k} {v / 2**30:.1f} GiB" if k == "memory" else f"{k} {v:g}")
    return ", ".join(parts) or "nothing"
