"""Known-value GAE(lambda) and discounted returns (Schulman et al. 2016).

gamma = lambda = 0.5 keeps every number an exact binary fraction, so results are compared
for equality. Each case states the TD errors delta_t = r_t + gamma * boot_t - V_t by hand.
"""

from __future__ import annotations

import numpy as np

from plangraph.rl.postprocessing import (
    compute_advantages,
    compute_gae,
    compute_n_step_returns,
    compute_returns,
    continues_flat,
)
from plangraph.rl.sample_batch import SampleBatch

G = L = 0.5  # gamma, lambda; gamma * lambda = 0.25


def test_termination_inside_fragment_bootstraps_zero_and_stops() -> None:
    # rows 0-1: episode A terminates at row 1; rows 2-3: episode B, fragment cut after 3
    # with V(s_4) = 1.
    rewards = [1.0, 1.0, 1.0, 1.0]
    values = [1.0, 2.0, 1.0, 2.0]
    boot = [2.0, 0.0, 2.0, 1.0]  # V(s1), 0 (terminated), V(s3), V(s4) at the cut
    cont = [True, False, True, False]
    # deltas: 1 + .5*2 - 1 = 1 ; 1 - 2 = -1 ; 1 ; 1 + .5 - 2 = -0.5
    adv, targets = compute_gae(
        np.array(rewards), np.array(values), np.array(boot), np.array(cont), G, L
    )
    np.testing.assert_array_equal(adv, [0.75, -1.0, 0.875, -0.5])
    np.testing.assert_array_equal(targets, [1.75, 1.0, 1.875, 1.5])


def test_truncation_inside_fragment_bootstraps_from_final_obs_value() -> None:
    # rows 0-2: time limit hits after row 2; V(final obs) = 3 (not V(reset obs) = 0, not 0).
    # rows 3-4: next episode, cut after row 4 with V(s_5) = 2.
    rewards = np.ones(5)
    values = np.array([0.0, 1.0, 2.0, 0.0, 1.0])
    boot = np.array([1.0, 2.0, 3.0, 1.0, 2.0])
    cont = np.array([True, True, False, True, False])
    # deltas: 1.5, 1, 1 + 1.5 - 2 = 0.5, 1.5, 1
    adv, targets = compute_gae(rewards, values, boot, cont, G, L)
    np.testing.assert_array_equal(adv, [1.78125, 1.125, 0.5, 1.75, 1.0])
    np.testing.assert_array_equal(targets, adv + values)


def test_fragment_cut_bootstraps_from_next_obs_value() -> None:
    rewards = np.array([0.0, 0.0, 2.0])
    values = np.array([1.0, 1.0, 1.0])
    boot = np.array([1.0, 1.0, 4.0])  # V(s_3) = 4 at the cut
    cont = np.array([True, True, False])
    # deltas: -0.5, -0.5, 2 + 2 - 1 = 3
    adv, _ = compute_gae(rewards, values, boot, cont, G, L)
    np.testing.assert_array_equal(adv, [-0.5 + 0.25 * (-0.5 + 0.25 * 3), -0.5 + 0.25 * 3, 3.0])
    returns = compute_returns(rewards, boot, cont, G)
    np.testing.assert_array_equal(returns, [1.0, 2.0, 4.0])  # 2 + .5*4 = 4; .5*4; .5*2


def test_vectorised_over_sub_envs_matches_columns() -> None:
    rng = np.random.default_rng(0)
    r, v, b = rng.normal(size=(3, 6, 4))
    c = rng.random((6, 4)) < 0.7
    adv, tgt = compute_gae(r, v, b, c, 0.9, 0.8)
    for k in range(4):
        a_k, t_k = compute_gae(r[:, k], v[:, k], b[:, k], c[:, k], 0.9, 0.8)
        np.testing.assert_allclose(adv[:, k], a_k, rtol=1e-6)
        np.testing.assert_allclose(tgt[:, k], t_k, rtol=1e-6)


def test_lambda_one_value_targets_equal_bootstrapped_returns() -> None:
    rng = np.random.default_rng(1)
    r, v, b = rng.normal(size=(3, 20))
    c = rng.random(20) < 0.8
    c[-1] = False
    b[:-1] = np.where(c[:-1], v[1:], b[:-1])  # inside a trajectory, boot_t = V(s_{t+1})
    _, targets = compute_gae(r, v, b, c, 0.97, 1.0)
    np.testing.assert_allclose(targets, compute_returns(r, b, c, 0.97), rtol=1e-5, atol=1e-5)


def _fragment(eps_id: int, t0: int, n: int, terminated_last: bool, boot_last: float) -> SampleBatch:
    values = np.arange(t0, t0 + n, dtype=np.float32)  # V(s) = t
    boot = values + 1
    boot[-1] = 0.0 if terminated_last else boot_last
    term = np.zeros(n, bool)
    term[-1] = terminated_last
    return SampleBatch(
        {
            "rewards": np.ones(n, np.float32),
            "vf_preds": values,
            "bootstrap_values": boot,
            "terminateds": term,
            "truncateds": np.zeros(n, bool),
            "eps_id": np.full(n, eps_id, np.int64),
            "t": np.arange(t0, t0 + n, dtype=np.int64),
        }
    )


