"""DDPG and TD3: the TD3 target (smoothing clipped, min of twin targets, n-step discount),
delayed actor updates, bounded exploration, per-worker noise, bit-identical state, the
compiler's refusals, and an exact resume of the TD3 plan on Ray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import plangraph
from plangraph.algorithms.ddpg import DDPGConfig
from plangraph.algorithms.ddpg.policy import DDPGPolicy
from plangraph.algorithms.td3 import TD3Config
from plangraph.algorithms.td3.policy import TD3Policy
from plangraph.rl.replay_buffer import ReplayBuffer
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.sample_batch import SampleBatch

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"
OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
SMALL = {"hiddens": [16, 16]}


def _batch(n: int = 64, seed: int = 0, n_steps: bool = False) -> SampleBatch:
    """``n`` random transitions of ``OBS``/``ACT``; a third of them terminal."""
    rng = np.random.default_rng(seed)
    cols: dict[str, np.ndarray] = {
        "obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "actions": rng.uniform(ACT.low, ACT.high, (n, 2)).astype(np.float32),
        "rewards": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "terminateds": np.arange(n) % 3 == 0,
    }
    if n_steps:
        cols["n_steps"] = (np.arange(n) % 3 + 1).astype(np.int64)
    return SampleBatch(cols)


def _tensors(batch: SampleBatch) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.asarray(batch[k])) for k in batch.keys()}


def _target_used(policy: Any, batch: SampleBatch) -> torch.Tensor:
    """The critics' target of ``compute_losses`` on ``batch``: ``Q_1(s, y) - td_error``."""
    t = _tensors(batch)
    _, stats = policy.compute_losses(t)
    with torch.no_grad():
        q1 = policy.model.q_values(t["obs"], policy._to_unit(t["actions"]))[0]
    return q1 - torch.as_tensor(stats["td_error"])


def _expected_target(
    policy: TD3Policy, batch: SampleBatch, gen_state: torch.Tensor
) -> torch.Tensor:
    """Fujimoto et al. 2018, Algorithm 1, written out in float64 from the formula:
    ``r + gamma^k (1 - d) min_j Q'_j(s', clip(mu'(s') + clip(sigma eps, -c, c), -1, 1))``."""
    cfg = policy.config
    t = _tensors(batch)
    gen = torch.Generator().manual_seed(0)
    gen.set_state(gen_state)
    with torch.no_grad():
        mu = policy.target_model.act(t["next_obs"])
        eps = torch.randn(mu.shape, generator=gen)
        noise = torch.clamp(cfg.target_noise * eps, -cfg.target_noise_clip, cfg.target_noise_clip)
        y = torch.clamp(mu + noise, -1.0, 1.0)
        q = policy.target_model.q_values(t["next_obs"], y).double()
    k = t["n_steps"].double() if "n_steps" in t else torch.ones(batch.count, dtype=torch.float64)
    not_done = 1.0 - t["terminateds"].double()
    return t["rewards"].double() + cfg.gamma**k * not_done * torch.minimum(q[0], q[1])


@pytest.mark.parametrize("n_steps", [False, True])
def test_td3_target_is_the_clipped_double_q_of_the_smoothed_target_action(n_steps: bool) -> None:
    # A large target noise: the clip to +-c decides almost every component.
    policy = TD3Policy(OBS, ACT, TD3Config(target_noise=5.0, target_noise_clip=0.3, **SMALL))
    with torch.no_grad():  # targets that differ from the online networks and from each other
        for p in policy.target_model.parameters():
            p.add_(0.05 * torch.randn(p.shape))
        policy.target_model.critics[1][-1].bias.add_(0.5)
    batch = _batch(n_steps=n_steps)
    gen_state = policy.noise_generator.get_state()
    got = _target_used(policy, batch)
    want = _expected_target(policy, batch, gen_state)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    # Both critics' targets are the min somewhere (the bias moved one, not all of its rows).
    t = _tensors(batch)
    with torch.no_grad():
        q = policy.target_model.q_values(t["next_obs"], policy.target_model.act(t["next_obs"]))
    assert (q[0] < q[1]).any()
    # Unclipped noise would give another target: the clip is applied.
    policy.noise_generator.set_state(gen_state)
    unclipped = TD3Config(target_noise=5.0, target_noise_clip=100.0, **SMALL)
    loose = TD3Policy(OBS, ACT, unclipped)
    loose.set_state(policy.get_state())
    loose.noise_generator.set_state(gen_state)
    assert not torch.allclose(_target_used(loose, batch).double(), want, atol=1e-3)


