"""PG (REINFORCE with a learned value baseline): exact returns to go, the loss and its
gradient, microbatch gradients, the plan and the commands that describe it.

gamma = 0.5 keeps every return an exact binary fraction, so returns are compared for
equality.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import plangraph
from plangraph import cli
from plangraph.algorithms.pg import PGConfig
from plangraph.algorithms.pg.policy import PGPolicy, returns_to_go, standardized
from plangraph.rl import Fragment, SampleBatch, gae_columns, make_policy
from plangraph.rl.rollout_worker import RolloutWorker, sample_row_layout

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"
CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
TWO_ACTIONS = gym.spaces.Discrete(2)
_SB = SampleBatch


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _fragment() -> Fragment:
    """Two sequences of 5 rows; obs are 1-D and ``V(obs) = obs[0]`` in the tests.

    * sequence 0: episode A terminates at row 1; episode B runs rows 2-4 and is cut by
      the fragment (sampling goes on from ``last_obs[0] = 4``);
    * sequence 1: episode C is truncated by a time limit at row 2 (final observation 8,
      while row 3 holds the next episode's reset observation 30); episode D runs rows 3-4
      and is cut (``last_obs[1] = -2``).
    """
    obs = np.array([[10, 11, 12, 13, 14], [20, 21, 22, 30, 31]], dtype=np.float32)[..., None]
    terminated = np.zeros((2, 5), dtype=bool)
    terminated[0, 1] = True
    truncated = np.zeros((2, 5), dtype=bool)
    truncated[1, 2] = True
    continues = np.array([[1, 0, 1, 1, 0], [1, 1, 0, 1, 0]], dtype=bool)
    return Fragment(
        columns={
            _SB.OBS: obs,
            _SB.ACTIONS: np.zeros((2, 5), dtype=np.int64),
            _SB.REWARDS: np.array([[1, 2, 1, 1, 2], [1, 1, 1, 2, 1]], dtype=np.float32),
            _SB.TERMINATEDS: terminated,
            _SB.TRUNCATEDS: truncated,
            _SB.EPS_ID: np.array([[0, 0, 1, 1, 1], [2, 2, 2, 3, 3]], dtype=np.int64),
            _SB.T: np.array([[5, 6, 0, 1, 2], [7, 8, 9, 0, 1]], dtype=np.int64),
        },
        continues=continues,
        last_obs=np.array([[4.0], [-2.0]], dtype=np.float32),
        successors={(1, 2): np.array([8.0], dtype=np.float32)},
    )


# G_t by hand, gamma = 0.5, V(s) = s:
#   seq 0: row 4 cut: 2 + .5 * V(4) = 4; row 3: 1 + .5 * 4 = 3; row 2: 1 + .5 * 3 = 2.5;
#          row 1 terminated: 2; row 0: 1 + .5 * 2 = 2
#   seq 1: row 4 cut: 1 + .5 * V(-2) = 0; row 3: 2 + .5 * 0 = 2;
#          row 2 truncated: 1 + .5 * V(8) = 5 (not V(30), the next episode's first obs);
#          row 1: 1 + .5 * 5 = 3.5; row 0: 1 + .5 * 3.5 = 2.75
EXPECTED_RETURNS = np.array([[2.0, 2.0, 2.5, 3.0, 4.0], [2.75, 3.5, 5.0, 2.0, 0.0]])


def test_returns_to_go_are_exact_and_bootstrap_only_at_truncations_and_cuts() -> None:
    calls: list[np.ndarray] = []

    def values(obs: np.ndarray) -> np.ndarray:
        calls.append(obs.copy())
        return obs[:, 0].astype(np.float32)

    returns = returns_to_go(_fragment(), values, 0.5)
    assert returns.dtype == np.float32 and returns.shape == (2, 5)
    np.testing.assert_array_equal(returns, EXPECTED_RETURNS)
    # V ran once, on the successors of the cut and truncated rows only, in (n, t) order:
    # (0, 4) -> last_obs[0], (1, 2) -> final obs, (1, 4) -> last_obs[1].
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0], [[4.0], [8.0], [-2.0]])
    # The same numbers GAE with lambda = 1 gives as value targets.
    gae = gae_columns(_fragment(), values, 0.5, 1.0)
    np.testing.assert_array_equal(gae[_SB.VALUE_TARGETS], EXPECTED_RETURNS)


def test_returns_to_go_of_terminated_episodes_need_no_value() -> None:
    frag = _fragment()
    frag.columns[_SB.TERMINATEDS][:, -1] = True  # both sequences end in a termination
    frag.columns[_SB.TERMINATEDS][1, 2] = True  # and episode C terminates, not truncates
    frag.columns[_SB.TRUNCATEDS][1, 2] = False

    def no_values(obs: np.ndarray) -> np.ndarray:
        raise AssertionError("a terminated episode bootstraps from 0, not from V")

    returns = returns_to_go(frag, no_values, 0.5)
    # seq 0: rows 4..2: 2, 2, 2; seq 1: row 4: 1, row 3: 2.5; row 2: 1, 1.5, 1.75
    np.testing.assert_array_equal(returns, [[2.0, 2.0, 2.0, 2.0, 2.0], [1.75, 1.5, 1.0, 2.5, 1.0]])


def test_the_policy_postprocesses_value_targets_only() -> None:
    policy = make_policy(
        gym.spaces.Box(-np.inf, np.inf, (1,), np.float32), TWO_ACTIONS, PGConfig(gamma=0.5)
    )
    assert isinstance(policy, PGPolicy)
    policy.compute_values = lambda obs: obs[:, 0].astype(np.float32)  # type: ignore[method-assign]
    cols = policy.postprocess_fragment(_fragment())
    assert list(cols) == [_SB.VALUE_TARGETS]
    np.testing.assert_array_equal(cols[_SB.VALUE_TARGETS], EXPECTED_RETURNS)


def test_a_sampled_batch_has_the_columns_the_config_declares() -> None:
    cfg = PGConfig(hiddens=(8,))
    worker = RolloutWorker("CartPole-v1", 2, 16, cfg, seed=0)
    batch = worker.sample()
    layout = sample_row_layout(worker.observation_space, worker.action_space, cfg)
    assert layout == {k: (v.shape[1:], v.dtype) for k, v in batch.items()}
    assert set(PGPolicy.loss_columns) <= set(batch.keys())


def _one_state_batch(n: int = 8) -> SampleBatch:
    """One CartPole state, actions 0 and 1 alternating: action 0 returned 10, action 1
    returned 0."""
    actions = np.arange(n) % 2
    return SampleBatch(
        {
            _SB.OBS: np.tile(np.array([[0.1, -0.2, 0.03, 0.4]], dtype=np.float32), (n, 1)),
            _SB.ACTIONS: actions.astype(np.int64),
            _SB.VALUE_TARGETS: np.where(actions == 0, 10.0, 0.0).astype(np.float32),
        }
    )


@pytest.mark.parametrize("normalize", [False, True])
def test_one_step_makes_the_better_action_likelier_and_moves_v_towards_the_returns(
    normalize: bool,
) -> None:
    cfg = PGConfig(normalize_advantages=normalize, lr=0.05, grad_clip=None, entropy_coeff=0.0)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=0)
    batch = _one_state_batch()
    obs = torch.from_numpy(batch[_SB.OBS][:1])

    def probs_and_value() -> tuple[float, float]:
        with torch.no_grad():
            inputs, value = policy.model.pi_vf(obs)
            return float(torch.softmax(inputs, -1)[0, 0]), float(value[0])

    p0, v0 = probs_and_value()
    stats = policy.learn_on_batch(batch)
    p1, v1 = probs_and_value()
    assert p1 > p0  # the action that returned 10 (above the baseline) became likelier
    assert abs(v1 - 5.0) < abs(v0 - 5.0)  # V(s) moved towards the mean return 5
    assert stats["num_grad_steps"] == 1 and stats["num_env_steps_trained"] == 8
    assert {"policy_loss", "vf_loss", "entropy", "total_loss", "vf_explained_var"} <= set(stats)


@pytest.mark.parametrize("normalize", [False, True])
def test_the_loss_is_the_reinforce_with_baseline_loss_and_v_gets_no_policy_gradient(
    normalize: bool,
) -> None:
    """The loss equals ``-mean[logp * A] + c_v * mean[(V - G)^2] - c_H * H`` computed by hand
    with ``A = G - V`` (standardised or not); the policy term sends no gradient into the
    value head, also when the value head shares the policy's encoder."""
    model = {"type": "mlp", "hiddens": [16], "vf_share_layers": True}
    cfg = PGConfig(model=model, normalize_advantages=normalize, entropy_coeff=0.01)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=1)
    batch = RolloutWorker("CartPole-v1", 2, 16, cfg, seed=2).sample()
    t = {c: torch.from_numpy(np.array(batch[c])) for c in PGPolicy.loss_columns}
    loss, stats = policy.compute_loss(t)

    inputs, values = policy.model.pi_vf(t[_SB.OBS])
    logits = torch.log_softmax(inputs, -1)
    logp = logits.gather(1, t[_SB.ACTIONS][:, None]).squeeze(1)
    entropy = -(logits.exp() * logits).sum(-1).mean()
    adv = (t[_SB.VALUE_TARGETS] - values).detach()
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    vf_loss = ((values - t[_SB.VALUE_TARGETS]) ** 2).mean()
    expected = -(logp * adv).mean() + 0.5 * vf_loss - 0.01 * entropy
    torch.testing.assert_close(loss, expected)
    assert stats["vf_loss"] == pytest.approx(float(vf_loss.detach()), rel=1e-5)

    vf_only = PGConfig(model=model, normalize_advantages=normalize, vf_loss_coeff=0.0)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, vf_only, seed=1)
    policy.compute_loss(t)[0].backward()
    head = policy.model.vf_head
    assert head.weight.grad is not None and head.bias.grad is not None
    assert not head.weight.grad.any() and not head.bias.grad.any()


