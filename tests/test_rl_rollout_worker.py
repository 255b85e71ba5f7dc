"""RolloutWorker: exact episodes across autoresets, seeds, postprocessing, counters."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from plangraph.algorithms.a2c import A2CConfig
from plangraph.algorithms.dqn import DQNConfig
from plangraph.algorithms.ppo import PPOConfig
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.seeding import derive_seeds


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Small MLPs gain nothing from intra-op threads; on 2 shared cores they only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class ChainEnv(gym.Env[np.ndarray, np.int64]):
    """obs = [t] (steps taken in the episode), reward 1 per step, terminates at t == length."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, np.inf, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        return np.array([self._t], np.float32), 1.0, self._t >= self.length, False, {}


def _chain_creator() -> Any:
    """Sub-env 0 terminates after 2 steps; sub-env 1 runs on but is truncated at 3 steps."""
    specs = itertools.cycle([(2, None), (100, 3)])

    def make() -> gym.Env:
        length, limit = next(specs)
        env: gym.Env = ChainEnv(length)
        if limit is not None:
            env = gym.wrappers.TimeLimit(env, max_episode_steps=limit)
        return env

    return make


def _linear_value_worker(**kw: Any) -> RolloutWorker:
    cfg = A2CConfig(hiddens=(), gamma=0.5, gae_lambda=0.5)
    worker = RolloutWorker(_chain_creator(), 2, 5, cfg, seed=0, **kw)
    weights = worker.get_weights()
    weights["vf_net.0.weight"] = np.ones((1, 1), np.float32)  # V(s) = s[0] = t exactly
    weights["vf_net.0.bias"] = np.zeros(1, np.float32)
    worker.set_weights(weights)
    return worker


