"""Recurrent policies (issue 31): state through rollout workers, batches and the learner.

Real parts throughout: real gymnasium envs, real torch models, real rollout workers (in
this process, and as Ray actors in the plan run at the end). A user's own recurrent
module (a GRU defined here, outside ``plangraph/``) trains through the same path as the
built-in ``lstm``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
import pytest
import torch
from pydantic import Field
from torch import nn

import plangraph
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.sequences import (
    PREV_ACTIONS,
    PREV_REWARDS,
    SEQ_BEGIN,
    sequence_layout,
    sequence_minibatch_indices,
)

LSTM = {"type": "lstm", "hiddens": [16], "lstm_cell_size": 8, "max_seq_len": 7}
LSTM_PREV = {**LSTM, "lstm_use_prev_action": True, "lstm_use_prev_reward": True}


def _worker(model: Mapping[str, Any], num_envs: int = 4, horizon: int = 60) -> RolloutWorker:
    return RolloutWorker(
        "CartPole-v1", num_envs, horizon, {"algo": "ppo", "model": dict(model)}, seed=3
    )


def _grid(batch: SampleBatch, name: str, n: int) -> np.ndarray:
    """A column back in the worker's ``[N, T, ...]`` layout."""
    col = batch[name]
    return col.reshape(n, -1, *col.shape[1:])


# --- the rollout worker carries and resets each sub-env's state ------------------------


def test_a_worker_resets_exactly_the_state_of_the_sub_env_whose_episode_ended() -> None:
    """Replay each sub-env alone through the model, one step at a time, from the state
    recorded at the fragment's first row: the state recorded before every later row is the
    replayed one, except right after that sub-env's own episode ended, where it is the
    initial state (another sub-env's episode end changes nothing)."""
    n = 4
    worker = _worker(LSTM_PREV, num_envs=n, horizon=80)
    worker.sample()  # the second fragment starts from carried (non-initial) states
    batch = worker.sample()
    policy = worker.policy
    names = sorted(policy.initial_state(1))
    assert names == ["state_in_c", "state_in_h", "state_in_vf_c", "state_in_vf_h"]
    done = _grid(batch, SampleBatch.TERMINATEDS, n) | _grid(batch, SampleBatch.TRUNCATEDS, n)
    assert done.any(axis=1).sum() >= 2, "the test needs episode ends in several sub-envs"
    obs = _grid(batch, SampleBatch.OBS, n)
    acts = _grid(batch, SampleBatch.ACTIONS, n)
    rews = _grid(batch, SampleBatch.REWARDS, n)
    rec = {k: _grid(batch, k, n) for k in [*names, PREV_ACTIONS, PREV_REWARDS]}
    assert np.abs(rec["state_in_h"][:, 0]).sum() > 0, "carried across fragments"
    init = policy.initial_inputs(1)
    resets = 0
    for k in range(n):
        inputs = {name: rec[name][k, 0][None] for name in rec}
        for t in range(obs.shape[1] - 1):
            _, _, state = policy.compute_actions_recurrent(obs[k, t][None], inputs, explore=False)
            if done[k, t]:
                want = init
                resets += 1
            else:
                want = {**state, PREV_ACTIONS: acts[k, t][None], PREV_REWARDS: rews[k, t][None]}
            for name in rec:
                np.testing.assert_allclose(
                    rec[name][k, t + 1], want[name][0], rtol=1e-5, atol=1e-6, err_msg=f"{k},{t}"
                )
            inputs = {name: rec[name][k, t + 1][None] for name in rec}
    assert resets >= 2
    # The worker's carried state is what the next fragment starts from.
    carried = worker.get_state()["recurrent_inputs"]
    nxt = worker.sample()
    for name in rec:
        np.testing.assert_array_equal(_grid(nxt, name, n)[:, 0], carried[name])


