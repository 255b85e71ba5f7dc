"""Torch policies: update arithmetic, schedules, DQN targets, state, and a learning check."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
import torch

from plangraph.algorithms.a2c import A2CConfig
from plangraph.algorithms.dqn import DQNConfig
from plangraph.algorithms.ppo import PPOConfig
from plangraph.rl.policies import make_policy
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.sample_batch import SampleBatch


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Small MLPs gain nothing from intra-op threads; on 2 shared cores they only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
TWO_ACTIONS = gym.spaces.Discrete(2)


def _cartpole_batch(config: object, n: int = 4, horizon: int = 16) -> SampleBatch:
    return RolloutWorker("CartPole-v1", n, horizon, config, seed=3).sample()


def _weights_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_a2c_train_equals_apply_of_compute_gradients_and_is_one_step() -> None:
    cfg = A2CConfig(normalize_advantages=True)
    batch = _cartpole_batch(cfg)
    p1 = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=5)
    p2 = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=5)
    before = p1.get_weights()
    assert _weights_equal(before, p2.get_weights())
    stats = p1.train(batch, num_sgd_iter=1, sgd_minibatch_size=0)
    grads, _ = p2.compute_gradients(batch)
    assert [g.shape for g in grads] == [tuple(p.shape) for p in p2.model.parameters()]
    p2.apply_gradients(grads)
    assert _weights_equal(p1.get_weights(), p2.get_weights())
    assert not _weights_equal(p1.get_weights(), before)
    assert stats["num_grad_steps"] == 1 and stats["num_env_steps_trained"] == batch.count
    steps = {int(s["step"]) for s in p1.optimizer.state.values()}
    assert steps == {1}  # exactly one Adam step


def test_microbatch_gradients_average_to_the_full_batch_gradient() -> None:
    cfg = A2CConfig(normalize_advantages=False)
    batch = _cartpole_batch(cfg)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=5)
    full, _ = policy.compute_gradients(batch)
    half = batch.count // 2
    g1, _ = policy.compute_gradients(batch[:half])
    g2, _ = policy.compute_gradients(batch[half:])
    for f, a, b in zip(full, g1, g2, strict=True):
        np.testing.assert_allclose((a + b) / 2, f, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("normalize", [False, True])
def test_unequal_microbatch_gradients_average_by_rows_to_the_whole_batch_gradient(
    normalize: bool,
) -> None:
    """AverageGradients of microbatches of 300, 200 and 524 rows of one train batch is the
    gradient of the whole batch: weighted by rows, and (normalize_advantages) with the
    advantages standardised by the whole train batch's mean and std."""
    from plangraph.runtime.items import GradInfo
    from plangraph.runtime.ops.train import average_gradients

    cfg = A2CConfig(normalize_advantages=normalize)
    batch = _cartpole_batch(cfg, n=8, horizon=128)
    assert batch.count == 1024
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=5)
    full, _ = policy.compute_gradients(batch)
    infos = []
    for lo, hi in ((0, 300), (300, 500), (500, 1024)):
        micro = batch[lo:hi]
        grads, stats = policy.compute_gradients(micro)
        if normalize:  # the split gradient that lets the average standardise per train batch
            infos.append(
                GradInfo(grads, micro.env_steps(), stats, policy.advantage_norm_terms(micro))
            )
        else:
            infos.append(GradInfo(grads, micro.env_steps(), stats))
    averaged = average_gradients(infos)
    assert averaged.count == 1024
    for f, g in zip(full, averaged.grads, strict=True):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, f, rtol=1e-5, atol=1e-7)
    # Pooling is associative: averaging the first two, then with the third, agrees.
    nested = average_gradients([average_gradients(infos[:2]), infos[2]])
    for f, g in zip(full, nested.grads, strict=True):
        np.testing.assert_allclose(g, f, rtol=1e-5, atol=1e-7)


def test_ppo_epochs_minibatches_counters_and_kl() -> None:
    cfg = PPOConfig(lr=1e-3)
    batch = _cartpole_batch(cfg, n=4, horizon=25)  # 100 rows
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=1)
    stats = policy.train(batch, num_sgd_iter=3, sgd_minibatch_size=32)
    assert stats["num_grad_steps"] == 3 * 4  # minibatches of 32, 32, 32, 4 per epoch
    assert stats["num_env_steps_trained"] == 100  # once per batch, not per minibatch pass
    for key in ("policy_loss", "vf_loss", "entropy", "kl", "clip_frac", "total_loss"):
        assert isinstance(stats[key], float) and np.isfinite(stats[key])
    assert stats["kl"] > 0.0
    steps = {int(s["step"]) for s in policy.optimizer.state.values()}
    assert steps == {12}


