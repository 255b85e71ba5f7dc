"""DD-PPO (issue 36): data-parallel PPO on the rollout workers over a gloo process group.

On real Ray actors, real gymnasium CartPole and real torch.distributed (gloo on localhost):

* every worker's weights and optimizer state are bitwise identical after every round,
  and they do change (training happens), also when a worker started from other weights
  (the set-up broadcasts rank 0's);
* a worker killed with ``ray.kill`` (between rounds, and while a round is running) is
  replaced: the round stops, the group is rebuilt with the replacement, which gets a
  survivor's weights, and the rounds go on identical;
* one averaged step equals a driver-side step on the mean of the workers' own gradients;
* a round that raises (an env error, not a death) tears the group down;
* the plan ``plans/ddppo.json`` runs through ``plangraph.build`` (driver metrics gathered,
  the driver's policy follows rank 0's) and survives a killed worker;
* the compiler refuses ``DDPPOTrain`` without remote workers (PG205), on a multi-agent
  worker set (PG206) and with a policy that does not all-reduce (PG170).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plangraph
from plangraph.compiler import analyze
from plangraph.flow.errors import OperatorError
from plangraph.rl.all_reduce import AllReduceGroup, learner_state, train_on_shard
from plangraph.rl.envs import ship_code
from plangraph.rl.worker_set import WorkerSet

PLANS = Path(__file__).resolve().parent.parent / "plans"

POLICY = {
    "algo": "ddppo",
    "lr": 3e-3,
    "num_sgd_iter": 2,
    "sgd_minibatch_size": 32,
    "process_group_timeout_s": 20.0,
}

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(300)]


@pytest.fixture
def workers() -> Iterator[WorkerSet]:
    ws = WorkerSet("CartPole-v1", 2, 2, 32, POLICY, seed=3, learner_device="cpu")
    yield ws
    ws.stop()


def _is_in_group(worker: Any) -> bool:
    import torch.distributed as dist

    return bool(dist.is_initialized())


def _states(ws: WorkerSet) -> list[dict[str, Any]]:
    import ray

    return ray.get([w.__ray_call__.remote(_learner_state) for w in ws.remote_workers])


def _learner_state(worker: Any) -> dict[str, Any]:
    return learner_state(worker.policy)


def _flat(tree: Any) -> list[np.ndarray]:
    """Every array and number of a state tree (torch tensors as numpy), in a fixed order."""
    import torch

    if isinstance(tree, dict):
        return [a for k in sorted(tree, key=str) for a in _flat(tree[k])]
    if isinstance(tree, list | tuple):
        return [a for v in tree for a in _flat(v)]
    if isinstance(tree, torch.Tensor):
        return [tree.detach().cpu().numpy()]
    return [np.asarray(tree)]


def assert_bitwise_equal(a: Any, b: Any) -> None:
    fa, fb = _flat(a), _flat(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        # bytes, not values: -0.0 vs 0.0 or a NaN payload would count as a difference
        assert x.tobytes() == y.tobytes()


def test_every_worker_holds_the_same_weights_after_every_round(workers: WorkerSet) -> None:
    import ray

    # Worker 2 starts from other weights: the set-up must broadcast rank 0's.
    other = {
        k: np.asarray(v) + np.float32(0.5)
        for k, v in ray.get(workers.remote_workers[0].get_weights.remote()).items()
    }
    ray.get(workers.remote_workers[1].set_weights.remote(other))
    group = AllReduceGroup(workers, 20.0, node_id="t")
    try:
        group.setup()
        before = _states(workers)
        assert_bitwise_equal(before[0]["weights"], before[1]["weights"])
        previous = before[0]["weights"]
        for _ in range(4):
            results = group.round()
            assert [r.rank for r in results] == [0, 1]
            assert [r.count for r in results] == [64, 64]
            states = _states(workers)
            # weights, Adam moments and step counts, env steps, KL coefficient: bit for bit
            assert_bitwise_equal(states[0], states[1])
            assert any(
                not np.array_equal(states[0]["weights"][k], previous[k]) for k in previous
            ), "a round must change the weights"
            assert results[0].weights is not None
            assert_bitwise_equal(results[0].weights, states[0]["weights"])
            previous = states[0]["weights"]
        # the lr schedule's env steps count every worker's rows
        assert states[0]["global_timestep"] == 4 * 2 * 64
        # the workers trained on different rows: their losses differ, their steps do not
        assert results[0].stats["policy_loss"] != results[1].stats["policy_loss"]
    finally:
        group.close()
    assert ray.get([w.__ray_call__.remote(_is_in_group) for w in workers.remote_workers]) == [
        False,
        False,
    ]


def test_the_averaged_step_is_the_mean_of_the_workers_gradients() -> None:
    """One round of one full-batch epoch: every worker's new weights are one optimizer
    step, taken in the driver, on the mean of the two workers' own gradients."""
    import ray

    ws = WorkerSet(
        "CartPole-v1",
        2,
        2,
        32,
        {**POLICY, "num_sgd_iter": 1, "sgd_minibatch_size": 0, "grad_clip": None},
        seed=5,
        learner_device="cpu",
    )
    group = AllReduceGroup(ws, 20.0, node_id="t")
    try:
        group.setup()
        start = _states(ws)[0]
        both = ray.get([w.__ray_call__.remote(_grads_then_train) for w in ws.remote_workers])
        after = _states(ws)[0]["weights"]
        policy = ws.local_policy
        policy.set_state({**policy.get_state(), **copy.deepcopy(start)})
        policy.set_global_vars({"timestep": 2 * 64})
        policy.apply_gradients([(a + b) / 2 for a, b in zip(both[0], both[1], strict=True)])
        expected = policy.get_weights()
        for k in expected:
            np.testing.assert_allclose(after[k], expected[k], rtol=1e-5, atol=1e-6)
            assert not np.array_equal(after[k], start["weights"][k])
    finally:
        group.close()
        ws.stop()


