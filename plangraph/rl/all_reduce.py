"""Data-parallel training on the rollout workers: a ``torch.distributed`` process group over
a ``WorkerSet``'s actors, as DD-PPO's (Wijmans et al. 2020; RLlib 1.x
``rllib/agents/ddppo/ddppo.py``).

Worker side (module-level functions, run inside each ``RolloutWorker`` actor through
Ray's ``actor.__ray_call__.remote(fn, *args)``, which calls ``fn(worker, *args)``; the
shard operator form ``fn(worker, item)`` of the shard contract):

* :func:`find_address`: rank 0 finds its own node's address and a free TCP port;
* :func:`join_group`: ``torch.distributed.init_process_group(backend="gloo",
  init_method="tcp://HOST:PORT", rank, world_size, timeout)``, then rank 0's learner state
  (weights, optimizer state, env steps, KL coefficient; not the sampling RNGs) is
  broadcast to every rank (``broadcast_object_list``), so all ranks start identical;
* :func:`train_on_shard`: one round on the worker's own rows: ``policy.train`` (the same
  learner code the driver's ``TrainOneStep`` runs) with a policy whose optimizer steps
  average the gradients over the group (``all_reduces_gradients``: DD-PPO's);
* :func:`leave_group`: ``destroy_process_group``.

Driver side, :class:`AllReduceGroup`: sets the group up over the worker set's remote
workers, runs rounds (each worker samples one fragment and trains on it), and when a
worker dies mid-round stops the round: the survivors roll back to the state they began it
with and leave the group, the dead worker is replaced by ``WorkerSet.replace_dead_worker``
(its ``RestartPolicy``), and the group is rebuilt with rank 0 a survivor, whose state the
replacement receives; then the round is run again. ``close`` tears the group down.

Every rank must make the same number of all-reduces per round: the workers sample the
same number of rows (``num_envs_per_worker x rollout_fragment_length``) and cut them into
the same number of minibatches; a round whose workers hold different row counts raises
``ValueError`` on every rank.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

__all__ = [
    "GROUP_KEY",
    "AllReduceGroup",
    "ShardTrainResult",
    "find_address",
    "join_group",
    "learner_state",
    "leave_group",
    "sample_and_train",
    "train_on_shard",
]

GROUP_KEY = "all_reduce_group"
"""Key of the process-group membership in ``worker.shard_state`` (``{"rank", "world_size",
"generation"}``)."""

_OWN_STATE = ("action_rng", "sgd_rng")  # each worker keeps its own sampling and shuffling


def _shard_state(worker: Any) -> dict[str, Any]:
    state: dict[str, Any] | None = getattr(worker, "shard_state", None)
    if state is None:
        state = {}
        worker.shard_state = state
    return state


def find_address(worker: Any) -> tuple[str, int]:
    """``(host, port)`` for rank 0's TCP rendezvous: this node's IP address as Ray knows it
    and a TCP port the OS reports free now. Runs in the rank-0 worker."""
    import ray

    host = ray.util.get_node_ip_address()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port = int(s.getsockname()[1])
    return host, port


def learner_state(policy: Any) -> dict[str, Any]:
    """What every rank must share to step identically: ``policy.get_state()`` without the
    sampling and shuffling RNGs (weights, held modules, optimizer state, env steps, and the
    policy's own extras such as PPO's ``kl_coeff``)."""
    state = dict(policy.get_state())
    for key in _OWN_STATE:
        state.pop(key, None)
    return state


def _load_learner_state(policy: Any, shared: Mapping[str, Any]) -> None:
    own = policy.get_state()
    policy.set_state({**shared, **{k: own[k] for k in _OWN_STATE if k in own}})


def join_group(
    worker: Any, address: tuple[str, int], rank: int, world_size: int, timeout_s: float
) -> int:
    """Join the gloo process group at ``address`` (rank 0's ``find_address``) as ``rank`` of
    ``world_size`` (leaving any group this process is in first), build the optimizers,
    and take rank 0's learner state. Blocks until every rank has joined (at most
    ``timeout_s``). Returns ``rank``. Runs in the worker.

    Raises:
        TypeError: the worker's policy does not average its gradients over the group.
        RuntimeError (``torch.distributed.DistError``): the group did not form in time.
    """
    import torch.distributed as dist

    policy = worker.policy
    if not getattr(policy, "all_reduces_gradients", False):
        raise TypeError(
            f"{type(policy).__name__} does not all-reduce its gradients; data-parallel "
            "training on the rollout workers needs such a policy (algo ddppo)"
        )
    leave_group(worker)
    host, port = address
    dist.init_process_group(
        backend="gloo",
        init_method=f"tcp://{host}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )
    policy.build_optimizers()  # a rollout worker's policy trains here
    payload: list[Any] = [learner_state(policy) if rank == 0 else None]
    dist.broadcast_object_list(payload, src=0)
    if rank != 0:
        _load_learner_state(policy, payload[0])
    _shard_state(worker)[GROUP_KEY] = {"rank": rank, "world_size": world_size}
    return rank


def leave_group(worker: Any) -> bool:
    """Leave the process group (``destroy_process_group``) if this process is in one.
    Returns whether it was. Runs in the worker; never raises for a broken group."""
    import torch.distributed as dist

    _shard_state(worker).pop(GROUP_KEY, None)
    if not (dist.is_available() and dist.is_initialized()):
        return False
    try:
        dist.destroy_process_group()
    except (RuntimeError, ValueError):  # a group whose peers died: nothing left to free
        pass
    return True


@dataclass(frozen=True)
class ShardTrainResult:
    """One worker's round (:func:`train_on_shard`).

    Attributes:
        stats: learner stats of its last epoch (scalars; gradients were averaged over the
            group, the losses are of its own rows).
        count: env steps it sampled and trained on.
        episode_returns: float64 ``[E]``, returns of the episodes that ended in its rows.
        episode_lengths: int64 ``[E]``, their lengths (env steps).
        rank: its rank in the group; worker_index: its ``worker_index``.
        weights: rank 0's weights after the round (``get_weights``), None on other ranks.
    """

    stats: dict[str, float]
    count: int
    episode_returns: np.ndarray
    episode_lengths: np.ndarray
    rank: int
    worker_index: int
    weights: dict[str, np.ndarray] | None = field(default=None, repr=False)


def train_on_shard(worker: Any, batch: Any) -> ShardTrainResult:
    """One round of data-parallel SGD on this worker's postprocessed ``batch``:
    ``policy.train(batch, num_sgd_iter, sgd_minibatch_size)`` (from the policy's config),
    each optimizer step on gradients averaged over the group. The lr schedule's env steps
    advance by the rows of all ranks. If anything raises (a peer died: gloo raises, or the
    group's timeout passes) the policy is put back as it was before the round and the
    error propagates. Runs in the worker (the shard contract's ``fn(worker, item)``).

    Raises:
        RuntimeError: the worker is in no process group, or the group broke.
        ValueError: the ranks hold different numbers of rows.
    """
    import torch
    import torch.distributed as dist

    group = _shard_state(worker).get(GROUP_KEY)
    if group is None or not dist.is_initialized():
        raise RuntimeError(
            f"rollout worker {worker.worker_index} is in no process group; join_group first"
        )
    policy = worker.policy
    cfg = policy.config
    counts = torch.tensor([batch.count, -batch.count], dtype=torch.int64)
    dist.all_reduce(counts, op=dist.ReduceOp.MAX)
    if int(counts[0]) != -int(counts[1]):
        raise ValueError(
            f"the ranks hold between {-int(counts[1])} and {int(counts[0])} rows this round; "
            "every worker must sample the same number (num_envs_per_worker x "
            "rollout_fragment_length) so that they make the same number of all-reduces"
        )
    before = policy.get_state()
    try:
        policy.set_global_vars(
            {"timestep": policy.global_timestep + batch.count * group["world_size"]}
        )
        stats = policy.train(batch, cfg.num_sgd_iter, cfg.sgd_minibatch_size)
    except BaseException:
        policy.set_state(before)  # the round stops: back to where it began
        raise
    rank = int(group["rank"])
    return ShardTrainResult(
        stats={k: float(v) for k, v in stats.items() if np.ndim(v) == 0},
        count=int(batch.env_steps()),
        episode_returns=np.asarray(batch.episode_returns, dtype=np.float64),
        episode_lengths=np.asarray(batch.episode_lengths, dtype=np.int64),
        rank=rank,
        worker_index=int(worker.worker_index),
        weights=policy.get_weights() if rank == 0 else None,
    )


def sample_and_train(worker: Any) -> ShardTrainResult:
    """``train_on_shard(worker, worker.sample())``: sample one fragment (postprocessed:
    GAE) and train on it. Runs in the worker."""
    return train_on_shard(worker, worker.sample())


class AllReduceGroup:
    """The process group over ``workers.remote_workers`` and its rounds (module docstring).

    Args:
        workers: a ``WorkerSet`` with at least one remote worker whose policy all-reduces
            its gradients (``DDPPOPolicy``).
        timeout_s: the process group's timeout (joining, each all-reduce), seconds.
        node_id: the plan node running it (error messages, ``replace_dead_worker``).

    Attributes:
        generation: how many times the group was (re)built.
        num_aborted_rounds: rounds stopped by a worker's death.
    """

    def __init__(self, workers: Any, timeout_s: float, node_id: str = "ddppo") -> None:
        if not workers.remote_workers:
            raise ValueError(
                f"{node_id}: data-parallel training needs remote rollout workers (num_workers >= 1)"
            )
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self.node_id = node_id
        self.generation = 0
        self.num_aborted_rounds = 0
        self._ready = False

    # --- set-up and tear-down ---------------------------------------------------------
    def setup(self, first: int = 0) -> None:
        """(Re)build the group: the worker at position ``first`` is rank 0 (a survivor
        after a death), the others follow in worker order. A worker that dies while
        joining is replaced and the set-up is tried again.

        Raises:
            WorkerRestartError: a worker died more often than its restart policy allows.
            OperatorError: a worker failed to join (e.g. the timeout passed).
        """
        import ray
        from ray.exceptions import RayActorError

        while True:
            actors = list(self.workers.remote_workers)
            order = [first, *[i for i in range(len(actors)) if i != first]]
            try:
                address = ray.get(
                    actors[first].__ray_call__.remote(find_address), timeout=self.timeout_s
                )
                refs = [
                    actors[pos].__ray_call__.remote(
                        join_group, address, rank, len(actors), self.timeout_s
                    )
                    for rank, pos in enumerate(order)
                ]
                dead = self._wait(refs, order)
            except RayActorError as error:  # rank 0 died before it found an address
                dead = {first: error}
            if not dead:
                self.generation += 1
                self._ready = True
                return
            self._recover(dead)
            first = next(i for i in range(len(actors)) if i not in dead)

    def close(self) -> None:
        """Every live worker leaves the group (``destroy_process_group``). Idempotent; a
        dead or unreachable worker is skipped."""
        import ray

        self._ready = False
        refs = [w.__ray_call__.remote(leave_group) for w in self.workers.remote_workers]
        for ref in refs:
            try:
                ray.get(ref, timeout=self.timeout_s)
            except Exception:  # a worker that is gone has no group left to leave
                pass

    # --- rounds -----------------------------------------------------------------------
    def round(self) -> list[ShardTrainResult]:
        """One round: every worker samples a fragment and trains on it; the results in
        rank order. A death stops the round, rebuilds the group and runs it again.

        Raises:
            WorkerRestartError: a worker died more often than its restart policy allows.
            OperatorError: a worker's round raised (not a death: an env error, a loss
                error); the group is torn down first.
        """
        if not self._ready:
            self.setup()
        while True:
            actors = list(self.workers.remote_workers)
            refs = [w.__ray_call__.remote(sample_and_train) for w in actors]
            results: dict[int, ShardTrainResult] = {}
            dead = self._wait(refs, list(range(len(actors))), results)
            if not dead:
                return sorted(results.values(), key=lambda r: r.rank)
            self.num_aborted_rounds += 1
            self._recover(dead)
            survivor = next(i for i in range(len(actors)) if i not in dead)
            self.setup(first=survivor)

    def _wait(
        self,
        refs: list[Any],
        positions: list[int],
        results: dict[int, Any] | None = None,
    ) -> dict[int, BaseException]:
        """Wait for every reply (``positions[i]`` is the worker of ``refs[i]``); the dead
        workers by position. Task errors of live workers: when some worker died they are
        the broken group's (dropped); else the group is torn down and ``OperatorError``
        names the worker."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        from plangraph.flow.errors import OperatorError

        dead: dict[int, BaseException] = {}
        failed: dict[int, BaseException] = {}
        # A peer's death makes the others' gloo calls raise, or time out after timeout_s.
        budget = self.timeout_s + 60.0
        for ref, pos in zip(refs, positions, strict=True):
            try:
                value = ray.get(ref, timeout=budget)
            except RayActorError as error:
                dead[pos] = error
            except (RayTaskError, GetTimeoutError) as error:
                failed[pos] = error
            else:
                if results is not None:
                    results[pos] = value
        if failed and not dead:
            self.close()
            pos, first = next(iter(failed.items()))
            raise OperatorError(
                self.node_id,
                f"rollout worker {pos + 1} failed in its data-parallel round: "
                f"{type(first).__name__}: {str(first).strip().splitlines()[-1]}",
                str(first),
                f"rollout worker {pos + 1}",
            ) from first
        return dead

    def _recover(self, dead: Mapping[int, BaseException]) -> None:
        """Survivors leave the broken group; each dead worker is replaced (its restart
        policy's bound and backoff)."""
        self._ready = False
        self.close()
        for pos, error in sorted(dead.items()):
            self.workers.replace_dead_worker(pos, error, node_id=self.node_id)
        print(
            f"plangraph: {self.node_id}: rebuilding the process group without the dead "
            f"worker(s) {sorted(p + 1 for p in dead)}, replaced from a survivor's state",
            file=sys.stderr,
            flush=True,
        )
