"""Action distributions: the torch.distributions each action space gets (and the
multi-categorical, a sum of torch's categoricals); the workers' numpy draws against
torch's probabilities, log-probs, reparametrised sample and mode; Box actions clipped
only on the way to the env."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import distributions as D

from plangraph.rl.distributions import MultiCategorical, action_distribution, action_sampler
from plangraph.rl.policies import make_policy
from plangraph.rl.policy import to_tensor
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch
OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def _gaussian_inputs(rows: int, dim: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mean = torch.randn(rows, dim, generator=g)
    log_std = 0.5 * torch.randn(rows, dim, generator=g)
    return torch.cat([mean, log_std], dim=-1)


def test_each_action_space_gets_its_torch_distribution() -> None:
    logits = torch.randn(4, 5)
    cat = action_distribution(gym.spaces.Discrete(5))(logits)
    assert type(cat) is D.Categorical
    torch.testing.assert_close(cat.probs, torch.softmax(logits, -1))

    inputs = _gaussian_inputs(4, 3, 0)
    gauss = action_distribution(gym.spaces.Box(-1.0, 1.0, (3,), np.float32))(inputs)
    assert type(gauss) is D.Independent and type(gauss.base_dist) is D.Normal
    assert gauss.batch_shape == (4,) and gauss.event_shape == (3,)
    torch.testing.assert_close(gauss.base_dist.loc, inputs[:, :3])
    torch.testing.assert_close(gauss.base_dist.scale, inputs[:, 3:].exp())

    multi = action_distribution(gym.spaces.MultiDiscrete([3, 4]))(torch.randn(4, 7))
    assert type(multi) is MultiCategorical and multi.event_shape == (2,)
    for space in (gym.spaces.Box(-1.0, 1.0, (2, 2)), gym.spaces.MultiBinary(3)):
        with pytest.raises(ValueError, match="no action distribution"):
            action_distribution(space)


def test_multi_categorical_is_the_sum_of_its_components() -> None:
    g = torch.Generator().manual_seed(0)
    inputs, other = torch.randn(32, 7, generator=g), torch.randn(32, 7, generator=g)
    acts = torch.stack([torch.randint(0, 3, (32,)), torch.randint(0, 4, (32,))], dim=1)
    parts = [D.Categorical(logits=x) for x in torch.split(inputs, [3, 4], dim=-1)]
    others = [D.Categorical(logits=x) for x in torch.split(other, [3, 4], dim=-1)]
    make = action_distribution(gym.spaces.MultiDiscrete([3, 4]))
    m, q = make(inputs), make(other)
    torch.testing.assert_close(
        m.log_prob(acts), parts[0].log_prob(acts[:, 0]) + parts[1].log_prob(acts[:, 1])
    )
    torch.testing.assert_close(m.entropy(), parts[0].entropy() + parts[1].entropy())
    torch.testing.assert_close(
        D.kl_divergence(m, q),
        sum(D.kl_divergence(a, b) for a, b in zip(parts, others, strict=True)),
    )
    torch.testing.assert_close(D.kl_divergence(m, m), torch.zeros(32))
    assert torch.equal(m.mode, torch.stack([p.mode for p in parts], dim=1))
    with pytest.raises(ValueError):  # torch checks each component's actions
        m.log_prob(torch.tensor([[3, 0]]).expand(32, 2))


SPACES = {
    "Discrete": gym.spaces.Discrete(3),
    "MultiDiscrete": gym.spaces.MultiDiscrete([2, 3]),
    "Box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
}


def test_categorical_draws_have_torchs_probabilities_and_log_probs() -> None:
    logits = torch.log(torch.tensor([[0.125, 0.25, 0.625], [0.5, 0.0, 0.5]])).repeat(50_000, 1)
    dist = action_distribution(SPACES["Discrete"])(logits)
    sample = action_sampler(SPACES["Discrete"])
    actions, logp = sample(logits, np.random.default_rng(0))
    assert actions.dtype == np.int64 and actions.shape == (100_000,)
    assert logp.dtype == np.float32 and logp.shape == (100_000,)
    for row, probs in enumerate(dist.probs[:2].numpy()):
        freq = np.bincount(actions[row::2], minlength=3) / 50_000
        np.testing.assert_allclose(freq, probs, atol=0.006)
    assert not np.any(actions[1::2] == 1)  # a zero probability is never drawn
    expected = dist.log_prob(torch.from_numpy(actions)).numpy()
    np.testing.assert_allclose(logp, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(actions, sample(logits, np.random.default_rng(0))[0])
    assert not np.array_equal(actions, sample(logits, np.random.default_rng(1))[0])

    inputs = torch.log(torch.tensor([[0.25, 0.75, 0.2, 0.3, 0.5]])).repeat(50_000, 1)
    both, logp = action_sampler(SPACES["MultiDiscrete"])(inputs, np.random.default_rng(0))
    assert both.shape == (50_000, 2) and both.dtype == np.int64 and logp.dtype == np.float32
    np.testing.assert_allclose(np.bincount(both[:, 0]) / 50_000, [0.25, 0.75], atol=0.006)
    np.testing.assert_allclose(np.bincount(both[:, 1]) / 50_000, [0.2, 0.3, 0.5], atol=0.006)
    multi = action_distribution(SPACES["MultiDiscrete"])(inputs)
    expected = multi.log_prob(torch.from_numpy(both)).numpy()
    np.testing.assert_allclose(logp, expected, rtol=1e-6, atol=1e-6)


def test_gaussian_draws_are_torchs_reparametrised_sample_at_the_generators_noise() -> None:
    inputs = _gaussian_inputs(1_000, 2, 0)
    dist = action_distribution(SPACES["Box"])(inputs)
    actions, logp = action_sampler(SPACES["Box"])(inputs, np.random.default_rng(0))
    assert actions.dtype == np.float32 and actions.shape == (1_000, 2)
    eps = np.random.default_rng(0).standard_normal((1_000, 2), dtype=np.float32)
    base = dist.base_dist
    np.testing.assert_array_equal(actions, (base.loc + base.scale * torch.from_numpy(eps)).numpy())
    np.testing.assert_array_equal(logp, dist.log_prob(torch.from_numpy(actions)).numpy())
    wide = torch.tensor([[1.0, -2.0, np.log(0.5), np.log(3.0)]]).repeat(50_000, 1)
    samples, _ = action_sampler(SPACES["Box"])(wide, np.random.default_rng(1))
    np.testing.assert_allclose(samples.mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(samples.std(0), [0.5, 3.0], rtol=0.02)


@pytest.mark.parametrize("kind", sorted(SPACES))
def test_the_mode_is_torchs_and_acting_records_the_log_prob_the_loss_computes(kind: str) -> None:
    """A policy's ``action_logp`` is the torch distribution's ``log_prob`` of the action it
    drew (so PPO's first ratio is 1, up to float rounding), its ``action_dist_inputs`` the
    network's output, and acting greedily takes torch's mode."""
    policy = make_policy(OBS, SPACES[kind], {"algo": "ppo"}, seed=0)
    obs = np.random.default_rng(0).uniform(-1, 1, (16, 3)).astype(np.float32)
    actions, extra = policy.compute_actions(obs)
    with torch.no_grad():
        inputs = policy.model.pi(to_tensor(obs))
        dist = policy.dist(inputs)
        logp = dist.log_prob(torch.from_numpy(actions)).numpy()
    np.testing.assert_array_equal(extra[_SB.ACTION_DIST_INPUTS], inputs.numpy())
    np.testing.assert_allclose(extra[_SB.ACTION_LOGP], logp, rtol=1e-6, atol=1e-6)
    greedy, greedy_extra = policy.compute_actions(obs, explore=False)
    np.testing.assert_array_equal(greedy, dist.mode.numpy())
    np.testing.assert_allclose(
        greedy_extra[_SB.ACTION_LOGP], dist.log_prob(dist.mode).numpy(), rtol=1e-6, atol=1e-6
    )


class _BoundedEnv(gym.Env[np.ndarray, np.ndarray]):
    """Box(-1, 1) actions; records each action it is given; reward = -|action|^2."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, seen: list[np.ndarray]) -> None:
        self.seen = seen
        self._t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.seen.append(np.array(action, copy=True))
        self._t += 1
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, -float(np.sum(np.square(action))), False, self._t >= 10, {}


@pytest.mark.parametrize("algo", ["ppo", "a2c", "impala", "appo"])
def test_clipped_actions_reach_the_env_but_never_the_loss(algo: str) -> None:
    seen: list[np.ndarray] = []
    worker = RolloutWorker(
        lambda: _BoundedEnv(seen), 2, 16, {"algo": algo, "log_std_init": 1.0}, seed=0
    )
    batch = worker.sample()
    actions = batch[_SB.ACTIONS]
    assert actions.shape == (32, 2) and actions.dtype == np.float32
    assert np.abs(actions).max() > 1.5  # std e: many samples fall outside the bounds
    env_actions = np.stack(seen)
    assert np.abs(env_actions).max() <= 1.0  # the env only ever saw in-bound actions
    # sub-env-major rows vs the env's step order (steps alternate between the 2 sub-envs)
    by_step = actions.reshape(2, 16, 2).transpose(1, 0, 2).reshape(32, 2)
    np.testing.assert_array_equal(env_actions, np.clip(by_step, -1.0, 1.0))
    # the recorded log-probs are those of the unclipped samples under the policy
    policy = worker.policy
    with torch.no_grad():
        dist = policy.dist(policy.model.pi(to_tensor(batch[_SB.OBS])))
        logp = dist.log_prob(to_tensor(actions)).numpy()
        clipped = dist.log_prob(torch.from_numpy(np.clip(actions, -1.0, 1.0))).numpy()
    np.testing.assert_allclose(batch[_SB.ACTION_LOGP], logp, rtol=1e-5, atol=1e-5)
    assert np.abs(clipped - logp).max() > 0.1
    # so the first update sees ratio pi/mu == 1 on every row
    stats = policy.learn_on_batch(batch)
    if "clip_frac" in stats:
        assert stats["clip_frac"] == 0.0
    if "mean_is_ratio" in stats:
        assert stats["mean_is_ratio"] == pytest.approx(1.0, abs=1e-5)


def test_a_policy_for_each_action_space_its_config_names() -> None:
    """The compiler's action_spaces data (plangraph.ops.policies) is what the classes build."""
    import typing

    from plangraph.ops.policies import AlgorithmConfig

    obs = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    spaces = {
        "Discrete": gym.spaces.Discrete(3),
        "MultiDiscrete": gym.spaces.MultiDiscrete([2, 3]),
        "Box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    }
    for model in typing.get_args(AlgorithmConfig):
        algo = model.model_fields["algo"].default
        for kind, space in spaces.items():
            if kind in model.action_spaces:
                policy = make_policy(obs, space, {"algo": algo})
                actions, _ = policy.compute_actions(np.zeros((4, 3), np.float32))
                assert actions.shape == (4, *space.shape), (algo, kind)
            else:
                with pytest.raises(ValueError, match="action spaces only"):
                    make_policy(obs, space, {"algo": algo})


def test_multi_discrete_actions_train() -> None:
    class _Env(gym.Env[np.ndarray, np.ndarray]):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.MultiDiscrete([3, 2])

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            super().reset(seed=seed)
            return np.zeros(2, np.float32), {}

        def step(self, action: np.ndarray) -> Any:
            assert action.shape == (2,) and 0 <= action[0] < 3 and 0 <= action[1] < 2
            return (
                np.zeros(2, np.float32),
                float(action[0] == 2) + float(action[1] == 0),
                False,
                False,
                {},
            )

    worker = RolloutWorker(_Env, 4, 32, {"algo": "ppo", "lr": 3e-3, "entropy_coeff": 0.0}, seed=0)
    first = None
    for _ in range(15):
        batch = worker.sample()
        assert batch[_SB.ACTIONS].shape == (128, 2) and batch[_SB.ACTIONS].dtype == np.int64
        mean = float(batch[_SB.REWARDS].mean())
        first = mean if first is None else first
        worker.policy.train(batch, 4, 64)
    assert first < 1.2 and mean > 1.6  # random: 1/3 + 1/2; best: 2
