"""Data-parallel training on the rollout workers: a ``torch.distributed`` process group
formed by a ``WorkerSet``'s rollout workers themselves, as DD-PPO's (Wijmans et al. 2020;
RLlib 1.x ``rllib/agents/ddppo/ddppo.py``). Everything here runs inside the rollout worker
actors (``fn(worker, ...)``, ``worker`` the ``RolloutWorker``), except :class:`Rendezvous`,
a small actor of its own:

* :func:`find_address`: rank 0 finds its own node's address and a free TCP port;
* :func:`join_group`: ``torch.distributed.init_process_group(backend="gloo",
  init_method="tcp://HOST:PORT", rank, world_size, timeout)``, then the learner state
  (weights, optimizer state, env steps, KL coefficient; not the sampling RNGs) of the
  lowest rank that trained before (a survivor; rank 0 at the start) is broadcast
  (``broadcast_object_list``), so every rank starts the group identical;
* :func:`train_on_shard`: one round on the worker's own rows: ``policy.train`` (the same
  learner code the driver's ``TrainOneStep`` runs) with a policy whose optimizer steps
  average the gradients over the group (``all_reduces_gradients``: DD-PPO's), rolled back
  if the round breaks;
* :func:`train_in_group`: the per-shard operator ``DDPPOTrainOnShard``'s
  ``fn(worker, item)``: forms (or re-forms, after a death) the group through the
  :class:`Rendezvous` and trains (its docstring: what a death does);
* :func:`leave_group`: ``destroy_process_group``.

Every rank must make the same number of all-reduces per round: the workers sample the
same number of rows (``num_envs_per_worker x rollout_fragment_length``) and cut them into
the same number of minibatches; a round whose workers hold different row counts raises
``ValueError`` on every rank.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

__all__ = [
    "GROUP_KEY",
    "TRAINED_KEY",
    "ProcessGroupError",
    "Rendezvous",
    "ShardTrainResult",
    "all_reduce",
    "find_address",
    "join_group",
    "learner_state",
    "leave_group",
    "train_in_group",
    "train_on_shard",
]

TRAINED_KEY = "all_reduce_trained"
"""Set in ``worker.shard_state`` once the worker has trained in a group: a survivor, whose
state a rebuilt group takes (``join_group``)."""

GROUP_KEY = "all_reduce_group"
"""Key of the process-group membership in ``worker.shard_state`` (``{"rank", "world_size",
"generation"}``)."""

_OWN_STATE = ("action_rng", "sgd_rng")  # each worker keeps its own sampling and shuffling


class ProcessGroupError(RuntimeError):
    """A collective of the process group failed: a peer left (its process died) or did not
    answer within the group's timeout. Raised (from torch's error) by the collectives of a
    round (:func:`all_reduce`), so that a broken group is told from an error of the loss,
    which torch also raises as ``RuntimeError``."""


def all_reduce(tensor: Any, op: Any = None) -> None:
    """``torch.distributed.all_reduce(tensor, op)`` (default SUM) in place over the default
    group.

    Raises:
        ProcessGroupError: the collective failed (a peer died or timed out).
    """
    import torch.distributed as dist

    try:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM if op is None else op)
    except RuntimeError as error:  # torch's DistError and gloo's plain RuntimeError
        raise ProcessGroupError(f"all-reduce failed: {error}") from error


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
    and take the learner state of the lowest rank that has trained before (a survivor of
    an earlier group; rank 0 when none has). Blocks until every rank has joined (at most
    ``timeout_s``). Returns the rank whose state was broadcast. Runs in the worker.

    Raises:
        TypeError: the worker's policy does not average its gradients over the group.
        RuntimeError (``torch.distributed.DistError``): the group did not form in time.
    """
    import torch
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
    state = _shard_state(worker)
    veterans = torch.zeros(world_size, dtype=torch.int64)
    veterans[rank] = 1 if state.get(TRAINED_KEY) else 0
    dist.all_reduce(veterans)
    src = int(torch.nonzero(veterans)[0]) if int(veterans.sum()) else 0
    payload: list[Any] = [learner_state(policy) if rank == src else None]
    dist.broadcast_object_list(payload, src=src)
    if rank != src:
        _load_learner_state(policy, payload[0])
    state[GROUP_KEY] = {"rank": rank, "world_size": world_size}
    return src


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
        trained: False for rows sampled in a round that was stopped (a peer died, the
            group was being formed): counted as sampled, not trained.
    """

    stats: dict[str, float]
    count: int
    episode_returns: np.ndarray
    episode_lengths: np.ndarray
    rank: int
    worker_index: int
    weights: dict[str, np.ndarray] | None = field(default=None, repr=False)
    trained: bool = True

    def env_steps(self) -> int:
        """Env steps the worker sampled for this result (what the driver counts)."""
        return self.count


def train_on_shard(worker: Any, batch: Any) -> ShardTrainResult:
    """One round of data-parallel SGD on this worker's postprocessed ``batch``:
    ``policy.train(batch, num_sgd_iter, sgd_minibatch_size)`` (from the policy's config),
    each optimizer step on gradients averaged over the group. The lr schedule's env steps
    advance by the rows of all ranks. If anything raises (a peer died: gloo raises, or the
    group's timeout passes) the policy is put back as it was before the round and the
    error propagates. Runs in the worker (the shard contract's ``fn(worker, item)``).

    Raises:
        RuntimeError: the worker is in no process group.
        ProcessGroupError: the group broke (a peer died, or its timeout passed).
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
    all_reduce(counts, op=dist.ReduceOp.MAX)
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


# --- the per-shard form: the group formed by the workers themselves --------------------


class Rendezvous:
    """A small Ray actor through which the rollout workers form their process group with no
    driver in the loop (the per-shard operator ``DDPPOTrainOnShard``): it holds the
    generation of the group to be in, and rank 0's address for each generation (rank 0
    finds and publishes it itself). A worker whose all-reduce failed (a peer died) marks
    its generation broken, so that every worker forms the next one on its next item."""

    def __init__(self) -> None:
        self._generation = 1
        self._addresses: dict[int, tuple[str, int]] = {}
        self._formed = 0

    def generation(self) -> tuple[int, int]:
        """``(generation to be in, generations formed so far)``."""
        return self._generation, self._formed

    def publish(self, generation: int, address: tuple[str, int]) -> None:
        self._addresses[generation] = address

    def address(self, generation: int) -> tuple[str, int] | None:
        return self._addresses.get(generation)

    def formed(self, generation: int) -> None:
        self._formed = max(self._formed, generation)

    def broken(self, generation: int) -> int:
        """Generation ``generation`` broke: the next one is to be formed (idempotent)."""
        if self._generation == generation:
            self._generation = generation + 1
        return self._generation


def _join_generation(
    worker: Any, rendezvous: Any, generation: int, world_size: int, timeout_s: float
) -> None:
    """Join the group of ``generation`` as rank ``worker_index - 1``: rank 0 publishes its
    own address, the others wait for it (at most ``timeout_s``); then ``join_group``."""
    import time

    import ray

    rank = int(worker.worker_index) - 1
    if rank == 0:
        address = find_address(worker)
        ray.get(rendezvous.publish.remote(generation, address))
    else:
        until = time.monotonic() + timeout_s
        while (found := ray.get(rendezvous.address.remote(generation))) is None:
            if time.monotonic() > until:
                raise TimeoutError(
                    f"rank 0 published no address for process group generation {generation} "
                    f"within {timeout_s:g} s"
                )
            time.sleep(0.05)
        address = found
    join_group(worker, address, rank, world_size, timeout_s)
    _shard_state(worker)[GROUP_KEY]["generation"] = generation
    rendezvous.formed.remote(generation)


def _sat_out(worker: Any, batch: Any) -> ShardTrainResult:
    """The result of an item this worker sampled but did not train on."""
    return ShardTrainResult(
        stats={},
        count=int(batch.env_steps()),
        episode_returns=np.asarray(batch.episode_returns, dtype=np.float64),
        episode_lengths=np.asarray(batch.episode_lengths, dtype=np.int64),
        rank=int(worker.worker_index) - 1,
        worker_index=int(worker.worker_index),
        trained=False,
    )


def train_in_group(
    worker: Any, batch: Any, rendezvous: Any, world_size: int, timeout_s: float
) -> ShardTrainResult:
    """The per-shard step of ``DDPPOTrainOnShard`` (``fn(worker, item)`` with the node's
    rendezvous actor, world size and timeout bound): be in the current generation's group
    (forming it with the peers when it is new), then :func:`train_on_shard`.

    A worker that finds its group broken (an all-reduce raised: a peer died; or the group
    did not form within ``timeout_s``) rolls back, leaves, marks the generation broken and
    returns its rows untrained (``trained=False``); on their next item all workers form the
    next generation, where a survivor's state is broadcast. A replacement worker started
    after a group had formed sits out its first item (the survivors have already returned
    theirs: the round is stopped), and joins with the others on the next. Runs in the
    worker.

    Raises:
        ValueError: the ranks hold different numbers of rows.
        Exception: whatever the loss raised (a ``RuntimeError`` of torch included: only a
            failed collective, ``ProcessGroupError``, counts as a broken group).
    """
    import ray

    state = _shard_state(worker)
    first_item = not state.get("seen")
    state["seen"] = True
    generation, formed = ray.get(rendezvous.generation.remote())
    group = state.get(GROUP_KEY)
    if group is None or group.get("generation") != generation or not _in_group():
        if first_item and formed > 0:
            return _sat_out(worker, batch)  # a replacement: its round was stopped
        try:
            _join_generation(worker, rendezvous, generation, world_size, timeout_s)
        except (RuntimeError, TimeoutError):  # the group did not form: try again next item
            leave_group(worker)
            ray.get(rendezvous.broken.remote(generation))
            return _sat_out(worker, batch)
    try:
        result = train_on_shard(worker, batch)
    except ProcessGroupError:  # a peer left mid-round (gloo raised, or its timeout passed)
        leave_group(worker)
        ray.get(rendezvous.broken.remote(generation))
        return _sat_out(worker, batch)
    state[TRAINED_KEY] = True
    return result


def _in_group() -> bool:
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_initialized())