def _grads_then_train(worker: Any) -> list[np.ndarray]:
    """This worker's own gradients on a fresh fragment (before any step), then its round
    on the same fragment (``train_on_shard``, all-reducing with its peer)."""
    batch = worker.sample()
    grads, _ = worker.policy.compute_gradients(batch)
    train_on_shard(worker, batch)
    return [np.asarray(g, dtype=np.float64) for g in grads]


def test_a_killed_worker_is_replaced_and_the_group_rebuilt(workers: WorkerSet) -> None:
    import ray

    group = AllReduceGroup(workers, 20.0, node_id="t")
    try:
        group.round()
        old = workers.remote_workers[1]
        # Killed while a round runs (or just before: either way the round cannot finish).
        killer = threading.Timer(0.2, lambda: ray.kill(old, no_restart=True))
        killer.start()
        rounds = 0
        while workers.num_worker_restarts == 0 and rounds < 20:
            group.round()
            rounds += 1
        killer.join()
        assert workers.num_worker_restarts == 1
        assert group.num_aborted_rounds == 1
        assert group.generation == 2
        assert workers.remote_workers[1] is not old
        survivor = _states(workers)[0]
        states = _states(workers)
        assert_bitwise_equal(states[0], states[1])  # the replacement took rank 0's state
        assert_bitwise_equal(survivor, states[1])
        for _ in range(2):  # and the run goes on, identical
            group.round()
            states = _states(workers)
            assert_bitwise_equal(states[0], states[1])
        # Between rounds too: the next round finds it dead, stops, and rebuilds.
        ray.kill(workers.remote_workers[0], no_restart=True)
        group.round()
        assert workers.num_worker_restarts == 2 and group.generation == 3
        states = _states(workers)
        assert_bitwise_equal(states[0], states[1])
    finally:
        group.close()


