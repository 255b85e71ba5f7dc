"""Models as data: MLP and CNN policies from the plan's model config; uint8 frames stay
uint8 from the env to the learner."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import ray
import torch

import plangraph
from plangraph.algorithms.dqn import DQNConfig
from plangraph.algorithms.ppo import PPOConfig
from plangraph.compiler.env_spaces import EnvSpaces, SpaceInfo
from plangraph.compiler.semantic_checks import space_problems
from plangraph.rl.models import (
    ActorCritic,
    CNNEncoder,
    EncoderActorCritic,
    EncoderQNetwork,
    soft_update,
)
from plangraph.rl.policies import make_policy
from plangraph.rl.policy import to_tensor
from plangraph.rl.replay_buffer import ReplayBuffer, replay_nbytes
from plangraph.rl.rollout_worker import RolloutWorker, sample_row_layout
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch


class SideImageEnv(gym.Env[np.ndarray, np.int64]):
    """uint8 ``[size, size, 1]`` frames with one bright square, in the left or the right
    half; reward 1 for the action naming that half (0 left, 1 right); 8 steps an episode.
    An MLP on pixels could learn it too; here it checks that a CNN can."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self.observation_space = gym.spaces.Box(0, 255, (size, size, 1), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self._side = 0
        self._t = 0

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 1), np.uint8)
        half = self.size // 2
        row = int(self.np_random.integers(0, self.size - 3))
        col = int(self.np_random.integers(0, half - 3)) + self._side * half
        frame[row : row + 3, col : col + 3] = 255
        return frame

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        self._side = int(self.np_random.integers(0, 2))
        return self._frame(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward = float(int(action) == self._side)
        self._t += 1
        self._side = int(self.np_random.integers(0, 2))
        return self._frame(), reward, False, self._t >= 8, {}


class AtariLikeEnv(gym.Env[np.ndarray, np.int64]):
    """uint8 ``[84, 84, 4]`` frames (the shape of stacked Atari frames); 6 actions."""

    observation_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    action_space = gym.spaces.Discrete(6)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.integers(0, 256, (84, 84, 4), dtype=np.uint8), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        obs = self.np_random.integers(0, 256, (84, 84, 4), dtype=np.uint8)
        return obs, float(action == 1), False, self._t >= 5, {}


def test_a_cnn_policy_learns_a_small_image_task() -> None:
    config = PPOConfig(
        model={"type": "cnn", "conv_filters": [[8, 4, 2], [16, 3, 1]], "hiddens": [32]},
        lr=1e-3,
        gamma=0.0,  # each step's reward depends on its frame only
    )
    worker = RolloutWorker(SideImageEnv, 4, 32, config, seed=0, torch_threads=1)
    assert isinstance(worker.policy.model, EncoderActorCritic)
    assert isinstance(worker.policy.model.pi_encoder, CNNEncoder)
    assert worker.policy.model.vf_encoder is None  # a CNN shares its trunk by default
    means = []
    for _ in range(12):
        batch = worker.sample()
        assert batch[_SB.OBS].dtype == np.uint8
        means.append(float(batch[_SB.REWARDS].mean()))
        worker.policy.train(batch, num_sgd_iter=4, sgd_minibatch_size=64)
    assert means[0] < 0.65  # chance: 0.5
    assert np.mean(means[-3:]) > 0.9


def test_the_nature_cnn_is_the_default_for_image_observations() -> None:
    obs = AtariLikeEnv.observation_space
    ppo = make_policy(obs, gym.spaces.Discrete(6), {"algo": "ppo"})
    assert isinstance(ppo.model, EncoderActorCritic)
    convs = [m for m in ppo.model.pi_encoder.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == [
        (32, 8, 4),
        (64, 4, 2),
        (64, 3, 1),
    ]
    dense = [m for m in ppo.model.pi_encoder.modules() if isinstance(m, torch.nn.Linear)]
    assert [(d.in_features, d.out_features) for d in dense] == [(64 * 7 * 7, 512)]
    frames = np.random.default_rng(0).integers(0, 256, (3, 84, 84, 4), dtype=np.uint8)
    inputs, values = ppo.model.pi_vf(to_tensor(frames))
    assert inputs.shape == (3, 6) and values.shape == (3,)
    # uint8 frames are scaled to [0, 1]: the same features as float frames / 255
    as_float = torch.from_numpy(frames.astype(np.float32) / 255.0)
    enc = ppo.model.pi_encoder
    torch.testing.assert_close(
        enc(to_tensor(frames)), enc.dense.net(enc.convs(as_float.permute(0, 3, 1, 2)))
    )
    dqn = make_policy(obs, gym.spaces.Discrete(6), {"algo": "dqn"})
    assert isinstance(dqn.model, EncoderQNetwork)


def test_shared_or_separate_value_network() -> None:
    obs, act = gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2)
    separate = make_policy(obs, act, {"algo": "ppo", "model": {"type": "mlp", "hiddens": [16]}})
    shared = make_policy(
        obs,
        act,
        {"algo": "ppo", "model": {"type": "mlp", "hiddens": [16], "vf_share_layers": True}},
    )
    assert isinstance(separate.model, ActorCritic)
    assert isinstance(shared.model, EncoderActorCritic) and shared.model.vf_encoder is None
    n_sep = sum(p.numel() for p in separate.model.parameters())
    n_shared = sum(p.numel() for p in shared.model.parameters())
    assert n_sep - n_shared == 4 * 16 + 16  # the value net's own hidden layer
    x = torch.randn(3, 4)
    pi, vf = shared.model.pi_vf(x)
    torch.testing.assert_close(pi, shared.model.pi(x))
    torch.testing.assert_close(vf, shared.model.vf(x))
    # the value loss trains the shared trunk
    worker = RolloutWorker("CartPole-v1", 2, 16, shared.config, seed=0, policy=shared)
    before = shared.model.pi_encoder.net[0].weight.detach().clone()
    shared.train(worker.sample())
    assert not torch.equal(before, shared.model.pi_encoder.net[0].weight)


def test_a_uint8_frame_stays_uint8_from_the_env_to_the_train_batch(ray_session: None) -> None:
    worker = RolloutWorker(AtariLikeEnv, 2, 5, DQNConfig(), seed=0)
    fragments = [worker.sample() for _ in range(2)]
    # through the object store, as fragments travel from rollout workers
    fragments = [ray.get(ray.put(b)) for b in fragments]
    batch = SampleBatch.concat_samples(fragments)
    for col in (_SB.OBS, _SB.NEXT_OBS):
        assert batch[col].dtype == np.uint8 and batch[col].shape == (20, 84, 84, 4)
    buffer = ReplayBuffer(capacity=20, seed=0)
    buffer.add(batch)
    # bytes per transition: two uint8 frames (obs, next_obs) + the small columns
    layout = sample_row_layout(
        AtariLikeEnv.observation_space, AtariLikeEnv.action_space, DQNConfig()
    )
    per_row = buffer.nbytes / len(buffer)
    frames = 2 * 84 * 84 * 4
    assert per_row == replay_nbytes(1, layout) == buffer.row_nbytes
    assert frames <= per_row < frames + 64
    train = buffer.sample(8)
    assert train[_SB.OBS].dtype == np.uint8 and train[_SB.NEXT_OBS].dtype == np.uint8
    stats = worker.policy.train(train)
    assert np.isfinite(stats["loss"])


def _spaces(shape: tuple[int, ...]) -> EnvSpaces:
    obs = SpaceInfo("Box", f"Box(0, 255, {shape}, uint8)", shape, "uint8")
    return EnvSpaces("SomeImages-v0", obs, SpaceInfo("Discrete", "Discrete(4)", (), "int64"))


def test_the_compiler_refuses_an_image_too_small_for_the_cnn() -> None:
    (problem,) = space_problems(PPOConfig(), _spaces((20, 20, 3)))
    assert problem.code == "PG184" and problem.field == "env"
    # 20 -> 4 after [32, 8, 4] -> 1 after [64, 4, 2]: no room for the 3x3 kernel
    assert "conv_filters[2] [64, 3, 1]" in problem.message
    assert "does not fit the 1x1 feature map" in problem.message
    small = PPOConfig(model={"type": "cnn", "conv_filters": [[8, 3, 1]]})
    assert space_problems(small, _spaces((20, 20, 3))) == []


def test_explain_shows_the_model() -> None:
    plan = plangraph.analyze("plans/ppo.json", config={"env": "Pendulum-v1"})
    text = plan.explain()
    assert "env spaces: observation Box(shape=[3], float32), action Box(shape=[1], float32)" in text
    assert 'model (default for observations [3]): type="mlp", hiddens=[64, 64]' in text


@pytest.mark.parametrize("algo", ["a2c", "impala", "appo"])
def test_every_actor_critic_trains_with_a_cnn(algo: str) -> None:
    config = {"algo": algo, "model": {"type": "cnn", "conv_filters": [[4, 4, 2]], "hiddens": [8]}}
    worker = RolloutWorker(SideImageEnv, 2, 8, config, seed=0)
    stats = worker.policy.learn_on_batch(worker.sample())
    assert np.isfinite(stats["total_loss"])


def test_soft_update_moves_every_parameter_and_buffer_tau_of_the_way() -> None:
    online, target = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        for t in (*online.parameters(), online.running_mean, online.running_var):
            t.copy_(torch.arange(3.0) + 2.0)
        online.num_batches_tracked.fill_(4)
    before = {k: v.clone() for k, v in target.state_dict().items()}
    soft_update(target, online, 0.25)
    for name, value in target.state_dict().items():
        if value.is_floating_point():
            expected = 0.75 * before[name] + 0.25 * online.state_dict()[name]
            torch.testing.assert_close(value, expected, rtol=1e-6, atol=1e-6)
        else:  # the batch count: copied, not averaged
            assert torch.equal(value, online.state_dict()[name]), name
    soft_update(target, online, 1.0)
    for name, value in target.state_dict().items():
        if value.is_floating_point():
            assert torch.equal(value, online.state_dict()[name]), name
