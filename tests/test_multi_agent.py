"""Multi-agent sampling: envs by name, policy mapping, MultiAgentBatch counts, per-agent
postprocessing (GAE and n-step never cross agents)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from pettingzoo import ParallelEnv
from pettingzoo.test import parallel_api_test

from plangraph.ops.policy_mapping import map_agent, unmapped_agents
from plangraph.rl.multi_agent_batch import MultiAgentBatch
from plangraph.rl.multi_agent_env import (
    MultiAgentCartPole,
    make_multi_agent_env,
    multi_agent_env_names,
)
from plangraph.rl.multi_agent_worker import MultiAgentRolloutWorker
from plangraph.rl.postprocessing import compute_gae
from plangraph.rl.sample_batch import SampleBatch


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class ScriptedEnv(ParallelEnv):
    """Two agents with known episode ends: ``early`` terminates after 3 steps, ``late`` is
    truncated after 5; obs = ``[steps taken, agent marker]``; rewards 1 (early) and 100
    (late), so an advantage that mixed the agents would be far off."""

    metadata = {"name": "scripted"}
    ENDS = {"early": (3, "term"), "late": (5, "trunc")}
    REWARD = {"early": 1.0, "late": 100.0}

    def __init__(self) -> None:
        self.possible_agents = ["early", "late"]
        self.agents: list[str] = []
        self._t = 0

    def observation_space(self, agent: str) -> gym.Space[Any]:
        return gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def action_space(self, agent: str) -> gym.Space[Any]:
        return gym.spaces.Discrete(2)

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self._t, 1.0 if agent == "late" else -1.0], dtype=np.float32)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.agents = list(self.possible_agents)
        self._t = 0
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> Any:
        assert set(actions) == set(self.agents)
        self._t += 1
        obs, rew, term, trunc = {}, {}, {}, {}
        for a in self.agents:
            length, how = self.ENDS[a]
            obs[a], rew[a] = self._obs(a), self.REWARD[a]
            term[a] = self._t == length and how == "term"
            trunc[a] = self._t == length and how == "trunc"
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, {a: {} for a in obs}


PPO = {"algo": "ppo", "gamma": 0.9, "gae_lambda": 0.8}


def _worker(policies: dict[str, Any], mapping: Any, horizon: int = 4) -> MultiAgentRolloutWorker:
    return MultiAgentRolloutWorker(ScriptedEnv, None, 1, horizon, policies, mapping, seed=0)


def test_multi_agent_cartpole_follows_the_parallel_api() -> None:
    env = make_multi_agent_env("MultiAgentCartPole", {"num_agents": 3})
    assert isinstance(env, MultiAgentCartPole)
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    parallel_api_test(env, num_cycles=300)


def test_multi_agent_cartpole_agents_end_independently() -> None:
    env = MultiAgentCartPole(num_agents=2)
    env.reset(seed=3)
    lengths: dict[str, int] = {}
    t = 0
    while env.agents:
        t += 1
        _, _, term, trunc, _ = env.step({a: 0 for a in env.agents})  # always push left
        for a in term:
            if term[a] or trunc[a]:
                lengths[a] = t
    assert set(lengths) == {"agent_0", "agent_1"}
    solo = gym.make("CartPole-v1")
    solo.reset(seed=4)
    n = 0
    while True:
        n += 1
        _, _, term, trunc, _ = solo.step(0)
        if term or trunc:
            break
    assert lengths["agent_1"] == n  # agent 1's copy is CartPole-v1 seeded with seed + 1


def test_unknown_env_name_suggests_the_registered_one() -> None:
    assert "MultiAgentCartPole" in multi_agent_env_names()
    with pytest.raises(KeyError, match="did you mean 'MultiAgentCartPole'"):
        make_multi_agent_env("MultiAgentCartpole")


def test_policy_mapping_exact_beats_glob_and_longer_glob_wins() -> None:
    mapping = {"agent_*": "b", "agent_1*": "c", "agent_1": "a", "other": "d"}
    assert map_agent("agent_1", mapping) == "a"
    assert map_agent("agent_12", mapping) == "c"
    assert map_agent("agent_2", mapping) == "b"
    assert map_agent("zombie", mapping) is None
    assert unmapped_agents(["agent_0", "zombie", "other"], mapping) == ["zombie"]


def test_env_and_agent_steps_with_agents_ending_at_different_times() -> None:
    """Fragment 1 (4 env steps): early acts 3 times (terminated at 3), late 4 times.
    Fragment 2: late's 5th step (truncated, env episode over, reset), then 3 steps of both
    agents of the next episode."""
    w = _worker({"p_early": PPO, "p_late": PPO}, {"early": "p_early", "late": "p_late"})
    b1 = w.sample()
    assert b1.env_steps() == b1.count == 4
    assert b1.policy_agent_steps() == {"p_early": 3, "p_late": 4}
    assert b1.agent_steps() == 7
    assert b1.policy_batches["p_early"].episode_returns.tolist() == [3.0]
    assert b1.policy_batches["p_early"].episode_lengths.tolist() == [3]
    assert b1.policy_batches["p_late"].episode_returns.size == 0
    assert b1.episode_returns.size == 0  # the env episode is still running
    early = b1.policy_batches["p_early"]
    assert early[SampleBatch.TERMINATEDS].tolist() == [False, False, True]
    assert early[SampleBatch.T].tolist() == [0, 1, 2]
    b2 = w.sample()
    assert b2.env_steps() == 4
    assert b2.policy_agent_steps() == {"p_early": 3, "p_late": 4}
    late = b2.policy_batches["p_late"]
    assert late[SampleBatch.T].tolist() == [4, 0, 1, 2]
    assert late[SampleBatch.TRUNCATEDS].tolist() == [True, False, False, False]
    assert late.episode_returns.tolist() == [500.0]
    assert late.episode_lengths.tolist() == [5]
    # The env episode: both agents' returns summed, length in env steps.
    assert b2.episode_returns.tolist() == [3.0 + 500.0]
    assert b2.episode_lengths.tolist() == [5]
    assert len(set(late[SampleBatch.EPS_ID].tolist())) == 2  # the next episode has a new id
    assert w.num_env_steps_sampled == 8
    assert w.num_agent_steps_sampled == {"p_early": 6, "p_late": 8}


def _piece_gae(batch: SampleBatch, gamma: float, lam: float) -> np.ndarray:
    """GAE of each (agent, episode) piece computed on its own rows only."""
    out = np.empty(batch.count, dtype=np.float32)
    agents, eps = batch["agent_index"].tolist(), batch[SampleBatch.EPS_ID].tolist()
    keys = list(zip(agents, eps, strict=True))
    for key in dict.fromkeys(keys):
        rows = np.array([i for i, k in enumerate(keys) if k == key])
        cont = np.ones(len(rows), dtype=bool)
        cont[-1] = False
        adv, _ = compute_gae(
            batch[SampleBatch.REWARDS][rows],
            batch[SampleBatch.VF_PREDS][rows],
            batch[SampleBatch.BOOTSTRAP_VALUES][rows],
            cont,
            gamma,
            lam,
        )
        out[rows] = adv
    return out


def test_shared_policy_gae_never_mixes_agents() -> None:
    w = _worker({"shared": PPO}, {"*": "shared"}, horizon=4)
    for _ in range(2):
        batch = w.sample().policy_batches["shared"]
        policy = w.policies["shared"]
        # Rows grouped by agent: early's piece first, then late's.
        assert batch["agent_index"].tolist() == sorted(batch["agent_index"].tolist())
        np.testing.assert_allclose(
            batch[SampleBatch.ADVANTAGES], _piece_gae(batch, 0.9, 0.8), rtol=1e-5, atol=1e-5
        )
        boot = batch[SampleBatch.BOOTSTRAP_VALUES]
        terminated = batch[SampleBatch.TERMINATEDS]
        np.testing.assert_allclose(boot[terminated], 0.0)
        # Within a piece, a step bootstraps from V of the piece's next observation.
        agent, eps = batch["agent_index"].tolist(), batch[SampleBatch.EPS_ID].tolist()
        keys = list(zip(agent, eps, strict=True))
        inside = np.array([a == b for a, b in itertools.pairwise(keys)])
        v_next = policy.compute_values(batch[SampleBatch.OBS][1:])
        np.testing.assert_allclose(boot[:-1][inside], v_next[inside], rtol=1e-5, atol=1e-6)
    # Each agent's rewards only: early's rows carry 1, late's 100.
    idx = batch["agent_index"]
    assert set(batch[SampleBatch.REWARDS][idx == 0].tolist()) == {1.0}
    assert set(batch[SampleBatch.REWARDS][idx == 1].tolist()) == {100.0}


def test_truncation_bootstraps_from_the_final_obs_and_the_cut_from_the_current_obs() -> None:
    # A replay algorithm keeps next_obs (the observation each row bootstraps from).
    w = _worker({"shared": {"algo": "dqn"}}, {"*": "shared"}, horizon=4)
    b1 = w.sample().policy_batches["shared"]
    late = b1[b1["agent_index"] == 1]
    # Cut after late's 4th step: next_obs of the last row is the obs after it ([4, 1]).
    assert late[SampleBatch.NEXT_OBS][-1].tolist() == [4.0, 1.0]
    b2 = w.sample().policy_batches["shared"]
    late = b2[b2["agent_index"] == 1]
    # Truncated at step 5: next_obs is the final observation [5, 1], not the reset obs.
    assert late[SampleBatch.TRUNCATEDS][0]
    assert late[SampleBatch.NEXT_OBS][0].tolist() == [5.0, 1.0]


def test_n_step_returns_stay_within_one_agent() -> None:
    dqn = {"algo": "dqn", "gamma": 0.5, "n_step": 3}
    w = _worker({"q": dqn}, {"*": "q"}, horizon=4)
    batch = w.sample().policy_batches["q"]
    idx = batch["agent_index"]
    early, late = batch[idx == 0], batch[idx == 1]
    # early: 3 rows up to its termination; late: 4 rows cut by the fragment.
    assert early[SampleBatch.N_STEPS].tolist() == [3, 2, 1]
    np.testing.assert_allclose(early[SampleBatch.REWARDS], [1.75, 1.5, 1.0])
    assert early[SampleBatch.TERMINATEDS].tolist() == [True, True, True]
    assert late[SampleBatch.N_STEPS].tolist() == [3, 3, 2, 1]
    np.testing.assert_allclose(late[SampleBatch.REWARDS], [175.0, 175.0, 150.0, 100.0])
    assert late[SampleBatch.NEXT_OBS][:, 0].tolist() == [3.0, 4.0, 4.0, 4.0]


def test_select_keeps_exactly_the_named_policies() -> None:
    w = _worker({"p_early": PPO, "p_late": PPO}, {"early": "p_early", "late": "p_late"})
    batch = w.sample()
    only = batch.select(["p_late"])
    assert list(only.policy_batches) == ["p_late"]
    assert only.env_steps() == batch.env_steps() == 4
    assert only.agent_steps() == 4
    assert only.policy_batches["p_late"] is batch.policy_batches["p_late"]
    both = MultiAgentBatch.concat_samples([batch, w.sample()])
    assert both.env_steps() == 8
    assert both.policy_agent_steps() == {"p_early": 6, "p_late": 8}
    assert MultiAgentBatch.from_data(both.to_data()).policy_agent_steps() == {
        "p_early": 6,
        "p_late": 8,
    }


def test_mapping_errors_name_the_agent() -> None:
    with pytest.raises(KeyError, match="maps no policy to agent 'late'"):
        _worker({"p": PPO}, {"early": "p"})
    with pytest.raises(KeyError, match="to 'q', which is not a declared policy"):
        _worker({"p": PPO}, {"early": "p", "late": "q"})


def test_a_mapping_function_from_python() -> None:
    w = _worker({"a": PPO, "b": PPO}, lambda agent: "a" if agent == "early" else "b")
    assert w.agent_policy == {"early": "a", "late": "b"}


def test_pettingzoo_knights_archers_zombies_samples() -> None:
    w = MultiAgentRolloutWorker(
        "knights_archers_zombies_v11",
        {"max_cycles": 30},
        1,
        40,
        {"archer": PPO, "knight": {"algo": "dqn"}},
        {"archer_*": "archer", "knight_*": "knight"},
        seed=0,
    )
    batch = w.sample()
    assert batch.env_steps() == 40
    assert set(batch.policy_batches) == {"archer", "knight"}
    assert batch.agent_steps() == sum(batch.policy_agent_steps().values())
    assert batch.episode_returns.size >= 1  # max_cycles=30 < 40: one env episode ended
    archer = batch.policy_batches["archer"]
    assert archer[SampleBatch.OBS].shape[1:] == (27, 5)
    assert np.isfinite(archer[SampleBatch.ADVANTAGES]).all()


TWO = {
    "ppo_policy": {"algo": "ppo"},
    "dqn_policy": {"algo": "dqn", "epsilon_timesteps": 1000},
}
MAP = {"agent_0": "ppo_policy", "agent_1": "dqn_policy"}


@pytest.mark.parametrize("num_workers", [0, 2])
def test_worker_set_keeps_per_policy_global_vars_and_state(
    num_workers: int, ray_session: None
) -> None:
    from plangraph.rl.multi_agent_worker_set import MultiAgentWorkerSet

    ws = MultiAgentWorkerSet("MultiAgentCartPole", {"num_agents": 2}, num_workers, 2, 8, TWO, MAP)
    try:
        assert sorted(ws.local_policy) == ["dqn_policy", "ppo_policy"]
        batch = ws.sample()
        assert batch.env_steps() == max(1, num_workers) * 2 * 8
        assert batch.policy_agent_steps()["dqn_policy"] <= batch.env_steps()
        ws.sync_weights({"dqn_policy": {"timestep": 500}, "ppo_policy": {"timestep": 7}})
        state, learners = ws.get_state(), ws.local_policy.get_state()
        assert sorted(learners) == ["dqn_policy", "ppo_policy"]
        assert state["global_vars"]["dqn_policy"] == {"timestep": 500}
        if num_workers:
            import ray

            w = ray.get(ws.remote_workers[0].get_state.remote())
            assert w["policies"]["dqn_policy"]["global_timestep"] == 500
        else:
            assert ws.local_policy["dqn_policy"].global_timestep == 500
        after = ws.sample()
        ws.local_policy.set_state(learners)
        ws.set_state(state)
        again = ws.sample()
        for pid in after.policy_batches:  # resumed sampling repeats the same rows
            np.testing.assert_array_equal(
                after.policy_batches[pid][SampleBatch.OBS],
                again.policy_batches[pid][SampleBatch.OBS],
            )
    finally:
        ws.stop()