def _small_plan(**config: Any) -> Any:
    return plangraph.compile(
        PLANS / "ddppo.json",
        config={
            "num_envs_per_worker": 2,
            "rollout_fragment_length": 32,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 2,
            "process_group_timeout_s": 20.0,
            **config,
        },
    )


def test_the_plan_trains_on_the_workers_and_survives_a_killed_worker() -> None:
    import ray

    algo = plangraph.build(_small_plan(), seed=0)
    try:
        r1 = algo.train()
        assert r1["num_env_steps_sampled"] == 2 * 2 * 32
        assert r1["counters"]["num_env_steps_trained"] == 2 * 2 * 32
        assert "policy_loss" in r1["learner"]
        assert r1["learner"]["num_grad_steps"] == 2 * 2  # per worker: 2 epochs x 2 minibatches
        ws = algo.ctx.worker_sets["workers"]
        weights = ray.get([w.get_weights.remote() for w in ws.remote_workers])
        assert_bitwise_equal(weights[0], weights[1])
        # the driver holds no learner; its copy follows rank 0 (checkpoints, evaluation)
        assert_bitwise_equal(ws.local_policy.get_weights(), weights[0])
        ray.kill(ws.remote_workers[0], no_restart=True)
        r2 = algo.train()
        r3 = algo.train()
        assert ws.num_worker_restarts == 1
        assert r3["counters"]["num_worker_restarts"] == 1
        # the stopped round is not counted: every counted round is a whole one
        assert r3["num_env_steps_sampled"] == 3 * 2 * 2 * 32
        assert r2["num_env_steps_sampled"] == 2 * 2 * 2 * 32
        weights = ray.get([w.get_weights.remote() for w in ws.remote_workers])
        assert_bitwise_equal(weights[0], weights[1])
    finally:
        algo.stop()


def test_a_round_that_raises_tears_the_group_down() -> None:
    """An env that raises in ``step`` is not a death: the round raises ``OperatorError``
    naming the node and the worker, and every worker has left the process group."""
    import ray

    from tests.crash_envs import RAISE_ON_STEP

    ws = WorkerSet(
        f"tests.crash_envs:{RAISE_ON_STEP}", 2, 1, 8, POLICY, seed=0, learner_device="cpu"
    )
    group = AllReduceGroup(ws, 5.0, node_id="train")
    try:
        group.setup()
        assert ray.get([w.__ray_call__.remote(_is_in_group) for w in ws.remote_workers]) == [
            True,
            True,
        ]
        with pytest.raises(OperatorError) as info:
            group.round()
        assert info.value.node_id == "train"
        assert "rollout worker" in str(info.value)
        assert ws.num_worker_restarts == 0
        assert ray.get([w.__ray_call__.remote(_is_in_group) for w in ws.remote_workers]) == [
            False,
            False,
        ]
    finally:
        group.close()
        ws.stop()


# The worker-side probes above run in the rollout worker actors, which cannot import this
# test module by name: its code travels by value (as a local env's does).
ship_code(_learner_state)


def _codes(doc: dict[str, Any]) -> list[str]:
    return [d.code for d in analyze(doc).diagnostics]


def test_the_compiler_refuses_ddppo_train_without_workers_or_all_reduce() -> None:
    doc = json.loads((PLANS / "ddppo.json").read_text())
    assert _codes(doc) == []
    no_workers = copy.deepcopy(doc)
    no_workers["config"]["num_workers"] = 0
    assert "PG205" in _codes(no_workers)
    ppo = copy.deepcopy(doc)
    policy = ppo["resources"]["workers"]["params"]["policy"]
    ppo["resources"]["workers"]["params"]["policy"] = {
        k: v
        for k, v in policy.items()
        if k not in ("num_sgd_iter", "sgd_minibatch_size", "process_group_timeout_s")
    } | {"algo": "ppo"}
    assert "PG170" in _codes(ppo)