def test_standardized_matches_the_pooled_microbatch_convention() -> None:
    adv = torch.tensor([1.0, 2.0, 4.0])
    torch.testing.assert_close(standardized(adv), (adv - 7 / 3) / (adv.std() + 1e-8))
    one = torch.tensor([3.0])
    assert standardized(one) is one


@pytest.mark.parametrize("normalize", [False, True])
def test_unequal_microbatch_gradients_average_to_the_whole_batch_gradient(
    normalize: bool,
) -> None:
    """ComputeGradients on microbatches of 100, 156 and 256 rows, AverageGradients: the
    gradient of the whole train batch, with the advantages standardised over all its rows
    when ``normalize_advantages``."""
    from plangraph.runtime.items import GradInfo
    from plangraph.runtime.ops.train import average_gradients

    cfg = PGConfig(normalize_advantages=normalize, entropy_coeff=0.01)
    batch = RolloutWorker("CartPole-v1", 4, 128, cfg, seed=3).sample()
    assert batch.count == 512
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=5)
    full, _ = policy.compute_gradients(batch)
    infos = []
    for lo, hi in ((0, 100), (100, 256), (256, 512)):
        micro = batch[lo:hi]
        grads, stats = policy.compute_gradients(micro)
        terms = policy.advantage_norm_terms(micro)
        assert (terms is not None) == normalize
        infos.append(GradInfo(grads, micro.env_steps(), stats, terms))
    averaged = average_gradients(infos)
    assert averaged.count == 512
    for f, g in zip(full, averaged.grads, strict=True):
        np.testing.assert_allclose(g, f, rtol=1e-5, atol=1e-7)
    if normalize:  # one microbatch alone: its terms give its own gradient
        own = infos[0].adv_norm
        assert own is not None
        for a, b in zip(own.gradient(), infos[0].grads, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_advantage_norm_terms_name_a_missing_column() -> None:
    cfg = PGConfig(normalize_advantages=True)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=0)
    batch = _one_state_batch()
    del batch[_SB.VALUE_TARGETS]
    with pytest.raises(KeyError, match=r"needs batch columns \['value_targets'\]"):
        policy.advantage_norm_terms(batch)


