"""SAC: squashed-Gaussian log-probs, bounded actions, soft target updates, state."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch

import plangraph
from plangraph.algorithms.sac import SACConfig
from plangraph.algorithms.sac.policy import SACPolicy, squashed_sample
from plangraph.compiler.env_spaces import EnvSpaces, SpaceInfo
from plangraph.compiler.semantic_checks import space_problems
from plangraph.rl.replay_buffer import ReplayBuffer
from plangraph.rl.rollout_worker import RolloutWorker

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def test_squashed_log_prob_is_the_papers_change_of_variables() -> None:
    """log pi(y) = log N(u; mean, std) - sum_d log(1 - tanh(u_d)^2) (Haarnoja et al. 2018,
    appendix C, eq. 26), here in float64 from the formula, for moderate ``u``."""
    g = torch.Generator().manual_seed(0)
    mean, log_std = torch.randn(64, 2, generator=g), 0.5 * torch.randn(64, 2, generator=g)
    eps = torch.randn(64, 2, generator=g)
    y, logp = squashed_sample(mean, log_std, eps)
    m, s, e = mean.double(), log_std.double().exp(), eps.double()
    u = m + s * e
    torch.testing.assert_close(y, torch.tanh(u).float())
    gauss = -0.5 * e**2 - torch.log(s) - 0.5 * math.log(2 * math.pi)
    expected = (gauss - torch.log(1 - torch.tanh(u) ** 2)).sum(-1)
    torch.testing.assert_close(logp, expected.float(), rtol=1e-4, atol=1e-4)
    # Far in the tails tanh(u) rounds to +-1: the log-prob stays finite (no atanh(y)).
    _, tail = squashed_sample(torch.full((1, 2), 30.0), torch.zeros(1, 2), torch.zeros(1, 2))
    assert torch.isfinite(tail).all()


def test_actions_stay_within_the_bounds() -> None:
    policy = SACPolicy(OBS, ACT, SACConfig(random_timesteps=10), seed=0)
    obs = np.zeros((2000, 3), np.float32)
    for timestep in (0, 10):  # uniform random, then from the actor
        policy.set_global_vars({"timestep": timestep})
        actions, extra = policy.compute_actions(obs)
        assert extra == {} and actions.dtype == np.float32 and actions.shape == (2000, 2)
        assert (actions >= ACT.low).all() and (actions <= ACT.high).all()
        assert actions[:, 0].std() > 0.5
    greedy, _ = policy.compute_actions(obs[:3], explore=False)
    np.testing.assert_array_equal(greedy[0], greedy[1])


def test_soft_and_hard_target_updates() -> None:
    policy = SACPolicy(OBS, ACT, SACConfig(), seed=0)
    online, target = policy.model.q1, policy.target_critics[0]
    with torch.no_grad():
        for p in online.parameters():
            p.add_(1.0)
    before = [p.detach().clone() for p in target.parameters()]
    policy.update_target(tau=0.25)
    for t, b, o in zip(target.parameters(), before, online.parameters(), strict=True):
        torch.testing.assert_close(t, 0.75 * b + 0.25 * o)
    policy.update_target()
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        assert torch.equal(t, o)


def _batch(worker: RolloutWorker, buffer: ReplayBuffer, rows: int):  # type: ignore[no-untyped-def]
    while len(buffer) < rows:
        buffer.add(worker.sample())
    return buffer.sample(rows)


def test_an_update_moves_the_critics_actor_and_alpha_and_state_round_trips() -> None:
    worker = RolloutWorker("Pendulum-v1", 2, 16, {"algo": "sac", "hiddens": [32, 32]}, seed=0)
    policy = worker.policy
    assert isinstance(policy, SACPolicy)
    batch = _batch(worker, ReplayBuffer(1000, seed=0), 128)
    assert batch["actions"].shape == (128, 1) and "next_obs" in batch
    alpha = policy.alpha
    state = policy.get_state()
    stats = policy.train(batch)
    assert policy.alpha < alpha  # Pendulum's entropy starts above -dim(A)
    assert stats["td_error"].shape == (128,) and np.isfinite(stats["critic_loss"])
    after = policy.get_weights()
    # a restored policy makes exactly the same update
    twin = SACPolicy(policy.observation_space, policy.action_space, policy.config, seed=5)
    twin.set_state(state)
    twin.train(batch)
    for k, v in twin.get_weights().items():
        np.testing.assert_array_equal(v, after[k], err_msg=k)


def test_the_compiler_refuses_sac_where_it_cannot_act() -> None:
    cartpole = plangraph.analyze("plans/sac_pendulum.json", config={"env": "CartPole-v1"})
    (d,) = [d for d in cartpole.diagnostics if d.code == "PG183"]
    assert "Discrete(2)" in d.message and "sac policy acts in Box action spaces only" in d.message
    unbounded = EnvSpaces(
        "Unbounded-v0",
        SpaceInfo("Box", "Box(-inf, inf, (3,), float32)", (3,), "float32", False),
        SpaceInfo("Box", "Box(-inf, inf, (1,), float32)", (1,), "float32", False),
    )
    (problem,) = space_problems(SACConfig(), unbounded)
    assert problem.code == "PG183" and "infinite bounds" in problem.message
    for algo in ("a2c", "appo", "impala", "pg", "ppo"):  # and any user's registered
        assert algo in problem.hint


def test_sac_gradients_of_three_optimizers_apply_as_one_update() -> None:
    """ComputeGradients -> ApplyGradients on SAC: each optimizer's gradient laid out in
    ``optimizer_params`` order, applied by its own optimizer, is the same update as
    ``learn_on_batch`` (and the plan is accepted: SAC declares the capability)."""
    import json

    from plangraph.rl.policies import make_policy
    from plangraph.rl.rollout_worker import RolloutWorker

    plan = json.loads(open("plans/a2c_microbatch.json").read())
    plan["resources"]["workers"]["params"]["policy"] = {"algo": "sac"}
    compiled = plangraph.analyze(plan, config={"env": "Pendulum-v1"})
    assert not [d for d in compiled.diagnostics if d.code == "PG170"]
    config = {"algo": "sac", "hiddens": [16, 16]}
    worker = RolloutWorker("Pendulum-v1", 2, 16, config, seed=0)
    batch = worker.sample()
    a = make_policy(worker.observation_space, worker.action_space, config, seed=3)
    b = make_policy(worker.observation_space, worker.action_space, config, seed=3)
    a.learn_on_batch(batch)
    grads, _ = b.compute_gradients(batch)
    assert len(grads) == sum(len(ps) for ps in b.optimizer_params().values())
    b.apply_gradients(grads)
    for name, value in a.get_weights().items():
        np.testing.assert_array_equal(value, b.get_weights()[name], err_msg=name)
