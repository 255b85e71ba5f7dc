"""WorkerSet on real Ray: weight broadcast, counters, seeds, worker recreation."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import ray
import torch

from plangraph.algorithms.ppo import PPOConfig
from plangraph.ops.resources import WorkerSetParams
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.worker_set import WorkerSet
from tests.waiting import wait_until_dead

pytestmark = pytest.mark.usefixtures("ray_session")


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Same intra-op threading as the rollout actors (1), so twin samples match bit for bit."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _weights_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_remote_workers_sample_train_sync_and_recreate() -> None:

    cfg = PPOConfig(hiddens=(16, 16))
    ws = WorkerSet("CartPole-v1", 2, 3, 20, cfg, seed=11)
    try:
        # all workers start from the learner's weights
        remote = ray.get([w.get_weights.remote() for w in ws.remote_workers])
        assert all(_weights_equal(r, ws.local_policy.get_weights()) for r in remote)

        batch = ws.sample()
        assert batch.env_steps() == 2 * 3 * 20  # workers x sub-envs x fragment, once
        eps = batch["eps_id"]
        assert set(eps[:60] >> 40) == {1} and set(eps[60:] >> 40) == {2}
        # different workers sample different experience
        assert not np.array_equal(batch["obs"][:60], batch["obs"][60:])

        stats = ws.local_policy.train(batch, num_sgd_iter=2, sgd_minibatch_size=40)
        assert stats["num_env_steps_trained"] == 120
        ws.sync_weights({"timestep": 120})
        new = ws.local_policy.get_weights()
        timesteps = ray.get(
            [w.__ray_call__.remote(lambda w: w.policy.global_timestep) for w in ws.remote_workers]
        )
        assert timesteps == [120, 120]  # global vars ride with the weights
        remote = ray.get([w.get_weights.remote() for w in ws.remote_workers])
        assert all(_weights_equal(r, new) for r in remote)

        # recreate worker 2 (position 1): same index, current weights, fresh seeds stream
        ray.kill(ws.remote_workers[1], no_restart=True)
        wait_until_dead(ws.remote_workers[1])
        assert ws.probe_unhealthy_workers(timeout_s=10) == [1]
        assert ws.recreate_failed_workers(timeout_s=10) == [1]
        assert _weights_equal(ray.get(ws.remote_workers[1].get_weights.remote()), new)
        again = ws.sample()
        assert again.env_steps() == 120
        assert set(again["eps_id"][60:] >> 40) == {2}
        # the recreated worker replays worker 2's seeded stream from the start
        twin = RolloutWorker("CartPole-v1", 3, 20, cfg, seed=11, worker_index=2)
        twin.set_weights(new)
        expected = twin.sample()
        for key in ("obs", "actions", "rewards", "eps_id"):
            np.testing.assert_array_equal(again[key][60:], expected[key])
    finally:
        ws.stop()


def test_zero_workers_samples_locally_with_the_learner_policy() -> None:
    params = WorkerSetParams(
        num_workers=0, num_envs_per_worker=4, rollout_fragment_length=8, policy={"algo": "a2c"}
    )
    ws = WorkerSet.from_params(params, seed=1)
    try:
        assert ws.local_worker is not None and ws.remote_workers == []
        assert ws.local_worker.policy is ws.local_policy
        total = SampleBatch.concat_samples([ws.sample() for _ in range(3)])
        assert total.env_steps() == 3 * 4 * 8
        assert ws.local_worker.num_env_steps_sampled == 96
        ws.sync_weights({"timestep": 96})
        assert ws.local_policy.global_timestep == 96
    finally:
        ws.stop()


def test_from_params_refuses_a_fragment_length_the_compiler_has_not_sized() -> None:
    params = WorkerSetParams(num_workers=0, rollout_fragment_length="auto", policy=PPOConfig())
    with pytest.raises(ValueError, match='rollout_fragment_length "auto" is sized by the'):
        WorkerSet.from_params(params)