def test_learns_cartpole_in_process() -> None:
    cfg = PGConfig(lr=5e-3, gamma=0.98, entropy_coeff=0.01)  # plans/pg's, without the anneal
    worker = RolloutWorker("CartPole-v1", 8, 64, cfg, seed=0)
    returns: list[float] = []
    steps = 0
    while steps < 20_000:
        batch = worker.sample()
        steps += batch.env_steps()
        returns += batch.episode_returns.tolist()
        worker.policy.train(batch)
    assert np.mean(returns[-20:]) > 100.0  # a random policy averages about 22


# --- the plan and the commands --------------------------------------------------------


def test_plangraph_validate_pg_is_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", str(PLANS / "pg.json")]) == 0
    out = capsys.readouterr().out
    assert "ok (4 nodes)" in out and "warning" not in out
    compiled = plangraph.compile(PLANS / "pg.json")
    assert not compiled.diagnostics
    assert [n.op for n in compiled.nodes.values()] == [
        "ParallelRollouts",
        "ConcatBatches",
        "TrainOneStep",
        "StandardMetricsReporting",
    ]
    train = compiled.nodes["train"].params
    assert train.num_sgd_iter == 1 and train.sgd_minibatch_size == 0


def test_plangraph_ops_pg_describes_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ops", "pg"]) == 0
    out = capsys.readouterr().out
    assert 'a WorkerSet\'s "policy" with "algo": "pg"' in out
    assert "REINFORCE with a learned value baseline" in out
    for param in ("normalize_advantages", "vf_loss_coeff", "entropy_coeff", "gamma"):
        assert f"    {param}:" in out
    assert cli.main(["ops"]) == 0
    assert "pg" in capsys.readouterr().out.split("policy.algo): ")[1].split(" (")[0].split(", ")


def _microbatch_plan_with_pg() -> dict[str, Any]:
    plan = json.loads((PLANS / "a2c_microbatch.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    policy = plan["resources"]["workers"]["params"]["policy"]
    policy.pop("gae_lambda")
    policy["algo"] = "pg"
    policy["normalize_advantages"] = True
    plan["config"].update(num_workers=1, num_envs_per_worker=2, rollout_fragment_length=16)
    plan["config"].update(microbatch_size=32, train_batch_size=64)
    return plan


@pytest.mark.usefixtures("ray_session")
def test_the_microbatch_plan_runs_with_pg_on_a_remote_worker() -> None:
    """plans/a2c_microbatch with algo pg: ComputeGradients on 2 microbatches of 32 rows
    sampled by a remote rollout worker, averaged, one optimizer step per 64 rows."""
    compiled = plangraph.compile(_microbatch_plan_with_pg())
    assert not compiled.diagnostics, compiled.diagnostics
    algo = plangraph.build(compiled, seed=0)
    try:
        for _ in range(2):
            result = algo.train()
    finally:
        algo.stop()
    assert result["num_env_steps_sampled"] == 2 * 64
    assert result["num_env_steps_trained"] == 2 * 64
    learner = result["learner"]
    assert {"policy_loss", "vf_loss", "grad_gnorm"} <= set(learner)
