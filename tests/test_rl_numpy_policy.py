"""The numpy sampling policies act as the torch policies do, and keep torch out of workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from pydantic import Field

from plangraph.ops.models import MLPModel
from plangraph.ops.policies import (
    A2CConfig,
    APPOConfig,
    DQNConfig,
    IMPALAConfig,
    PPOConfig,
)
from plangraph.rl.numpy_policy import (
    NumpyActorCriticPolicy,
    NumpyDQNPolicy,
    make_numpy_policy,
    numpy_inference_supported,
)
from plangraph.rl.policies import make_policy

ROOT = Path(__file__).resolve().parent.parent
CARTPOLE_OBS = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
IMAGE_OBS = gym.spaces.Box(0, 255, (3, 5, 2), np.uint8)
ACTIONS = gym.spaces.Discrete(3)
ACTOR_CRITIC = [A2CConfig(), PPOConfig(hiddens=(32, 16)), IMPALAConfig(), APPOConfig()]


def _mlp(config: Any) -> Any:
    """``config`` with its default model written out as an MLP: an ``[H, W, C]``
    observation gets a CNN by default, which numpy inference does not serve."""
    model = MLPModel(hiddens=config.hiddens, activation=config.activation)
    return config.model_copy(update={"model": model})


def _obs(space: gym.spaces.Box, n: int, seed: int = 0) -> np.ndarray:
    space.seed(seed)
    return np.stack([space.sample() for _ in range(n)])


def _pair(config: Any, obs_space: gym.spaces.Box, seed: int = 5) -> tuple[Any, Any]:
    torch_policy = make_policy(obs_space, ACTIONS, config, seed)
    numpy_policy = make_numpy_policy(obs_space, ACTIONS, config, seed)
    numpy_policy.set_weights(torch_policy.get_weights())
    return torch_policy, numpy_policy


@pytest.mark.parametrize("obs_space", [CARTPOLE_OBS, IMAGE_OBS], ids=["vector", "uint8-image"])
@pytest.mark.parametrize("config", ACTOR_CRITIC, ids=lambda c: c.algo)
def test_actor_critic_acts_and_values_as_the_torch_policy(
    config: Any, obs_space: gym.spaces.Box
) -> None:
    if obs_space is IMAGE_OBS:
        config = _mlp(config)
    torch_policy, numpy_policy = _pair(config, obs_space)
    assert isinstance(numpy_policy, NumpyActorCriticPolicy)
    assert numpy_policy.num_dist_inputs == torch_policy.num_dist_inputs == ACTIONS.n
    obs = _obs(obs_space, 64)
    t_actions, t_extra = torch_policy.compute_actions(obs)
    n_actions, n_extra = numpy_policy.compute_actions(obs)
    # Same seeded sampler, logits equal up to rounding: the same draws.
    np.testing.assert_array_equal(n_actions, t_actions)
    for key in ("action_logp", "action_dist_inputs"):
        assert n_extra[key].dtype == np.float32
        np.testing.assert_allclose(n_extra[key], t_extra[key], rtol=1e-5, atol=1e-5)
    greedy_t, _ = torch_policy.compute_actions(obs, explore=False)
    greedy_n, _ = numpy_policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(greedy_n, greedy_t)
    values = numpy_policy.compute_values(obs)
    assert values.shape == (64,) and values.dtype == np.float32
    np.testing.assert_allclose(values, torch_policy.compute_values(obs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("config", [DQNConfig(), DQNConfig(activation="tanh", hiddens=(8,))])
def test_dqn_acts_as_the_torch_policy(config: DQNConfig) -> None:
    torch_policy, numpy_policy = _pair(config, CARTPOLE_OBS)
    assert isinstance(numpy_policy, NumpyDQNPolicy)
    obs = _obs(CARTPOLE_OBS, 32)
    np.testing.assert_allclose(
        numpy_policy.compute_q_values(obs), torch_policy.compute_q_values(obs), rtol=1e-5, atol=1e-5
    )
    for timestep in (0, config.epsilon_timesteps // 3, 10 * config.epsilon_timesteps):
        for p in (torch_policy, numpy_policy):
            p.set_global_vars({"timestep": timestep})
        assert numpy_policy.epsilon == torch_policy.epsilon
        np.testing.assert_array_equal(
            numpy_policy.compute_actions(obs)[0], torch_policy.compute_actions(obs)[0]
        )


def test_sampling_states_are_interchangeable_with_the_torch_policy() -> None:
    torch_policy, numpy_policy = _pair(PPOConfig(), CARTPOLE_OBS)
    obs = _obs(CARTPOLE_OBS, 16)
    numpy_policy.compute_actions(obs)
    numpy_policy.set_global_vars({"timestep": 777})
    torch_policy.set_sampling_state(numpy_policy.get_sampling_state())
    assert torch_policy.global_timestep == 777
    np.testing.assert_array_equal(
        torch_policy.compute_actions(obs)[0], numpy_policy.compute_actions(obs)[0]
    )
    fresh = make_numpy_policy(CARTPOLE_OBS, ACTIONS, PPOConfig(), seed=99)
    fresh.set_sampling_state(torch_policy.get_sampling_state())
    np.testing.assert_array_equal(
        fresh.get_weights()["pi_net.0.weight"], torch_policy.get_weights()["pi_net.0.weight"]
    )
    np.testing.assert_array_equal(
        fresh.compute_actions(obs)[0], torch_policy.compute_actions(obs)[0]
    )


def test_it_refuses_to_act_without_weights_and_rejects_foreign_weights() -> None:
    policy = make_numpy_policy(CARTPOLE_OBS, ACTIONS, PPOConfig(), seed=0)
    with pytest.raises(RuntimeError, match="no weights yet"):
        policy.compute_actions(_obs(CARTPOLE_OBS, 2))
    weights = make_policy(CARTPOLE_OBS, ACTIONS, PPOConfig(), 0).get_weights()
    with pytest.raises(ValueError, match=re.escape("missing ['pi_net.0.bias']")):
        policy.set_weights({k: v for k, v in weights.items() if k != "pi_net.0.bias"})
    bad = {**weights, "vf_net.0.weight": np.zeros((64, 5), np.float32)}
    with pytest.raises(ValueError, match=re.escape("'vf_net.0.weight' has shape (64, 5)")):
        policy.set_weights(bad)


class _PPOWithCNN(PPOConfig):
    conv_filters: tuple[int, ...] = Field((16, 32), description="a network these MLPs are not")


def test_support_is_limited_to_the_networks_it_knows() -> None:
    assert numpy_inference_supported(PPOConfig(), CARTPOLE_OBS, ACTIONS)
    assert numpy_inference_supported(_mlp(DQNConfig(n_step=3)), IMAGE_OBS, ACTIONS)
    # An image's default model is a CNN: sampled with torch.
    assert not numpy_inference_supported(DQNConfig(), IMAGE_OBS, ACTIONS)
    # Continuous actions, a non-Box observation, a config field describing another model.
    box_actions = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert not numpy_inference_supported(PPOConfig(), CARTPOLE_OBS, box_actions)
    assert not numpy_inference_supported(PPOConfig(), gym.spaces.Discrete(4), ACTIONS)
    assert not numpy_inference_supported(_PPOWithCNN(), CARTPOLE_OBS, ACTIONS)
    with pytest.raises(ValueError, match="no numpy policy"):
        make_numpy_policy(CARTPOLE_OBS, box_actions, PPOConfig())


WORKER_WITHOUT_TORCH = """
import sys
import numpy as np
from plangraph.rl.rollout_worker import RolloutWorker

