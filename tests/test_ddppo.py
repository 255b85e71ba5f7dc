"""DD-PPO (issue 36): data-parallel PPO on the rollout workers over a gloo process group.

On real Ray actors, real gymnasium CartPole and real torch.distributed (gloo on localhost),
through the plan ``plans/ddppo.json`` (``ParallelRollouts(mode="raw") ->
DDPPOTrainOnShard -> GatherShards(mode="batch") -> DDPPOReport``):

* every worker's weights and optimizer state are bitwise identical after every round, and
  they change (training happens), also when a worker started from other weights (the
  group's set-up broadcasts rank 0's); the driver's copy follows rank 0's;
* one averaged step equals a driver-side step on the mean of the workers' own gradients;
* a worker killed with ``ray.kill`` (while a round runs, and between rounds) is replaced:
  the round stops, the group is rebuilt with the replacement, which takes a survivor's
  state, and the run goes on, identical;
* the run's teardown leaves every worker out of any process group;
* the compiler refuses ``DDPPOTrainOnShard`` without remote workers (PG205), on a
  multi-agent worker set (PG130: its shards are MultiAgentBatch) and with a policy that
  does not all-reduce (PG170).
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
from plangraph.rl.all_reduce import find_address, join_group, learner_state, train_on_shard
from plangraph.rl.envs import ship_code
from plangraph.rl.worker_set import WorkerSet
from plangraph.runtime.algorithm import Algorithm

PLANS = Path(__file__).resolve().parent.parent / "plans"

SMALL = {  # 2 workers x 2 envs x 32 steps: 64 rows per worker per round
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 32,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 2,
    "process_group_timeout_s": 20.0,
}
ROUND = 2 * 2 * 32

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(300)]


@pytest.fixture
def algos() -> Iterator[list[Algorithm]]:
    made: list[Algorithm] = []
    yield made
    for algo in made:
        algo.stop()


def _build(algos: list[Algorithm], seed: int = 0, **config: Any) -> Algorithm:
    algo = plangraph.build(
        plangraph.compile(PLANS / "ddppo.json", config={**SMALL, **config}), seed=seed
    )
    algos.append(algo)
    return algo


def _workers(algo: Algorithm) -> WorkerSet:
    ws: WorkerSet = algo.ctx.worker_sets["workers"]
    return ws


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


def test_every_worker_holds_the_same_weights_after_every_round(algos: list[Algorithm]) -> None:
    import ray

    algo = _build(algos)
    ws = _workers(algo)
    # Worker 2 starts from other weights: forming the group must broadcast rank 0's.
    other = {k: v + np.float32(0.5) for k, v in ws.local_policy.get_weights().items()}
    ray.get(ws.remote_workers[1].set_weights.remote(other))
    previous = ws.local_policy.get_weights()
    for i in range(4):
        result = algo.train()
        assert result["num_env_steps_sampled"] == (i + 1) * ROUND
        assert result["counters"]["num_env_steps_trained"] == (i + 1) * ROUND
        assert result["learner"]["num_grad_steps"] == 2 * 2  # per worker: 2 epochs x 2
        states = _states(ws)
        # weights, Adam moments and step counts, env steps, KL coefficient: bit for bit
        assert_bitwise_equal(states[0], states[1])
        assert states[0]["global_timestep"] == (i + 1) * ROUND
        assert any(not np.array_equal(states[0]["weights"][k], previous[k]) for k in previous)
        # the driver holds no learner; its copy follows rank 0's (checkpoints, evaluation)
        assert_bitwise_equal(ws.local_policy.get_weights(), states[0]["weights"])
        previous = states[0]["weights"]


def test_the_averaged_step_is_the_mean_of_the_workers_gradients() -> None:
    """One round of one full-batch epoch: every worker's new weights are one optimizer
    step, taken in the driver, on the mean of the two workers' own gradients."""
    import ray

    policy = {"algo": "ddppo", "lr": 3e-3, "grad_clip": None, "process_group_timeout_s": 20.0}
    ws = WorkerSet("CartPole-v1", 2, 2, 32, policy, seed=5, learner_device="cpu")
    try:
        actors = ws.remote_workers
        address = ray.get(actors[0].__ray_call__.remote(find_address))
        ray.get(
            [a.__ray_call__.remote(join_group, address, i, 2, 20.0) for i, a in enumerate(actors)]
        )
        start = _states(ws)[0]
        both = ray.get([a.__ray_call__.remote(_grads_then_train) for a in actors])
        after = _states(ws)
        assert_bitwise_equal(after[0], after[1])
        learner = ws.local_policy
        learner.set_state({**learner.get_state(), **copy.deepcopy(start)})
        learner.set_global_vars({"timestep": ROUND})
        learner.apply_gradients([(a + b) / 2 for a, b in zip(both[0], both[1], strict=True)])
        expected = learner.get_weights()
        for k in expected:
            np.testing.assert_allclose(after[0]["weights"][k], expected[k], rtol=1e-5, atol=1e-6)
            assert not np.array_equal(after[0]["weights"][k], start["weights"][k])
        ray.get([a.__ray_call__.remote(_leave) for a in actors])
    finally:
        ws.stop()