def test_ddpg_target_bootstraps_with_the_unsmoothed_target_actor_and_one_critic() -> None:
    policy = DDPGPolicy(OBS, ACT, DDPGConfig(gamma=0.9, **SMALL))
    assert len(policy.model.critics) == 1
    batch = _batch(n_steps=True)
    t = _tensors(batch)
    with torch.no_grad():
        next_q = policy.target_model.q_values(t["next_obs"], policy.target_model.act(t["next_obs"]))
    want = t["rewards"] + 0.9 ** t["n_steps"].float() * (1 - t["terminateds"].float()) * next_q[0]
    torch.testing.assert_close(_target_used(policy, batch), want)


def _actor_critic_weights(policy: Any) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    actor = [p.detach().clone() for p in policy.model.actor.parameters()]
    critics = [p.detach().clone() for p in policy.model.critics.parameters()]
    return actor, critics


def test_td3_steps_the_actor_on_every_second_update_only() -> None:
    policy = TD3Policy(OBS, ACT, TD3Config(**SMALL), seed=1)
    batch = _batch()
    before_actor, before_critics = _actor_critic_weights(policy)
    for update in range(1, 7):
        stats = policy.learn_on_batch(batch)
        actor, critics = _actor_critic_weights(policy)
        moved = [not torch.equal(a, b) for a, b in zip(actor, before_actor, strict=True)]
        assert all(not torch.equal(a, b) for a, b in zip(critics, before_critics, strict=True))
        if update % 2:  # odd updates: the actor keeps its weights (and its Adam state)
            assert not any(moved), update
            assert ("actor_loss" in stats) == (update > 1)
        else:
            assert all(moved), update
            assert "actor_loss" in stats
        actor_steps = policy.optimizers["actor"].state[policy.model.actor[0].weight]
        assert int(actor_steps.get("step", 0)) == update // 2
        before_actor, before_critics = actor, critics
    assert policy.num_updates == 6


def test_ddpg_steps_both_networks_every_update_and_its_gradients_apply_as_one() -> None:
    batch = _batch()
    a = DDPGPolicy(OBS, ACT, DDPGConfig(**SMALL), seed=3)
    b = DDPGPolicy(OBS, ACT, DDPGConfig(**SMALL), seed=3)
    before, _ = _actor_critic_weights(a)
    a.learn_on_batch(batch)
    after, _ = _actor_critic_weights(a)
    assert all(not torch.equal(x, y) for x, y in zip(after, before, strict=True))
    # ComputeGradients -> ApplyGradients (DDPG declares the capability) == learn_on_batch
    grads, _ = b.compute_gradients(batch)
    assert len(grads) == sum(len(ps) for ps in b.optimizer_params().values())
    b.apply_gradients(grads)
    for name, value in a.get_weights().items():
        np.testing.assert_array_equal(value, b.get_weights()[name], err_msg=name)
    assert [o.param_groups[0]["lr"] for o in a.optimizers.values()] == [1e-3, 1e-4]


def test_learning_rates_fall_back_to_lr_and_its_schedule() -> None:
    config = TD3Config(lr_schedule=((0, 1e-3), (100, 1e-4)), actor_lr=5e-4, **SMALL)
    policy = TD3Policy(OBS, ACT, config)
    policy.set_global_vars({"timestep": 50})
    assert policy.learning_rate("actor") == 5e-4
    assert policy.learning_rate("critic") == pytest.approx(5.5e-4)