def test_two_episodes_concatenated_never_mix() -> None:
    # Episode 7 terminates after 2 rows; episode 8 is cut after 2 rows (V(next) = 2).
    batch = SampleBatch.concat_samples(
        [_fragment(7, 0, 2, True, 0.0), _fragment(8, 0, 2, False, 2.0)]
    )
    np.testing.assert_array_equal(continues_flat(batch), [True, False, True, False])
    compute_advantages(batch, G, L)
    # ep 7: deltas 1 + .5*1 - 0 = 1.5, 1 + 0 - 1 = 0 -> A = [1.5, 0]
    # ep 8: deltas 1.5, 1 + .5*2 - 1 = 1 -> A = [1.75, 1]
    np.testing.assert_array_equal(batch["advantages"], [1.5, 0.0, 1.75, 1.0])
    np.testing.assert_array_equal(batch["value_targets"], [1.5, 1.0, 1.75, 2.0])


def test_same_episode_split_across_fragments_is_not_rejoined_out_of_order() -> None:
    # Two fragments of the same episode concatenated in the wrong order: t jumps back, so
    # the chain breaks even though eps_id matches.
    first = _fragment(3, 0, 2, False, 2.0)
    second = _fragment(3, 2, 2, False, 4.0)
    wrong = SampleBatch.concat_samples([second, first])
    np.testing.assert_array_equal(continues_flat(wrong), [True, False, True, False])
    right = SampleBatch.concat_samples([first, second])
    np.testing.assert_array_equal(continues_flat(right), [True, True, True, False])


def test_n_step_returns_stop_at_episode_ends_and_fragment_cut() -> None:
    # rows 0-2: episode A ends after row 2 (terminated or truncated: the sum stops either
    # way); rows 3-6: episode B, fragment cut after row 6. Rewards 1, 2, 4, ... tell the
    # rows apart; gamma = 0.5, n = 3.
    rewards = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    cont = np.array([True, True, False, True, True, True, False])
    returns, steps = compute_n_step_returns(rewards, cont, 3, G)
    # row 0: 1 + .5*2 + .25*4 = 3; row 1: 2 + 2 = 4 (episode ends at 2); row 2: 4;
    # row 3: 8 + 8 + 8 = 24; row 4: 16 + 16 + 16 = 48; row 5: 32 + 32 (cut); row 6: 64.
    np.testing.assert_array_equal(returns, [3.0, 4.0, 4.0, 24.0, 48.0, 64.0, 64.0])
    np.testing.assert_array_equal(steps, [3, 2, 1, 3, 3, 2, 1])
    assert returns.dtype == np.float32 and steps.dtype == np.int64


def test_n_step_returns_with_n_1_are_the_rewards_and_vectorise_over_sub_envs() -> None:
    rewards = np.arange(12, dtype=np.float64).reshape(4, 3)  # [T=4, N=3]
    cont = np.ones((4, 3), dtype=bool)
    cont[-1] = False
    one, steps = compute_n_step_returns(rewards, cont, 1, G)
    np.testing.assert_array_equal(one, rewards)
    np.testing.assert_array_equal(steps, np.ones((4, 3)))
    two, steps = compute_n_step_returns(rewards, cont, 2, G)
    for k in range(3):
        col, col_steps = compute_n_step_returns(rewards[:, k], cont[:, k], 2, G)
        np.testing.assert_array_equal(two[:, k], col)
        np.testing.assert_array_equal(steps[:, k], col_steps)


def test_a_fragments_successor_observations_where_asked_are_those_of_next_obs() -> None:
    from plangraph.rl.postprocessing import Fragment

    obs = np.arange(2 * 4, dtype=np.float32).reshape(2, 4, 1)
    terminated = np.zeros((2, 4), dtype=bool)
    continues = np.ones((2, 4), dtype=bool)
    continues[:, -1] = False
    continues[0, 1] = False  # sub-env 0's episode ended at t = 1 (final obs 100)
    terminated[0, 1] = True
    fragment = Fragment(
        {"obs": obs, "terminateds": terminated},
        continues,
        last_obs=np.array([[50.0], [60.0]], np.float32),
        successors={(0, 1): np.array([100.0], np.float32)},
    )
    assert fragment.next_obs[..., 0].tolist() == [[1, 100, 3, 50], [5, 6, 7, 60]]
    mask = ~continues
    np.testing.assert_array_equal(fragment.next_obs_where(mask), fragment.next_obs[mask])
    assert fragment.next_obs_where(np.zeros((2, 4), dtype=bool)).shape == (0, 1)