def _grads_then_train(worker: Any) -> list[np.ndarray]:
    """This worker's own gradients on a fresh fragment (before any step), then its round
    on the same fragment (``train_on_shard``, all-reducing with its peer)."""
    batch = worker.sample()
    grads, _ = worker.policy.compute_gradients(batch)
    train_on_shard(worker, batch)
    return [np.asarray(g, dtype=np.float64) for g in grads]


def _leave(worker: Any) -> None:
    from plangraph.rl.all_reduce import leave_group

    leave_group(worker)


def test_a_killed_worker_is_replaced_and_the_group_rebuilt(algos: list[Algorithm]) -> None:
    import ray

    algo = _build(algos)
    ws = _workers(algo)
    algo.train()
    old = ws.remote_workers[1]
    # Killed while a round runs (or just before it: either way that round cannot finish).
    killer = threading.Timer(0.3, lambda: ray.kill(old, no_restart=True))
    killer.start()
    result = algo.train()
    killer.join()
    while ws.num_worker_restarts == 0:  # the kill came after that round: the next sees it
        result = algo.train()
    assert ws.remote_workers[1] is not old
    assert result["counters"]["num_worker_restarts"] == 1
    # the stopped round: its rows are counted as sampled, not as trained
    stopped = result["num_env_steps_sampled"] - result["counters"]["num_env_steps_trained"]
    assert stopped == ROUND
    survivor = _states(ws)[0]
    result = algo.train()  # the group is rebuilt with the replacement: a whole round
    assert result["num_env_steps_sampled"] - result["counters"]["num_env_steps_trained"] == ROUND
    states = _states(ws)
    assert_bitwise_equal(states[0], states[1])
    assert states[0]["global_timestep"] == survivor["global_timestep"] + ROUND
    # Rank 0 killed between rounds: the survivor (rank 1) is the one whose state goes on.
    ray.kill(ws.remote_workers[0], no_restart=True)
    for _ in range(2):
        result = algo.train()
    assert ws.num_worker_restarts == 2
    states = _states(ws)
    assert_bitwise_equal(states[0], states[1])
    assert_bitwise_equal(ws.local_policy.get_weights(), states[0]["weights"])


def test_a_checkpoint_warns_that_the_workers_optimizer_state_is_not_saved(
    algos: list[Algorithm], tmp_path: Path
) -> None:
    """The workers train, so their Adam moments are the learner's optimizer state, and a
    checkpoint (the driver's policy, the workers' sampling state) does not hold them: a
    resumed run starts them afresh. Saving one says so (``ResumeWarning``)."""
    from plangraph.rl.worker_set import ResumeWarning

    algo = _build(algos)
    algo.train()
    with pytest.warns(ResumeWarning) as caught:
        algo.save(tmp_path / "ckpt")
    messages = [str(w.message) for w in caught if issubclass(w.category, ResumeWarning)]
    assert any(
        m.startswith(
            "rollout workers 1, 2: the policy copy's optimizer state (it trains on the "
            "worker, as DD-PPO's: e.g. Adam's moments and step count) is not in the checkpoint"
        )
        for m in messages
    ), messages


def test_the_run_leaves_no_process_group_behind(algos: list[Algorithm]) -> None:
    import ray

    algo = _build(algos, seed=1)
    ws = _workers(algo)
    algo.train()
    workers = list(ws.remote_workers)
    assert ray.get([w.__ray_call__.remote(_is_in_group) for w in workers]) == [True, True]
    for close in list(algo.ctx.closers):  # what stopping the run does first
        close()
    assert ray.get([w.__ray_call__.remote(_is_in_group) for w in workers]) == [False, False]


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