@pytest.mark.parametrize(
    ("column", "grad_clip"), [("obs", 0.5), ("value_targets", 0.5), ("obs", None)]
)
def test_a_nan_in_the_loss_refuses_the_step_and_keeps_the_weights(
    column: str, grad_clip: float | None
) -> None:
    """A NaN observation (the policy's logits: once caught by torch's argument checks,
    which the learner no longer runs) or value target (only the value loss) stops the
    minibatch at its gradient: NonFiniteGradientError names the policy and the optimizer,
    and no optimizer step is taken, with or without clipping."""
    from plangraph.errors import NonFiniteGradientError, PlangraphError

    cfg = PPOConfig(lr=1e-3, grad_clip=grad_clip)
    batch = _cartpole_batch(cfg, n=4, horizon=25)
    batch[column][7] = np.nan
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=1)
    before = policy.get_weights()
    with pytest.raises(
        NonFiniteGradientError, match=r"PPOPolicy \(ppo\).*'optimizer' loss.*not finite"
    ) as e:
        policy.train(batch, num_sgd_iter=2, sgd_minibatch_size=0)
    assert isinstance(e.value, PlangraphError) and isinstance(e.value, FloatingPointError)
    assert f"in this minibatch: NaN or infinite values in column {column!r} (1 of 100 rows)" in (
        str(e.value)
    )
    assert _weights_equal(policy.get_weights(), before)
    assert all(p.grad is None for p in policy.model.parameters())
    batch[column][7] = 0.0  # the same policy trains on as soon as the input is clean
    assert np.isfinite(policy.train(batch)["total_loss"])
    assert not _weights_equal(policy.get_weights(), before)


def test_ppo_reports_the_entropy_it_trains_on_only_when_its_coefficient_is_not_zero() -> None:
    """With entropy_coeff 0 the entropy is reported but left out of the loss's graph; the
    same weights and batch give the same entropy, and a coefficient subtracts it."""
    batch = _cartpole_batch(PPOConfig(), n=2, horizon=20)
    losses, stats = {}, {}
    for coeff in (0.0, 0.5):
        policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, PPOConfig(entropy_coeff=coeff), seed=1)
        loss, stats[coeff] = policy.compute_loss(policy.tensors(batch))
        losses[coeff] = loss.item()
        _, quiet = policy.compute_loss(policy.tensors(batch), with_stats=False)
        assert quiet == {}
    assert stats[0.0]["entropy"] == stats[0.5]["entropy"] > 0.0
    assert losses[0.5] == pytest.approx(losses[0.0] - 0.5 * stats[0.0]["entropy"], rel=1e-5)


def test_ppo_first_minibatch_ratio_is_one_for_the_behaviour_policy() -> None:
    cfg = PPOConfig(hiddens=(16,))
    worker = RolloutWorker("CartPole-v1", 2, 10, cfg, seed=0)
    b = worker.sample()
    _, stats = worker.policy.compute_gradients(b)
    assert stats["kl"] == pytest.approx(0.0, abs=1e-6)
    assert stats["clip_frac"] == 0.0


def test_lr_schedule_reaches_the_optimizer() -> None:
    cfg = A2CConfig(lr_schedule=((0, 1e-3), (1000, 1e-4)))
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=0)
    assert policy.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    policy.set_global_vars({"timestep": 500})
    assert policy.optimizer.param_groups[0]["lr"] == pytest.approx(5.5e-4)
    stats = policy.learn_on_batch(_cartpole_batch(cfg))
    assert stats["cur_lr"] == pytest.approx(5.5e-4)
    policy.set_global_vars({"timestep": 10**6})
    assert policy.optimizer.param_groups[0]["lr"] == pytest.approx(1e-4)
    # An optimizer built after the schedule moved (on first use) starts where it is.
    later = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=0)
    later.set_global_vars({"timestep": 500})
    assert later.learn_on_batch(_cartpole_batch(cfg))["cur_lr"] == pytest.approx(5.5e-4)


def _linear_dqn(double_q: bool) -> object:
    cfg = DQNConfig(hiddens=(), gamma=0.5, double_q=double_q, huber_delta=1.0, grad_clip=None)
    obs_space = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)
    policy = make_policy(obs_space, TWO_ACTIONS, cfg, seed=0)
    policy.set_weights(
        {"q_net.0.weight": np.array([[1.0], [2.0]], np.float32), "q_net.0.bias": np.zeros(2)}
    )  # Q(s) = [s, 2s]
    policy.target_model.load_state_dict(
        {"q_net.0.weight": torch.tensor([[3.0], [1.0]]), "q_net.0.bias": torch.zeros(2)}
    )  # Q_target(s) = [3s, s]
    return policy