@pytest.mark.parametrize("policy_class", [DDPGPolicy, TD3Policy])
def test_actions_stay_within_the_bounds_and_explore_with_the_set_noise(policy_class: Any) -> None:
    config = policy_class.config_type(random_timesteps=10, exploration_noise=0.2, **SMALL)
    policy = policy_class(OBS, ACT, config, seed=0)
    obs = np.zeros((4000, 3), np.float32)
    for timestep in (0, 10):  # uniform random, then the actor with noise
        policy.set_global_vars({"timestep": timestep})
        actions, extra = policy.compute_actions(obs)
        assert extra == {} and actions.dtype == np.float32 and actions.shape == (4000, 2)
        assert (actions >= ACT.low).all() and (actions <= ACT.high).all()
    greedy, _ = policy.compute_actions(obs[:3], explore=False)
    np.testing.assert_array_equal(greedy[0], greedy[1])
    # The noise's std is 0.2 half-ranges around mu(s) (near the centre: few clipped).
    noise = (actions - greedy[0]) / ((ACT.high - ACT.low) / 2)
    np.testing.assert_allclose(noise.std(0), [0.2, 0.2], rtol=0.1)


def test_per_worker_noise_follows_the_ape_x_formula() -> None:
    config = DDPGConfig(exploration_noise=0.4, per_worker_noise_alpha=7.0, **SMALL)
    assert [config.worker_noise(i, 3) for i in range(3)] == pytest.approx(
        [0.4 ** (1 + 7 * i / 2) for i in range(3)]
    )
    assert config.worker_noise(0, 1) == 0.4
    assert DDPGConfig(exploration_noise=0.3).worker_noise(2, 3) == 0.3  # no alpha: the same
    policy = DDPGPolicy(OBS, ACT, config)
    assert policy.noise_std == 0.4  # the learner's copy
    policy.set_exploration_worker(2, 3)
    assert policy.noise_std == pytest.approx(0.4**8)
    with pytest.raises(ValueError, match="not one of the 3 rollout workers"):
        policy.set_exploration_worker(3, 3)
    notes = config.worker_set_notes(3)
    assert "std_i = std ** (1 + 7 * i / (N - 1))" in notes[1]
    assert "worker 1: 0.4, worker 2: 0.0162, worker 3: 0.000655" in notes[2]


@pytest.mark.parametrize("algo", ["ddpg", "td3"])
def test_state_round_trip_makes_bit_identical_updates(algo: str, tmp_path: Path) -> None:
    """Five updates from a restored state (after an odd count: TD3's delay phase must be
    restored too) give the same weights, target weights and optimizer moments as the
    original policy's, bit for bit; the state goes through the checkpoint format (data
    only: ``write_state``/``read_state``)."""
    from plangraph.runtime.checkpoint import read_state, write_state

    worker = RolloutWorker("Pendulum-v1", 2, 16, {"algo": algo, **SMALL}, seed=0)
    policy = worker.policy
    buffer = ReplayBuffer(2000, seed=0)
    while len(buffer) < 256:
        buffer.add(worker.sample())
    batches = [buffer.sample(64) for _ in range(8)]
    for batch in batches[:3]:
        policy.learn_on_batch(batch)
        policy.update_target(tau=0.1)
    state = policy.get_state()
    twin = type(policy)(policy.observation_space, policy.action_space, policy.config, seed=7)
    write_state(tmp_path, state)
    twin.set_state(read_state(tmp_path))
    for p in (policy, twin):
        for batch in batches[3:]:
            p.learn_on_batch(batch)
            p.update_target(tau=0.1)
    a, b = policy.get_state(), twin.get_state()
    for key in ("weights", "target_weights"):
        for name, value in a[key].items():
            assert value.tobytes() == b[key][name].tobytes(), f"{key}/{name}"
    assert a["num_updates"] == b["num_updates"] == 8
    assert a["torch_rng"].tobytes() == b["torch_rng"].tobytes()
    for name in ("critic", "actor"):
        sa, sb = a["optimizers"][name]["state"], b["optimizers"][name]["state"]
        for i in sa:
            assert torch.equal(sa[i]["exp_avg"], sb[i]["exp_avg"]), (name, i)


@pytest.mark.parametrize("algo", ["ddpg", "td3"])
def test_the_compiler_refuses_ddpg_and_td3_on_discrete_actions(algo: str) -> None:
    compiled = plangraph.analyze(PLANS / f"{algo}.json", config={"env": "CartPole-v1"})
    (d,) = [d for d in compiled.diagnostics if d.code == "PG183"]
    assert "Discrete(2)" in d.message and f"{algo} policy acts in Box action spaces only" in (
        d.message
    )


