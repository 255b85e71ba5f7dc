"""IMPALA and APPO policies on real CartPole batches: updates, minibatches, target, state."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
import torch

from plangraph.algorithms.a2c import A2CConfig
from plangraph.algorithms.appo import APPOConfig
from plangraph.algorithms.appo.policy import APPOPolicy
from plangraph.algorithms.impala import IMPALAConfig
from plangraph.algorithms.impala.policy import IMPALAPolicy
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


BEHAVIOUR_SEED = RolloutWorker("CartPole-v1", 1, 1, IMPALAConfig(), seed=3).policy_seed


def _batch(config: object, n: int = 4, horizon: int = 25, fragments: int = 1) -> SampleBatch:
    """Fragments of a seed-3 worker, whose policy is ``make_policy(..., BEHAVIOUR_SEED)``."""
    worker = RolloutWorker("CartPole-v1", n, horizon, config, seed=3)
    return SampleBatch.concat_samples([worker.sample() for _ in range(fragments)])


def _weights_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_make_policy_builds_impala_and_appo_from_dicts() -> None:
    assert isinstance(make_policy(CARTPOLE_OBS, TWO_ACTIONS, {"algo": "impala"}), IMPALAPolicy)
    appo = make_policy(CARTPOLE_OBS, TWO_ACTIONS, {"algo": "appo", "clip_param": 0.3})
    assert isinstance(appo, APPOPolicy) and appo.config.clip_param == 0.3
    assert IMPALAConfig().grad_clip == 40.0 and APPOConfig().clip_param == 0.4


@pytest.mark.parametrize("config", [IMPALAConfig(lr=3e-3), APPOConfig(lr=3e-3)])
def test_learn_on_batch_fits_the_value_targets_without_nan(config: object) -> None:
    batch = _batch(config, fragments=2)  # 200 rows, two fragments concatenated
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, config, seed=BEHAVIOUR_SEED)
    first = policy.learn_on_batch(batch)
    for _ in range(60):
        last = policy.learn_on_batch(batch)
    for stats in (first, last):
        for key in ("total_loss", "policy_loss", "vf_loss", "entropy", "grad_gnorm"):
            assert np.isfinite(stats[key]), key
    assert last["vf_loss"] < 0.75 * first["vf_loss"]
    assert last["num_env_steps_trained"] == 200 and last["num_grad_steps"] == 1
    assert first["mean_is_ratio"] == pytest.approx(1.0, abs=1e-5)
    if isinstance(policy, APPOPolicy):
        # APPO's V-trace weights are target net / behaviour: 1 until the target moves.
        assert last["mean_is_ratio"] == pytest.approx(1.0, abs=1e-5)
        policy.update_target()
        last = policy.learn_on_batch(batch)
    # 61 steps off the behaviour policy: the importance ratios moved away from 1.
    assert abs(last["mean_is_ratio"] - 1.0) > 1e-4 and last["is_ratio_clip_frac"] > 0.0


@pytest.mark.parametrize("config", [IMPALAConfig(), APPOConfig()])
def test_minibatches_keep_segments_whole_and_cover_every_row(config: object) -> None:
    batch = _batch(config, fragments=2)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, config, seed=1)
    ends = batch["segment_ends"]
    segments = {
        (int(s[0]), int(s[-1]))
        for s in np.split(np.arange(batch.count), np.flatnonzero(ends)[:-1] + 1)
    }
    mbs = list(policy._minibatch_indices(batch, 32))
    assert len(mbs) > 2
    np.testing.assert_array_equal(np.sort(np.concatenate(mbs)), np.arange(batch.count))
    seen = set()
    for idx in mbs:
        assert ends[idx[-1]]  # vtrace's precondition
        for piece in np.split(idx, np.flatnonzero(ends[idx])[:-1] + 1):
            np.testing.assert_array_equal(piece, np.arange(piece[0], piece[-1] + 1))
            seen.add((int(piece[0]), int(piece[-1])))
    assert seen == segments
    assert [len(i) for i in policy._minibatch_indices(batch, 0)] == [batch.count]


@pytest.mark.parametrize("config", [IMPALAConfig(), APPOConfig(use_kl_loss=True)])
def test_train_with_epochs_and_minibatches(config: object) -> None:
    batch = _batch(config, fragments=2)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, config, seed=1)
    before = policy.get_weights()
    stats = policy.train(batch, num_sgd_iter=3, sgd_minibatch_size=64)
    steps = {int(s["step"]) for s in policy.optimizer.state.values()}
    assert steps == {stats["num_grad_steps"]} and stats["num_grad_steps"] >= 3 * 3
    assert stats["num_env_steps_trained"] == batch.count
    assert all(np.isfinite(v) for v in stats.values())
    assert not _weights_equal(before, policy.get_weights())


def test_appo_on_policy_first_step_is_the_impala_step() -> None:
    # Behaviour = target net = online net: the surrogate's gradient at ratio 1 is the
    # policy gradient and V-trace sees the same target policy, so the gradients agree.
    impala_cfg = IMPALAConfig(entropy_coeff=0.01)
    appo_cfg = APPOConfig(entropy_coeff=0.01, use_kl_loss=True)  # KL = 0, zero gradient
    worker = RolloutWorker("CartPole-v1", 4, 25, impala_cfg, seed=3)
    batch = worker.sample()
    impala = make_policy(CARTPOLE_OBS, TWO_ACTIONS, impala_cfg, seed=worker.policy_seed)
    appo = make_policy(CARTPOLE_OBS, TWO_ACTIONS, appo_cfg, seed=worker.policy_seed)
    assert _weights_equal(impala.get_weights(), worker.get_weights())
    g_impala, _ = impala.compute_gradients(batch)
    g_appo, s_appo = appo.compute_gradients(batch)
    for a, b in zip(g_impala, g_appo, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert s_appo["clip_frac"] == 0.0 and s_appo["kl"] == pytest.approx(0.0, abs=1e-7)


def test_appo_update_target_copies_the_online_net_and_adapts_kl() -> None:
    cfg = APPOConfig(lr=1e-2, use_kl_loss=True, kl_target=1e-6)
    batch = _batch(cfg)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, cfg, seed=1)
    assert isinstance(policy, APPOPolicy)
    init = {k: v.numpy().copy() for k, v in policy.target_model.state_dict().items()}
    for _ in range(5):
        stats = policy.learn_on_batch(batch)
    online = policy.get_weights()
    assert set(online) == set(init)  # workers get the online net only
    assert _weights_equal({k: v.numpy() for k, v in policy.target_model.state_dict().items()}, init)
    assert not _weights_equal(online, init)
    assert stats["kl"] > 2 * cfg.kl_target
    policy.update_target()
    target = {k: v.numpy() for k, v in policy.target_model.state_dict().items()}
    assert _weights_equal(target, online)
    assert policy.kl_coeff == pytest.approx(1.5)  # KL above 2 * kl_target
    assert policy.compute_gradients(batch)[1]["kl"] == pytest.approx(0.0, abs=1e-7)
    assert policy.update_kl(0.0) == pytest.approx(0.75)
    # Without use_kl_loss the coefficient stays.
    plain = make_policy(CARTPOLE_OBS, TWO_ACTIONS, APPOConfig(), seed=1)
    plain.learn_on_batch(batch)
    plain.update_target()
    assert plain.kl_coeff == 1.0


@pytest.mark.parametrize("config", [IMPALAConfig(), APPOConfig(use_kl_loss=True)])
def test_state_round_trip_resumes_identically(config: object) -> None:
    batch = _batch(config)
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, config, seed=1)
    policy.learn_on_batch(batch)
    if isinstance(policy, APPOPolicy):
        policy.update_target()
        policy.learn_on_batch(batch)
    state = policy.get_state()
    other = make_policy(CARTPOLE_OBS, TWO_ACTIONS, config, seed=99)
    other.set_state(state)
    s1 = policy.train(batch, num_sgd_iter=2, sgd_minibatch_size=40)
    s2 = other.train(batch, num_sgd_iter=2, sgd_minibatch_size=40)
    assert s1 == s2
    assert _weights_equal(policy.get_weights(), other.get_weights())
    if isinstance(policy, APPOPolicy):
        assert isinstance(other, APPOPolicy) and other.kl_coeff == policy.kl_coeff
        for k, v in policy.target_model.state_dict().items():
            np.testing.assert_array_equal(v.numpy(), other.target_model.state_dict()[k].numpy())


def test_batches_without_segments_are_refused_with_a_clear_error() -> None:
    a2c_batch = _batch(A2CConfig())
    policy = make_policy(CARTPOLE_OBS, TWO_ACTIONS, IMPALAConfig(), seed=1)
    with pytest.raises(KeyError, match="segment_ends"):
        policy.learn_on_batch(a2c_batch)
    batch = _batch(IMPALAConfig())
    with pytest.raises(ValueError, match="last row must end a segment"):
        policy.learn_on_batch(
            batch[: batch.count - 1] if not batch["segment_ends"][-2] else batch[:-3]
        )
    with pytest.raises(ValueError, match="last row of the batch must end a segment"):
        policy.train(batch[:10], num_sgd_iter=2, sgd_minibatch_size=4)