def _dqn_batch(weights: list[float] | None = None) -> SampleBatch:
    cols = {
        "obs": np.array([[1.0], [1.0]], np.float32),
        "actions": np.array([0, 1]),
        "rewards": np.array([1.0, 1.0], np.float32),
        "next_obs": np.array([[2.0], [2.0]], np.float32),
        "terminateds": np.array([False, True]),
        "truncateds": np.array([True, False]),  # truncation must still bootstrap
    }
    if weights is not None:
        cols["weights"] = np.array(weights, np.float32)
    return SampleBatch(cols)


def test_dqn_double_q_target_td_error_and_huber_loss() -> None:
    # Row 0: Q(1,0) = 1; a* = argmax Q(2) = argmax [2, 4] = 1; Q_target(2, 1) = 2;
    #        y = 1 + 0.5 * 2 = 2 -> td = -1.   Row 1 (terminated): Q(1,1) = 2, y = 1, td = 1.
    policy = _linear_dqn(double_q=True)
    _, stats = policy.compute_gradients(_dqn_batch())
    np.testing.assert_array_equal(stats["td_error"], np.array([-1.0, 1.0], np.float32))
    assert stats["td_error"].dtype == np.float32
    assert stats["loss"] == pytest.approx(0.5)  # huber(1) = 0.5 for both rows
    _, weighted = policy.compute_gradients(_dqn_batch(weights=[1.0, 0.0]))
    assert weighted["loss"] == pytest.approx(0.25)


def test_dqn_n_step_rows_bootstrap_with_gamma_to_the_n_steps() -> None:
    # Row 0 spans 3 steps: y = 1 + 0.5**3 * Q_target(2, a* = 1) = 1 + 0.125 * 2 = 1.25,
    # td = Q(1, 0) - y = -0.25. Row 1 (terminated) is unaffected: td = 1.
    policy = _linear_dqn(double_q=True)
    batch = _dqn_batch()
    batch["n_steps"] = np.array([3, 2])
    _, stats = policy.compute_gradients(batch)
    np.testing.assert_array_equal(stats["td_error"], np.array([-0.25, 1.0], np.float32))


def test_dqn_vanilla_target_uses_target_max() -> None:
    # y = 1 + 0.5 * max Q_target(2) = 1 + 0.5 * 6 = 4 -> td = -3; huber = 3 - 0.5 = 2.5
    policy = _linear_dqn(double_q=False)
    _, stats = policy.compute_gradients(_dqn_batch())
    np.testing.assert_array_equal(stats["td_error"], [-3.0, 1.0])
    assert stats["loss"] == pytest.approx((2.5 + 0.5) / 2)


def test_dqn_update_target_and_state_round_trip() -> None:
    policy = _linear_dqn(double_q=True)
    policy.learn_on_batch(_dqn_batch())
    online = policy.get_weights()
    assert not np.array_equal(
        policy.target_model.state_dict()["q_net.0.weight"].numpy(), online["q_net.0.weight"]
    )
    state = policy.get_state()
    policy.update_target()
    for k, v in policy.target_model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), online[k])
    # restore the pre-update state into a fresh policy: same target, same next step
    other = _linear_dqn(double_q=True)
    other.set_state(state)
    policy.set_state(state)
    s1 = policy.learn_on_batch(_dqn_batch())
    s2 = other.learn_on_batch(_dqn_batch())
    np.testing.assert_array_equal(s1["td_error"], s2["td_error"])
    assert _weights_equal(policy.get_weights(), other.get_weights())


def test_dqn_epsilon_anneals_over_env_steps_and_drives_exploration() -> None:
    cfg = DQNConfig(epsilon_initial=1.0, epsilon_final=0.1, epsilon_timesteps=1000)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=0)
    assert policy.epsilon == 1.0
    policy.set_global_vars({"timestep": 500})
    assert policy.epsilon == pytest.approx(0.55)
    policy.set_global_vars({"timestep": 5000})
    assert policy.epsilon == pytest.approx(0.1)
    obs = np.zeros((20000, 4), np.float32)
    greedy, _ = policy.compute_actions(obs, explore=False)
    acts, _ = policy.compute_actions(obs, explore=True)
    # a random action differs from the greedy one half the time: rate eps / 2
    assert np.mean(acts != greedy) == pytest.approx(0.05, abs=0.01)