def test_td3_cannot_serve_compute_gradients_but_ddpg_can() -> None:
    """The delayed actor update leaves an update without an actor loss, so TD3 declares
    no ``gradients`` capability and the compiler refuses ComputeGradients (PG170)."""
    plan = json.loads((PLANS / "a2c_microbatch.json").read_text())
    codes = {}
    for algo in ("ddpg", "td3"):
        plan["resources"]["workers"]["params"]["policy"] = {"algo": algo}
        compiled = plangraph.analyze(plan, config={"env": "Pendulum-v1"})
        codes[algo] = {d.code for d in compiled.diagnostics}
    assert "PG170" not in codes["ddpg"] and "PG170" in codes["td3"]


# -- on Ray ------------------------------------------------------------------------------

TINY = {
    "learning_starts": 64,
    "random_timesteps": 64,
    "train_batch_size": 32,
    "train_steps_per_rollout": 4,
    "target_update_freq": 64,
    "hiddens": [16, 16],
    "min_env_steps_per_iter": 96,
}


@pytest.mark.usefixtures("ray_session")
@pytest.mark.timeout(300)
def test_td3_plan_resumes_bit_identically(tmp_path: Path) -> None:
    """4 iterations straight == 2, save, restore into a fresh Algorithm, 2 more: the same
    results (but times) and the same learner, target and rollout-worker weights."""
    import ray

    compiled = plangraph.compile(PLANS / "td3.json", config=TINY)

    def weights(algo: Any) -> dict[str, bytes]:
        ws = algo.ctx.worker_sets["workers"]
        state = ws.local_policy.get_state()
        out = {f"learner/{k}": v.tobytes() for k, v in state["weights"].items()}
        out.update({f"target/{k}": v.tobytes() for k, v in state["target_weights"].items()})
        for i, w in enumerate(ray.get([w.get_weights.remote() for w in ws.remote_workers])):
            out.update({f"worker{i}/{k}": v.tobytes() for k, v in w.items()})
        return out

    def comparable(result: dict[str, Any]) -> dict[str, Any]:
        times = {"time_this_iter_s", "time_total_s", "timestamp", "timers"}
        return {k: v for k, v in result.items() if k not in times and "per_s" not in k}

    with plangraph.build(compiled, seed=0) as algo:
        straight = [comparable(algo.train()) for _ in range(4)]
        want = weights(algo)
    assert straight[-1]["counters"]["num_target_updates"] > 0
    with plangraph.build(compiled, seed=0) as algo:
        algo.train()
        algo.train()
        algo.save(tmp_path / "ckpt")
    with plangraph.build(compiled, seed=0) as algo:
        algo.restore(tmp_path / "ckpt")
        resumed = [comparable(algo.train()) for _ in range(2)]
        got = weights(algo)
    assert resumed == straight[2:]
    assert got.keys() == want.keys()
    assert [k for k in want if got[k] != want[k]] == []


@pytest.mark.usefixtures("ray_session")
@pytest.mark.timeout(300)
def test_apex_ddpg_runs_with_a_noise_scale_per_worker() -> None:
    """plans/apex_ddpg: two iterations on the replay actors and the learner thread, each
    rollout worker exploring with its own Ape-X noise std (and the learner's updates
    reaching the prioritized shards)."""
    import ray

    config = {
        "learning_starts": 256,
        "train_batch_size": 32,
        "min_env_steps_per_iter": 512,
        "hiddens": [16, 16],
        "training_intensity": 4.0,
    }
    compiled = plangraph.compile(PLANS / "apex_ddpg.json", config=config)
    with plangraph.build(compiled, seed=0) as algo:
        results = [algo.train() for _ in range(2)]
        ws = algo.ctx.worker_sets["workers"]
        stds = ray.get(
            [w.__ray_call__.remote(lambda self: self.policy.noise_std) for w in ws.remote_workers]
        )
    assert results[-1]["num_env_steps_trained"] > 0
    n = len(stds)
    base, alpha = 0.4, 7.0  # the plan's exploration_noise and per_worker_noise_alpha
    assert n == 2 and stds == pytest.approx([base ** (1 + alpha * i / (n - 1)) for i in range(n)])
    assert len(set(stds)) == n