worker = RolloutWorker("CartPole-v1", 4, 16, {"algo": "ppo"}, seed=3, worker_index=1,
                       numpy_inference=True, torch_threads=1)
worker.set_weights(dict(np.load(sys.argv[1])))
batch = worker.sample()
print(type(worker.policy).__name__, "torch" in sys.modules, batch.count)
keys = ("actions", "action_logp", "action_dist_inputs", "vf_preds", "advantages")
np.savez(sys.argv[2], **{k: batch[k] for k in keys})
"""


def test_a_numpy_worker_never_imports_torch_and_samples_as_a_torch_worker(
    tmp_path: Path,
) -> None:
    from plangraph.rl.rollout_worker import RolloutWorker

    twin = RolloutWorker("CartPole-v1", 4, 16, {"algo": "ppo"}, seed=3, worker_index=1)
    learner = make_policy(twin.observation_space, twin.action_space, PPOConfig(), seed=0)
    np.savez(tmp_path / "weights.npz", **learner.get_weights())
    twin.set_weights(learner.get_weights())
    files = ("weights.npz", "batch.npz")
    proc = subprocess.run(
        [sys.executable, "-c", WORKER_WITHOUT_TORCH, *(str(tmp_path / f) for f in files)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["NumpyActorCriticPolicy", "False", "64"]
    expected = twin.sample()
    got = np.load(tmp_path / "batch.npz")
    np.testing.assert_array_equal(got["actions"], expected["actions"])
    assert got["action_dist_inputs"].shape == (64, 2)
    for key in ("action_logp", "action_dist_inputs", "vf_preds", "advantages"):
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-4, atol=1e-5)