def test_the_learner_sees_the_state_the_worker_acted_with() -> None:
    """Before any update the learner's sequence forward (padded sequences, each from the
    state stored at its first row) reproduces the distribution inputs and values the
    worker recorded while acting, row for row."""
    worker = _worker(LSTM_PREV)
    batch = SampleBatch.concat_samples([worker.sample(), worker.sample()])
    policy = worker.policy
    t = policy.tensors(batch)
    assert t[SEQ_BEGIN].dtype == torch.bool and int(t[SEQ_BEGIN].sum()) > batch.count / 7
    with torch.no_grad():
        inputs, values = policy.pi_vf(t)
    np.testing.assert_allclose(
        inputs.numpy(), batch[SampleBatch.ACTION_DIST_INPUTS], rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(values.numpy(), batch[SampleBatch.VF_PREDS], rtol=1e-4, atol=1e-5)


# --- sequences ---------------------------------------------------------------------------


def test_a_sequence_never_crosses_an_episode_boundary() -> None:
    worker = _worker(LSTM, num_envs=3, horizon=50)
    batch = SampleBatch.concat_samples([worker.sample() for _ in range(3)])
    starts, lens = sequence_layout(batch, 7)
    assert lens.dtype == np.int32 and starts.dtype == np.int64
    assert lens.sum() == batch.count and starts[0] == 0
    assert np.array_equal(starts[1:], np.cumsum(lens)[:-1])
    eps, ts = batch[SampleBatch.EPS_ID], batch[SampleBatch.T]
    done = batch[SampleBatch.TERMINATEDS] | batch[SampleBatch.TRUNCATEDS]
    assert done.sum() >= 3
    for s, ln in zip(starts, lens, strict=True):
        rows = np.arange(s, s + ln)
        assert 1 <= ln <= 7
        assert (eps[rows] == eps[s]).all()
        assert np.array_equal(ts[rows], ts[s] + np.arange(ln))
        assert not done[rows[:-1]].any(), "an episode ends inside a sequence"
    # Every row after an episode end starts a sequence.
    after_end = np.flatnonzero(done[:-1]) + 1
    assert np.isin(after_end, starts).all()
    # A sequence's stored state at an episode's first step is the initial state.
    first = starts[ts[starts] == 0]
    assert first.size and not batch["state_in_h"][first].any()


def test_a_minibatch_never_splits_a_sequence() -> None:
    worker = _worker(LSTM, num_envs=4, horizon=64)
    batch = SampleBatch.concat_samples([worker.sample(), worker.sample()])
    starts, lens = sequence_layout(batch, 7)
    owner = np.repeat(np.arange(len(starts)), lens)  # row -> its sequence
    rng = np.random.default_rng(0)
    for size in (1, 30, 100, 0):
        seen = np.zeros(batch.count, dtype=int)
        for idx in sequence_minibatch_indices(starts, lens, size, rng):
            seen[idx] += 1
            # whole sequences, each contiguous and in time order
            for seq in np.unique(owner[idx]):
                rows = idx[owner[idx] == seq]
                assert rows.size == lens[seq]
                assert np.array_equal(rows, np.arange(starts[seq], starts[seq] + lens[seq]))
            assert idx[0] in starts
        assert (seen == 1).all()
    # The learner's own epochs use these minibatches: whole sequences, shuffled.
    idxs = list(worker.policy._minibatch_indices(batch, 100))
    assert len(idxs) > 1
    assert all(
        np.unique(owner[i]).size == np.isin(starts, i).sum() and i[0] in starts for i in idxs
    )
    stats = worker.policy.train(batch, num_sgd_iter=2, sgd_minibatch_size=100)
    assert stats["num_env_steps_trained"] == batch.count
    assert np.isfinite(stats["total_loss"])
    # The whole-batch paths (one step; gradients without a step) read the same sequences.
    assert np.isfinite(worker.policy.learn_on_batch(batch)["total_loss"])
    grads, _ = worker.policy.compute_gradients(batch)
    assert all(np.isfinite(g).all() for g in grads)


def test_evaluation_keeps_the_state() -> None:
    """Greedy evaluation of a recurrent policy goes through ``compute_actions_recurrent``
    with each env's own state; the same seeds give the same returns however many envs."""
    from plangraph.rl.evaluation import run_episodes

    policy = _worker(LSTM_PREV).policy
    calls = []
    original = policy.compute_actions_recurrent

    def counted(obs: np.ndarray, inputs: Mapping[str, np.ndarray], explore: bool = True) -> Any:
        calls.append({k: v.copy() for k, v in inputs.items()})
        return original(obs, inputs, explore)

    policy.compute_actions_recurrent = counted  # type: ignore[method-assign]
    envs = [gym.make("CartPole-v1") for _ in range(3)]
    one = run_episodes(policy, envs[:1], [1, 2, 3])
    three = run_episodes(policy, envs, [1, 2, 3])
    assert np.array_equal(one.returns, three.returns)
    assert calls and any(np.abs(c["state_in_h"]).sum() > 0 for c in calls)


def test_a_recurrent_model_is_refused_by_an_algorithm_that_cannot_learn_with_it() -> None:
    plan = {
        "name": "a2c_lstm",
        "resources": {
            "workers": {
                "kind": "WorkerSet",
                "params": {
                    "env": "StatelessCartPole",
                    "policy": {"algo": "a2c", "model": {"type": "lstm"}},
                },
            }
        },
        "nodes": {
            "rollouts": {"op": "ParallelRollouts", "params": {"mode": "bulk_sync"}},
            "train": {"op": "TrainOneStep", "inputs": ["rollouts"]},
            "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"]},
        },
        "output": "metrics",
    }
    with pytest.raises(plangraph.PlanError) as info:
        plangraph.compile(plan)
    assert "PG184" in str(info.value) and "recurrent" in str(info.value)


