"""Action distributions: torch log-probs, entropies and KLs against torch.distributions;
numpy sampling; Box actions clipped only on the way to the env."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import distributions as D

from plangraph.rl.distributions import Categorical, DiagGaussian, MultiCategorical, dist_class
from plangraph.rl.policies import make_policy
from plangraph.rl.policy import to_tensor
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch


def _gaussian_inputs(rows: int, dim: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    mean = torch.randn(rows, dim, generator=g)
    log_std = 0.5 * torch.randn(rows, dim, generator=g)
    return torch.cat([mean, log_std], dim=-1)


def _normal(inputs: torch.Tensor) -> D.Independent:
    mean, log_std = torch.chunk(inputs, 2, dim=-1)
    return D.Independent(D.Normal(mean, log_std.exp()), 1)


def test_diag_gaussian_matches_torch_distributions() -> None:
    p_in, q_in = _gaussian_inputs(64, 3, 0), _gaussian_inputs(64, 3, 1)
    p, q = DiagGaussian.from_inputs(p_in), DiagGaussian.from_inputs(q_in)
    actions = torch.randn(64, 3) * 3.0
    torch.testing.assert_close(p.logp(actions), _normal(p_in).log_prob(actions))
    torch.testing.assert_close(p.entropy(), _normal(p_in).entropy())
    torch.testing.assert_close(p.kl(q), D.kl_divergence(_normal(p_in), _normal(q_in)))
    torch.testing.assert_close(p.kl(p), torch.zeros(64), atol=1e-6, rtol=0)


def test_categoricals_match_torch_distributions() -> None:
    g = torch.Generator().manual_seed(0)
    logits, other = torch.randn(32, 5, generator=g), torch.randn(32, 5, generator=g)
    actions = torch.randint(0, 5, (32,), generator=g)
    ref, ref_q = D.Categorical(logits=logits), D.Categorical(logits=other)
    c = Categorical.from_inputs(logits)
    torch.testing.assert_close(c.logp(actions), ref.log_prob(actions))
    torch.testing.assert_close(c.entropy(), ref.entropy())
    torch.testing.assert_close(c.kl(Categorical(other)), D.kl_divergence(ref, ref_q))

    multi = dist_class(gym.spaces.MultiDiscrete([3, 4]))
    inputs = torch.randn(32, 7, generator=g)
    acts = torch.stack([torch.randint(0, 3, (32,)), torch.randint(0, 4, (32,))], dim=1)
    parts = [D.Categorical(logits=x) for x in torch.split(inputs, [3, 4], dim=-1)]
    m = multi.from_inputs(inputs)
    assert isinstance(m, MultiCategorical)
    torch.testing.assert_close(
        m.logp(acts), sum(d.log_prob(acts[:, k]) for k, d in enumerate(parts))
    )
    torch.testing.assert_close(m.entropy(), sum(d.entropy() for d in parts))


def test_numpy_gaussian_samples_have_the_distribution_and_its_log_probs() -> None:
    inputs = np.tile(np.array([[1.0, -2.0, np.log(0.5), np.log(3.0)]], np.float32), (50_000, 1))
    actions, logp = DiagGaussian.sample(inputs, np.random.default_rng(0))
    assert actions.dtype == np.float32 and logp.dtype == np.float32 and actions.shape == (50_000, 2)
    np.testing.assert_allclose(actions.mean(0), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(actions.std(0), [0.5, 3.0], rtol=0.02)
    expected = _normal(torch.from_numpy(inputs)).log_prob(torch.from_numpy(actions)).numpy()
    np.testing.assert_allclose(logp, expected, rtol=1e-5, atol=1e-5)
    mode, mode_logp = DiagGaussian.mode(inputs[:3])
    np.testing.assert_array_equal(mode, inputs[:3, :2])
    np.testing.assert_allclose(
        mode_logp,
        _normal(torch.from_numpy(inputs[:3])).log_prob(torch.from_numpy(mode)).numpy(),
        rtol=1e-6,
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
        logp = dist.logp(to_tensor(actions)).numpy()
        clipped = dist.logp(torch.from_numpy(np.clip(actions, -1.0, 1.0))).numpy()
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

    from plangraph.ops.policies import PolicyConfigModel

    obs = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    spaces = {
        "Discrete": gym.spaces.Discrete(3),
        "MultiDiscrete": gym.spaces.MultiDiscrete([2, 3]),
        "Box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    }
    for model in typing.get_args(PolicyConfigModel):
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