def test_gae_known_values_termination_truncation_and_cut() -> None:
    worker = _linear_value_worker()
    b = worker.sample()
    assert b.count == b.env_steps() == 10
    # Sub-env 0 = rows 0-4: t = 0,1 | 0,1 | 0; terminations at rows 1 and 3; cut at 4.
    # Sub-env 1 = rows 5-9: t = 0,1,2 (truncated at row 7, final obs t=3) | 0,1; cut at 9.
    np.testing.assert_array_equal(b["t"], [0, 1, 0, 1, 0, 0, 1, 2, 0, 1])
    np.testing.assert_array_equal(b["obs"][:, 0], b["t"].astype(np.float32))
    np.testing.assert_array_equal(b["terminateds"], [0, 1, 0, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(b["truncateds"], [0, 0, 0, 0, 0, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(b["vf_preds"], b["t"].astype(np.float32))
    # Successor values: 0 after termination, V(final obs) = 3 after truncation, V(s_{t+1})
    # otherwise (2 at sub-env 1's cut, where t = 2 comes next).
    np.testing.assert_array_equal(b["bootstrap_values"], [1, 0, 1, 0, 1, 1, 2, 3, 1, 2])
    # gamma * lambda = 0.25; deltas sub-env 0: 1.5, 0, 1.5, 0, 1.5; sub-env 1: 1.5, 1,
    # 0.5, 1.5, 1.
    np.testing.assert_array_equal(
        b["advantages"], [1.5, 0.0, 1.5, 0.0, 1.5, 1.78125, 1.125, 0.5, 1.75, 1.0]
    )
    np.testing.assert_array_equal(b["value_targets"], b["advantages"] + b["vf_preds"])
    np.testing.assert_array_equal(b.episode_lengths, [2, 3, 2])
    np.testing.assert_array_equal(b.episode_returns, [2.0, 3.0, 2.0])
    # eps ids: one per episode piece, unique, constant within an episode
    assert len(set(b["eps_id"][[0, 2, 4, 5, 8]].tolist())) == 5

    # Next fragment continues the open episodes: sub-env 0 at t=1, sub-env 1 at t=2.
    b2 = worker.sample()
    np.testing.assert_array_equal(b2["t"], [1, 0, 1, 0, 1, 2, 0, 1, 2, 0])
    assert b2["eps_id"][0] == b["eps_id"][4] and b2["eps_id"][5] == b["eps_id"][9]
    np.testing.assert_array_equal(b2.episode_lengths, [2, 3, 2, 3, 2])
    assert worker.num_env_steps_sampled == 20


def test_dqn_next_obs_is_final_obs_at_episode_end() -> None:
    worker = RolloutWorker(_chain_creator(), 2, 5, DQNConfig(hiddens=(8,)), seed=0)
    b = worker.sample()
    # next_obs t: sub-env 0 -> 1, 2 (final), 1, 2 (final), 1; sub-env 1 -> 1, 2, 3 (final), 1, 2
    np.testing.assert_array_equal(b["next_obs"][:, 0], [1, 2, 1, 2, 1, 1, 2, 3, 1, 2])
    assert "advantages" not in b and b["next_obs"].dtype == np.float32
    assert "n_steps" not in b  # one-step DQN keeps the plain transitions


def test_dqn_n_step_transitions_stop_at_episode_ends_and_the_cut() -> None:
    cfg = DQNConfig(hiddens=(8,), n_step=2, gamma=0.5)
    worker = RolloutWorker(_chain_creator(), 2, 5, cfg, seed=0)
    b = worker.sample()
    # Sub-env 0 (rows 0-4): obs t = 0,1 | 0,1 | 0, terminated after 2 steps, cut after
    # row 4. Sub-env 1 (rows 5-9): t = 0,1,2 truncated at 3 | 0,1, cut after row 9.
    np.testing.assert_array_equal(b["n_steps"], [2, 1, 2, 1, 1, 2, 2, 1, 2, 1])
    np.testing.assert_array_equal(b["rewards"], [1.5, 1, 1.5, 1, 1, 1.5, 1.5, 1, 1.5, 1])
    # next_obs is the state n_steps later: final obs 2 / 3 at the episode ends, the obs
    # after the cut at row 4 (1) and row 9 (2).
    np.testing.assert_array_equal(b["next_obs"][:, 0], [2, 2, 2, 2, 1, 2, 3, 3, 2, 2])
    np.testing.assert_array_equal(b["terminateds"], [1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(b["truncateds"], [0, 0, 0, 0, 0, 0, 1, 1, 0, 0])
    # The one-step view (obs, actions) and the episode statistics are unchanged.
    np.testing.assert_array_equal(b["obs"][:, 0], b["t"].astype(np.float32))
    np.testing.assert_array_equal(b.episode_returns, [2.0, 3.0, 2.0])


def _cartpole_limit15() -> gym.Env:
    return gym.make("CartPole-v1", max_episode_steps=15)


def test_exact_episodes_across_autoresets_replay_cartpole() -> None:
    """Replaying each sub-env with its seed and the recorded actions reproduces every row."""
    n, horizon = 3, 40
    worker = RolloutWorker(_cartpole_limit15, n, horizon, PPOConfig(), seed=123, worker_index=2)
    batches = [worker.sample(), worker.sample()]
    assert all(b.count == n * horizon for b in batches)
    ends: list[tuple[int, int, int, int]] = []
    for k in range(n):
        env = _cartpole_limit15()
        obs, _ = env.reset(seed=worker.sub_env_seeds[k])
        length = 0
        for f, b in enumerate(batches):
            rows = slice(k * horizon, (k + 1) * horizon)
            for t, (o, a, r, term, trunc, tt) in enumerate(
                zip(
                    b["obs"][rows],
                    b["actions"][rows],
                    b["rewards"][rows],
                    b["terminateds"][rows],
                    b["truncateds"][rows],
                    b["t"][rows],
                    strict=True,
                )
            ):
                np.testing.assert_array_equal(o, obs)
                assert tt == length
                obs, r_ref, term_ref, trunc_ref, _ = env.step(int(a))
                length += 1
                assert (r, term, trunc) == (r_ref, term_ref, trunc_ref)
                if term_ref or trunc_ref:
                    ends.append((f, t, k, length))
                    obs, _ = env.reset()
                    length = 0
    ends.sort()  # (fragment, step, sub-env): the order in which the worker reports them
    expected = [length for *_, length in ends]
    reported = np.concatenate([b.episode_lengths for b in batches]).tolist()
    assert reported == expected
    assert any(length == 15 for length in expected)  # truncations happened
    assert any(length < 15 for length in expected)  # terminations happened
    returns = np.concatenate([b.episode_returns for b in batches])
    np.testing.assert_array_equal(returns, np.array(expected, dtype=np.float64))


def test_seeds_distinct_per_sub_env_and_worker_and_reproducible() -> None:
    p0, s0 = derive_seeds(7, 1, 4)
    p1, s1 = derive_seeds(7, 2, 4)
    all_seeds = [p0, p1, *s0, *s1]
    assert len(set(all_seeds)) == len(all_seeds)
    assert derive_seeds(7, 1, 4) == (p0, s0)
    assert derive_seeds(8, 1, 4) != (p0, s0)

    w1 = RolloutWorker("CartPole-v1", 4, 8, PPOConfig(), seed=7, worker_index=1)
    w2 = RolloutWorker("CartPole-v1", 4, 8, PPOConfig(), seed=7, worker_index=1)
    w3 = RolloutWorker("CartPole-v1", 4, 8, PPOConfig(), seed=7, worker_index=2)
    assert w1.sub_env_seeds == s0
    b1, b2, b3 = w1.sample(), w2.sample(), w3.sample()
    for key in b1.keys():
        np.testing.assert_array_equal(b1[key], b2[key])
    first_obs = b1["obs"][::8]  # row k*T: first observation of sub-env k
    assert len({tuple(o) for o in first_obs}) == 4
    assert not np.array_equal(b1["obs"], b3["obs"])


class ImageEnv(gym.Env[np.ndarray, np.int64]):
    """uint8 [2, 3] observations; terminates after 4 steps."""

    observation_space = gym.spaces.Box(0, 255, (2, 3), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self.np_random.integers(0, 256, (2, 3), dtype=np.uint8), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        obs = np.full((2, 3), 200 + int(action), np.uint8)
        return obs, float(action), self._t >= 4, False, {}


@pytest.mark.parametrize("config", [PPOConfig(hiddens=(8,)), DQNConfig(hiddens=(8,))])
def test_uint8_observations_stay_uint8(config: Any) -> None:
    worker = RolloutWorker(ImageEnv, 2, 6, config, seed=0)
    b = worker.sample()
    assert b["obs"].dtype == np.uint8 and b["obs"].shape == (12, 2, 3)
    assert b["actions"].dtype == np.int64
    if config.algo == "dqn":
        assert b["next_obs"].dtype == np.uint8
        stats = worker.policy.train(b)
    else:
        stats = worker.policy.train(b, num_sgd_iter=2, sgd_minibatch_size=4)
    assert np.isfinite(stats["grad_gnorm"])


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="num_envs"):
        RolloutWorker("CartPole-v1", 0, 4, PPOConfig())
    with pytest.raises(ValueError, match="acts in Discrete action spaces only"):
        RolloutWorker("Pendulum-v1", 1, 4, DQNConfig())


def _linear_vtrace_worker(config: Any) -> RolloutWorker:
    worker = RolloutWorker(_chain_creator(), 2, 5, config, seed=0)
    weights = worker.get_weights()
    weights["vf_net.0.weight"] = np.ones((1, 1), np.float32)  # V(s) = s[0] = t exactly
    weights["vf_net.0.bias"] = np.zeros(1, np.float32)
    worker.set_weights(weights)
    return worker


@pytest.mark.parametrize("algo", ["impala", "appo"])
def test_vtrace_batches_mark_segments_and_bootstrap_observations(algo: str) -> None:
    cfg = {"algo": algo, "hiddens": (), "gamma": 0.5}
    worker = _linear_vtrace_worker(cfg)
    b = worker.sample()
    assert set(b.keys()) == {
        "obs",
        "actions",
        "rewards",
        "terminateds",
        "truncateds",
        "eps_id",
        "t",
        "action_logp",
        "action_dist_inputs",
        "next_obs",
        "segment_ends",
        "policy_version",
    }
    # Same trajectories as the GAE test: sub-env 0 terminates at rows 1 and 3, cut at 4;
    # sub-env 1 is truncated at row 7 (final obs t = 3), cut at 9 (next obs t = 2).
    np.testing.assert_array_equal(b["segment_ends"], [0, 1, 0, 1, 1, 0, 0, 1, 0, 1])
    assert b["segment_ends"].dtype == bool
    np.testing.assert_array_equal(b["next_obs"][:, 0], [1, 2, 1, 2, 1, 1, 2, 3, 1, 2])
    assert b["policy_version"].dtype == np.int64 and not b["policy_version"].any()
    assert b["action_logp"].dtype == np.float32 and b["action_dist_inputs"].shape == (10, 2)
    # On-policy V-trace on the learner = the n-step returns bootstrapped with V = t:
    # terminated pieces 1.5, 1; the cut at row 4 bootstraps V(t=1) = 1; the truncation at
    # row 7 bootstraps V(final obs) = 3; the cut at row 9 bootstraps V(t=2) = 2.
    vt = worker.policy.compute_vtrace(b)
    np.testing.assert_allclose(
        vt.vs.numpy(), [1.5, 1, 1.5, 1, 1.5, 2.125, 2.25, 2.5, 2, 2], rtol=1e-6
    )
    np.testing.assert_allclose(vt.pg_advantages.numpy(), vt.vs.numpy() - b["t"], atol=1e-6)


def test_vtrace_batches_carry_the_behaviour_policy_version() -> None:
    worker = RolloutWorker("CartPole-v1", 2, 4, {"algo": "impala"}, seed=0)
    weights = worker.get_weights()
    worker.set_weights(weights, {"timestep": 100, "policy_version": 7})
    b = worker.sample()
    np.testing.assert_array_equal(b["policy_version"], np.full(8, 7, np.int64))
    worker.set_weights(weights, {"timestep": 200})  # no version given: it is kept
    assert worker.sample()["policy_version"][0] == 7
    worker.set_weights(weights, {"policy_version": 9})
    assert (worker.sample()["policy_version"] == 9).all()
    assert "policy_version" not in RolloutWorker("CartPole-v1", 2, 4, PPOConfig()).sample()


def _assert_same_batch(a: Any, b: Any) -> None:
    assert sorted(a.keys()) == sorted(b.keys())
    for key in a.keys():
        assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes(), key
    assert a.episode_returns.tolist() == b.episode_returns.tolist()
    assert a.episode_lengths.tolist() == b.episode_lengths.tolist()


def _is_data(tree: Any) -> bool:
    """A plain data tree: what a checkpoint without pickle can hold."""
    if tree is None or isinstance(tree, bool | int | float | str | np.ndarray):
        return True
    if isinstance(tree, list):
        return all(_is_data(v) for v in tree)
    if isinstance(tree, dict):
        return all(isinstance(k, str) and _is_data(v) for k, v in tree.items())
    return False


@pytest.mark.parametrize("config", [PPOConfig(), DQNConfig(epsilon_timesteps=10_000)])
def test_a_restored_worker_samples_what_the_original_would_have(config: Any) -> None:
    """Mid-episode CartPole sub-envs, partial returns, action RNG and epsilon come back."""
    original = RolloutWorker("CartPole-v1", 3, 13, config, seed=7, worker_index=1)
    original.set_global_vars({"timestep": 4000})
    original.sample()
    state = original.get_state()
    assert _is_data(state)
    assert all(entry["snapshot"] is not None for entry in state["envs"])
    assert (state["ep_len"] > 0).any()  # the checkpoint falls inside episodes
    want = [original.sample() for _ in range(3)]

    restored = RolloutWorker("CartPole-v1", 3, 13, config, seed=99, worker_index=1)
    assert restored.set_state(state) == []
    for batch in want:
        _assert_same_batch(restored.sample(), batch)
    assert restored.num_env_steps_sampled == original.num_env_steps_sampled


class _HandleEnv(ChainEnv):
    """A chain env that holds a non-data object (like a renderer or a physics handle)."""

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.handle = threading.Lock()


def test_an_uncapturable_sub_env_is_reset_with_a_derived_seed() -> None:
    def make() -> gym.Env:
        return _HandleEnv(100)

    worker = RolloutWorker(make, 2, 4, PPOConfig(), seed=0, worker_index=1)
    worker.sample()
    state = worker.get_state()
    assert [e["snapshot"] for e in state["envs"]] == [None, None]
    assert "_HandleEnv.handle is a _thread.lock" in state["envs"][0]["reason"]

    runs = []
    for _ in range(2):
        fresh = RolloutWorker(make, 2, 4, PPOConfig(), seed=0, worker_index=1)
        assert fresh.set_state(state) == [0, 1]
        runs.append(fresh.sample())
    # Reset policy: the partial episodes are dropped and start over, deterministically.
    assert runs[0]["t"].reshape(2, 4)[:, 0].tolist() == [0, 0]
    assert not set(runs[0]["eps_id"].tolist()) & set(state["eps_ids"].tolist())
    _assert_same_batch(runs[0], runs[1])


def test_worker_state_of_another_shape_is_refused() -> None:
    state = RolloutWorker("CartPole-v1", 2, 4, PPOConfig(), worker_index=1).get_state()
    with pytest.raises(ValueError, match="has 2 sub-envs, this worker has 3"):
        RolloutWorker("CartPole-v1", 3, 4, PPOConfig(), worker_index=1).set_state(state)
    with pytest.raises(ValueError, match="wrapper chain"):
        RolloutWorker(_chain_creator(), 2, 4, PPOConfig(), worker_index=1).set_state(state)


ACTING_WORKER = """
import sys
import torch
from plangraph.rl.policies import make_policy
from plangraph.rl.rollout_worker import RolloutWorker

worker = RolloutWorker("CartPole-v1", 4, 16, {"algo": sys.argv[1]}, seed=3, worker_index=1,
                       torch_threads=1, num_workers=2)
learner = make_policy(worker.observation_space, worker.action_space, {"algo": sys.argv[1]}, 0)
worker.set_weights(learner.get_weights(), {"timestep": 500})
batch = worker.sample()
worker.get_state()
# Building a torch.optim optimizer imports torch's compiler stack (seconds of CPU): a
# worker that only acts must not pay it.
compiler = sorted({m.split(".")[1] for m in sys.modules if m.startswith("torch._dynamo")})
print(type(worker.policy).__name__, torch.get_num_threads(), compiler, batch.count)
"""


@pytest.mark.parametrize(("algo", "cls"), [("ppo", "PPOPolicy"), ("dqn", "DQNPolicy")])
def test_a_remote_worker_acts_with_the_torch_policy_on_one_thread_without_an_optimizer(
    algo: str, cls: str
) -> None:
    from tests.fresh_python import run_python

    assert run_python(ACTING_WORKER, algo).split() == [cls, "1", "[]", "64"]


def test_a_workers_policy_acts_as_the_learner_with_the_same_weights_and_sampler() -> None:
    from plangraph.rl.policies import make_policy

    worker = RolloutWorker("CartPole-v1", 4, 16, PPOConfig(), seed=3, worker_index=1)
    learner = make_policy(worker.observation_space, worker.action_space, PPOConfig(), 0)
    learner.train(worker.sample(), 2, 32)
    worker.set_weights(learner.get_weights())
    assert type(worker.policy) is type(learner)
    learner.set_sampling_state(worker.policy.get_sampling_state())
    obs = np.random.default_rng(0).uniform(-1, 1, (8, 4)).astype(np.float32)
    ours, theirs = worker.policy.compute_actions(obs), learner.compute_actions(obs)
    np.testing.assert_array_equal(ours[0], theirs[0])
    for key, value in ours[1].items():
        np.testing.assert_array_equal(value, theirs[1][key], err_msg=key)