def test_stateless_cartpole_hides_the_velocities() -> None:
    from plangraph.ops.env_extras import register_env_namespace

    register_env_namespace("StatelessCartPole")
    env, full = gym.make("StatelessCartPole"), gym.make("CartPole-v1")
    obs, _ = env.reset(seed=5)
    want, _ = full.reset(seed=5)
    assert env.observation_space.shape == (2,) and obs.dtype == np.float32
    np.testing.assert_array_equal(obs, want[[0, 2]])
    for _ in range(5):
        obs, r, term, trunc, _ = env.step(1)
        want, r2, term2, trunc2, _ = full.step(1)
        np.testing.assert_array_equal(obs, want[[0, 2]])
        assert (r, term, trunc) == (r2, term2, trunc2)
    assert env.spec is not None and env.spec.max_episode_steps == 500


# --- a user's own recurrent module ----------------------------------------------------------


class GRUSettings(plangraph.ModelSettings):
    """A user's recurrent model type: a GRU on the raw observation."""

    type: Literal["test_gru"] = "test_gru"
    recurrent: ClassVar[bool] = True
    size: int = Field(16, ge=1, description="GRU units.")
    max_seq_len: int = Field(10, ge=1, description="Most steps of a training sequence.")


class UserGRU(nn.Module):
    """obs [B, T, *obs_shape] and state {"h": [B, size]} -> features [B, T, size]."""

    def __init__(self, obs_dim: int, size: int) -> None:
        super().__init__()
        self.gru = nn.GRU(obs_dim, size, batch_first=True)
        self.out_dim = size

    def initial_state(self, batch_size: int) -> dict[str, torch.Tensor]:
        return {"h": torch.zeros(batch_size, self.out_dim)}

    def forward(
        self,
        obs: torch.Tensor,
        state: Mapping[str, torch.Tensor],
        prev_actions: torch.Tensor,
        prev_rewards: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        x = obs.reshape(obs.shape[0], obs.shape[1], -1).float()
        out, h = self.gru(x, state["h"].unsqueeze(0))
        return out, {"h": h.squeeze(0)}


def build_gru(settings: GRUSettings, observation_space: gym.spaces.Box) -> UserGRU:
    return UserGRU(int(np.prod(observation_space.shape)), settings.size)


@pytest.fixture
def user_gru() -> Any:
    plangraph.register_model("test_gru", config=GRUSettings, build=build_gru)
    yield
    from plangraph.ops.models import unregister_model

    unregister_model("test_gru")


def test_a_users_gru_trains_through_the_same_path(ray_session: None, user_gru: None) -> None:
    """A plan with the user's GRU runs on Ray rollout workers (the model type travels with
    the run), trains on sequences (the batch holds ``state_in_h``), changes the weights,
    and evaluates keeping its state."""
    plan = {
        "name": "ppo_gru",
        "resources": {
            "workers": {
                "kind": "WorkerSet",
                "params": {
                    "env": "StatelessCartPole",
                    "num_workers": 2,
                    "num_envs_per_worker": 4,
                    "rollout_fragment_length": 32,
                    "policy": {"algo": "ppo", "model": {"type": "test_gru", "size": 12}},
                },
            }
        },
        "nodes": {
            "rollouts": {"op": "ParallelRollouts", "params": {"mode": "bulk_sync"}},
            "train": {
                "op": "TrainOneStep",
                "inputs": ["rollouts"],
                "params": {"num_sgd_iter": 2, "sgd_minibatch_size": 64},
            },
            "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"]},
        },
        "output": "metrics",
    }
    with plangraph.build(plangraph.compile(plan), seed=1) as algo:
        policy = algo.ctx.worker_sets["workers"].local_policy
        assert policy.is_recurrent and policy.max_seq_len == 10
        assert sorted(policy.initial_state(2)) == ["state_in_h"]
        before = policy.get_weights()
        results = [algo.train() for _ in range(3)]
        after = policy.get_weights()
        evaluation = algo.evaluate(2)
    assert results[-1]["num_env_steps_trained"] == 3 * 256
    assert np.isfinite(results[-1]["learner"]["total_loss"])
    assert any(not np.array_equal(before[k], after[k]) for k in before if k.startswith("pi_"))
    assert evaluation["episode_len_mean"] >= 1