def test_dqn_train_with_minibatches_returns_td_error_in_row_order() -> None:
    policy = _linear_dqn(double_q=True)
    batch = SampleBatch.concat_samples([_dqn_batch()] * 3)
    stats = policy.train(batch, num_sgd_iter=1, sgd_minibatch_size=2)
    assert stats["td_error"].shape == (6,)
    assert stats["num_env_steps_trained"] == 6 and stats["num_grad_steps"] == 3


@pytest.mark.parametrize(
    ("config", "sgd"),
    [(PPOConfig(), (10, 128)), (A2CConfig(gae_lambda=0.95), (1, 0))],
    ids=["ppo", "a2c"],
)
def test_learns_cartpole_in_process(config: object, sgd: tuple[int, int]) -> None:
    horizon = 64 if config.algo == "ppo" else 8
    worker = RolloutWorker("CartPole-v1", 8, horizon, config, seed=0)
    returns: list[float] = []
    steps = 0
    while steps < 20_000:
        batch = worker.sample()
        steps += batch.env_steps()
        returns += batch.episode_returns.tolist()
        worker.policy.train(batch, *sgd)
    assert np.mean(returns[-20:]) > 100.0  # a random policy averages about 22


def test_fast_mlp_forward_equals_module_forward() -> None:
    from plangraph.rl.models import mlp, mlp_forward

    for activation in ("tanh", "relu"):
        net = mlp(5, (7, 3), 2, activation, out_gain=1.0)
        x = torch.randn(4, 5)
        assert torch.equal(mlp_forward(net, x), net(x))


def test_config_capabilities_mirror_the_policy_classes() -> None:
    """The compiler's capability data (each registered config's class variables) says what
    the registered torch classes do."""
    from plangraph.ops.algorithms import algorithms
    from plangraph.ops.policies import CAPABILITIES

    for algo, spec in algorithms().items():
        model, cls = spec.config, spec.policy_class()
        assert model.capabilities <= set(CAPABILITIES)
        assert ("target_network" in model.capabilities) == hasattr(cls, "update_target"), algo
        if "gradients" in model.capabilities:  # the base class has both methods; an
            # algorithm leaves the capability out where they do not fit (TD3's delayed
            # actor update), and the compiler then refuses the gradient operators (PG170)
            assert callable(getattr(cls, "compute_gradients", None)), algo
            assert callable(getattr(cls, "apply_gradients", None)), algo


def test_each_policy_class_takes_its_own_config_model_only() -> None:
    """A registered algorithm's policy class trains on its registered config model; any
    other config (or an unvalidated dict) is refused by name before a network is built."""
    from plangraph.algorithms.a2c.policy import A2CPolicy
    from plangraph.ops.algorithms import algorithms

    for spec in algorithms().values():
        assert spec.policy_class().config_type is spec.config
    with pytest.raises(
        TypeError,
        match=r"A2CPolicy takes a config of type A2CConfig, got "
        r"PPOConfig \(algo='ppo'\)",
    ):
        A2CPolicy(CARTPOLE_OBS, TWO_ACTIONS, PPOConfig())
    with pytest.raises(TypeError, match="got dict; make_policy"):
        A2CPolicy(CARTPOLE_OBS, TWO_ACTIONS, {"algo": "a2c"})  # type: ignore[arg-type]


@pytest.mark.parametrize("algo", ["dqn", "appo", "sac"])
def test_held_modules_such_as_target_networks_survive_a_checkpoint(algo: str) -> None:
    """``TorchPolicy.get_state`` saves every module a policy holds besides its model (no
    code of the algorithm's own), and reads the layout of earlier checkpoints too."""
    env = "Pendulum-v1" if algo == "sac" else "CartPole-v1"
    config = {"algo": algo, "hiddens": [8]}
    worker = RolloutWorker(env, 2, 8, config, seed=0)
    policy = worker.policy
    held = policy.held_modules()
    assert held and all("target" in name for name in held)
    for module in held.values():  # make the targets differ from any fresh policy's
        with torch.no_grad():
            for p in module.parameters():
                p.add_(1.0)
    state = policy.get_state()
    assert set(state["modules"]) == set(held)

    def restored(saved: dict) -> dict:
        fresh = make_policy(worker.observation_space, worker.action_space, config, seed=9)
        fresh.set_state(saved)
        return {n: m.state_dict() for n, m in fresh.held_modules().items()}

    def same(a: dict, b: dict) -> None:
        for name in a:
            for key, value in a[name].items():
                assert torch.equal(value, b[name][key]), (name, key)

    expected = {n: m.state_dict() for n, m in held.items()}
    same(restored(state), expected)
    legacy = {k: v for k, v in state.items() if k != "modules"}
    weights = list(state["modules"].values())
    legacy["target_weights"] = weights if len(weights) > 1 else weights[0]
    same(restored(legacy), expected)