def test_explain_shows_the_sequence_length_and_the_state_size() -> None:
    from pathlib import Path

    plan = Path(__file__).resolve().parent.parent / "plans" / "ppo_lstm.json"
    text = plangraph.compile(plan).explain()
    assert "recurrent model 'lstm'" in text
    assert "256 float32 per sub-env" in text and "at most 16 env steps" in text


def test_a_recurrent_model_trained_from_replay_is_a_located_diagnostic() -> None:
    """Replay buffers sample single transitions: an algorithm that learns from replay and
    accepts recurrent models (a user's, here) is refused when its model is recurrent."""
    import json
    from pathlib import Path

    from plangraph.algorithms.dqn import DQNConfig
    from plangraph.ops.algorithms import register_algorithm, unregister_algorithm

    class RecurrentQConfig(DQNConfig):
        algo: Literal["test_recurrent_q"] = "test_recurrent_q"  # type: ignore[assignment]
        recurrent_models: ClassVar[bool] = True

    register_algorithm("test_recurrent_q", config=RecurrentQConfig, policy="tests:Nothing")
    try:
        path = Path(__file__).resolve().parent.parent / "plans" / "dqn.json"
        plan = json.loads(path.read_text(encoding="utf-8"))
        plan["resources"]["workers"]["params"]["policy"] = {
            "algo": "test_recurrent_q",
            "model": {"type": "lstm"},
        }
        with pytest.raises(plangraph.PlanError) as info:
            plangraph.compile(plan)
    finally:
        unregister_algorithm("test_recurrent_q")
    text = str(info.value)
    assert "PG171" in text and "recurrent" in text and "/nodes/" in text


def test_the_row_layout_known_before_launch_is_what_a_worker_samples() -> None:
    """Memory estimates before launch count a recurrent model's stored state."""
    from plangraph.rl.row_layout import sample_row_layout

    worker = _worker(LSTM_PREV, num_envs=2, horizon=5)
    batch = worker.sample()
    layout = sample_row_layout(
        worker.observation_space, worker.action_space, {"algo": "ppo", "model": LSTM_PREV}
    )
    got = {k: (tuple(v.shape[1:]), v.dtype) for k, v in batch.items()}
    assert got == layout
