"""V-trace against a reference written from the paper's equations (Espeholt et al. 2018).

The reference evaluates eq. 1 as the written sum (not the recursion the implementation
uses) with plain Python loops, and the sec. 4.2 policy-gradient advantage from its ``v_s``.
Trajectories are built by hand: on-policy, off-policy with clipping, termination versus
truncation inside a fragment, a fragment cut, and many segments in one batch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from plangraph.algorithms.impala.vtrace import vtrace
from plangraph.rl.postprocessing import compute_gae

GAMMA = 0.9


def _clip(x: float, bar: float | None) -> float:
    return x if bar is None else min(bar, x)


def reference_vtrace(
    mu_logp: list[float],
    pi_logp: list[float],
    rewards: list[float],
    discounts: list[float],
    values: list[float],
    bootstrap: list[float],
    ends: list[bool],
    rho_bar: float | None = 1.0,
    pg_rho_bar: float | None = 1.0,
    c_bar: float | None = 1.0,
) -> tuple[list[float], list[float]]:
    """``(v_s, A_s)`` for every row, straight from eq. 1 and sec. 4.2.

    ``gamma^{t-s}`` of eq. 1 is the product of the per-row discounts ``discounts[s..t-1]``
    (they are all ``gamma`` inside a segment: only a segment's last row can terminate).
    """
    n = len(rewards)
    ratio = [math.exp(pi_logp[i] - mu_logp[i]) for i in range(n)]
    seg_end = []
    for s in range(n):
        e = s
        while not ends[e]:
            e += 1
        seg_end.append(e)

    def v_next(t: int) -> float:  # V(x_{t+1}), or the bootstrap after the segment
        return bootstrap[t] if t == seg_end[t] else values[t + 1]

    vs = []
    for s in range(n):
        total = values[s]
        for t in range(s, seg_end[s] + 1):
            weight = 1.0
            for i in range(s, t):
                weight *= discounts[i] * _clip(ratio[i], c_bar)
            delta = _clip(ratio[t], rho_bar) * (rewards[t] + discounts[t] * v_next(t) - values[t])
            total += weight * delta
        vs.append(total)
    adv = []
    for s in range(n):
        after = bootstrap[s] if s == seg_end[s] else vs[s + 1]
        adv.append(_clip(ratio[s], pg_rho_bar) * (rewards[s] + discounts[s] * after - values[s]))
    return vs, adv


def _run(inputs: dict[str, list], **clip: float | None) -> tuple[np.ndarray, np.ndarray]:
    t = {
        k: torch.tensor(v, dtype=torch.bool if k == "ends" else torch.float64)
        for k, v in inputs.items()
    }
    out = vtrace(
        t["mu_logp"],
        t["pi_logp"],
        t["rewards"],
        t["discounts"],
        t["values"],
        t["bootstrap"],
        t["ends"],
        clip_rho_threshold=clip.get("rho_bar", 1.0),
        clip_pg_rho_threshold=clip.get("pg_rho_bar", 1.0),
        clip_c_threshold=clip.get("c_bar", 1.0),
    )
    assert out.vs.dtype == torch.float64 and not out.vs.requires_grad
    return out.vs.numpy(), out.pg_advantages.numpy()


def _check_against_reference(inputs: dict[str, list], **clip: float | None) -> np.ndarray:
    vs, adv = _run(inputs, **clip)
    ref_vs, ref_adv = reference_vtrace(
        inputs["mu_logp"],
        inputs["pi_logp"],
        inputs["rewards"],
        inputs["discounts"],
        inputs["values"],
        inputs["bootstrap"],
        inputs["ends"],
        **clip,
    )
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-12, atol=1e-12)
    return vs


def _trajectory(
    n: int,
    ends: list[int],
    terminated: tuple[int, ...] = (),
    seed: int = 0,
    log_ratio_scale: float = 0.0,
) -> dict[str, list]:
    """``n`` rows; segments end on the rows in ``ends`` (the last row always ends one)."""
    rng = np.random.default_rng(seed)
    end_mask = [i in ends or i == n - 1 for i in range(n)]
    mu = rng.normal(-0.7, 0.3, n)
    pi = mu + rng.normal(0.0, log_ratio_scale, n)
    discounts = [0.0 if i in terminated else GAMMA for i in range(n)]
    bootstrap = [
        0.0 if i in terminated else float(rng.normal()) if end_mask[i] else 0.0 for i in range(n)
    ]
    return {
        "mu_logp": mu.tolist(),
        "pi_logp": pi.tolist(),
        "rewards": rng.normal(1.0, 1.0, n).tolist(),
        "discounts": discounts,
        "values": rng.normal(0.0, 2.0, n).tolist(),
        "bootstrap": bootstrap,
        "ends": end_mask,
    }


def test_on_policy_vs_is_the_n_step_bootstrapped_return() -> None:
    inp = _trajectory(7, ends=[], seed=1)  # one segment, cut after the last row
    inp["pi_logp"] = list(inp["mu_logp"])
    vs = _check_against_reference(inp)
    r, boot = inp["rewards"], inp["bootstrap"][-1]
    for s in range(7):
        n = 7 - s
        g = sum(GAMMA**i * r[s + i] for i in range(n)) + GAMMA**n * boot
        assert vs[s] == pytest.approx(g, rel=1e-12)


def test_on_policy_equals_gae_with_lambda_one_over_many_segments() -> None:
    inp = _trajectory(12, ends=[2, 6, 7], terminated=(6,), seed=2)
    inp["pi_logp"] = list(inp["mu_logp"])
    vs, adv = _run(inp)
    values = np.array(inp["values"])
    ends = np.array(inp["ends"])
    # compute_gae takes the successor value of every row; inside a segment it is the next
    # row's value.
    succ = np.where(ends, inp["bootstrap"], np.roll(values, -1))
    gae_adv, gae_targets = compute_gae(
        np.array(inp["rewards"])[:, None],
        values[:, None],
        succ[:, None],
        ~ends[:, None],
        GAMMA,
        1.0,
    )
    np.testing.assert_allclose(vs, gae_targets[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(adv, gae_adv[:, 0], rtol=1e-5, atol=1e-5)


def test_off_policy_with_clipping_matches_the_reference() -> None:
    inp = _trajectory(10, ends=[4], seed=3, log_ratio_scale=1.0)
    ratios = np.exp(np.array(inp["pi_logp"]) - np.array(inp["mu_logp"]))
    rho_bar, c_bar, pg_rho_bar = 1.0, 0.8, 1.3
    assert (ratios > 1.3).sum() >= 2 and (ratios < 0.8).sum() >= 2  # the clips bind
    vs = _check_against_reference(inp, rho_bar=rho_bar, pg_rho_bar=pg_rho_bar, c_bar=c_bar)
    unclipped = _check_against_reference(inp, rho_bar=None, pg_rho_bar=None, c_bar=None)
    assert not np.allclose(vs, unclipped)
    # Clipping at a threshold above every ratio is no clipping.
    big = float(ratios.max()) * 2
    same = _check_against_reference(inp, rho_bar=big, pg_rho_bar=big, c_bar=big)
    np.testing.assert_allclose(same, unclipped, rtol=1e-12)


@pytest.mark.parametrize("terminated", [True, False])
def test_termination_vs_truncation_inside_the_fragment(terminated: bool) -> None:
    # One sub-env fragment of 8 steps; its episode ends after step 3, a new one starts at 4.
    inp = _trajectory(
        8, ends=[3], terminated=(3,) if terminated else (), seed=4, log_ratio_scale=0.5
    )
    vs = _check_against_reference(inp, c_bar=0.9)
    rho3 = min(1.0, math.exp(inp["pi_logp"][3] - inp["mu_logp"][3]))
    v3, r3 = inp["values"][3], inp["rewards"][3]
    boot3 = 0.0 if terminated else inp["bootstrap"][3]
    assert vs[3] == pytest.approx(v3 + rho3 * (r3 + GAMMA * boot3 - v3), rel=1e-12)
    # Another bootstrap value at the episode end: ignored on termination (discount 0); on
    # truncation it moves the ended episode's targets only, never the next episode's.
    changed = dict(
        inp, bootstrap=[b + (5.0 if i == 3 else 0.0) for i, b in enumerate(inp["bootstrap"])]
    )
    vs2, _ = _run(changed, c_bar=0.9)
    np.testing.assert_array_equal(vs2[4:], vs[4:])
    if terminated:
        np.testing.assert_array_equal(vs2, vs)
    else:
        assert np.all(np.abs(vs2[:4] - vs[:4]) > 1e-6)
    # The next episode's first value is not the ended episode's successor.
    bumped = dict(inp, values=[v + (7.0 if i == 4 else 0.0) for i, v in enumerate(inp["values"])])
    vs3, _ = _run(bumped, c_bar=0.9)
    np.testing.assert_array_equal(vs3[:4], vs[:4])


def test_fragment_cut_bootstraps_from_the_next_observation_value() -> None:
    inp = _trajectory(6, ends=[], seed=5, log_ratio_scale=0.5)
    vs = _check_against_reference(inp)
    rho = min(1.0, math.exp(inp["pi_logp"][-1] - inp["mu_logp"][-1]))
    v, r, boot = inp["values"][-1], inp["rewards"][-1], inp["bootstrap"][-1]
    assert vs[-1] == pytest.approx(v + rho * (r + GAMMA * boot - v), rel=1e-12)
    # A cut is not a termination: the value after the cut reaches back along the trace.
    changed = dict(inp, bootstrap=[*inp["bootstrap"][:-1], inp["bootstrap"][-1] + 1.0])
    vs2, _ = _run(changed)
    assert np.all(vs2 > vs)


def test_several_segments_in_worker_layout_never_mix() -> None:
    # Two concatenated fragments of N = 3 sub-envs x T = 5 steps: row f*15 + k*5 + t.
    n_env, horizon = 3, 5
    ends, term = [], []
    for f in range(2):
        for k in range(n_env):
            base = f * 15 + k * 5
            ends.append(base + horizon - 1)  # fragment cut
        ends += [f * 15 + 1, f * 15 + 8]  # episode ends inside sub-envs 0 and 1
    term = [1, 23]
    inp = _trajectory(30, ends=ends, terminated=tuple(term), seed=6, log_ratio_scale=0.7)
    vs = _check_against_reference(inp, rho_bar=0.9, c_bar=0.7, pg_rho_bar=1.1)
    segments = np.split(np.arange(30), np.flatnonzero(inp["ends"])[:-1] + 1)
    assert len(segments) == 10
    for seg in segments:
        bumped = dict(
            inp, rewards=[r + (3.0 if i in seg else 0.0) for i, r in enumerate(inp["rewards"])]
        )
        vs2, _ = _run(bumped, rho_bar=0.9, c_bar=0.7, pg_rho_bar=1.1)
        others = np.setdiff1d(np.arange(30), seg)
        np.testing.assert_array_equal(vs2[others], vs[others])
        assert np.all(vs2[seg] != vs[seg])


def test_float32_numpy_inputs_and_empty_batch() -> None:
    inp = _trajectory(9, ends=[3], seed=7, log_ratio_scale=0.3)
    arrays = {k: np.asarray(v, dtype=bool if k == "ends" else np.float32) for k, v in inp.items()}
    out = vtrace(
        arrays["mu_logp"],
        arrays["pi_logp"],
        arrays["rewards"],
        arrays["discounts"],
        arrays["values"],
        arrays["bootstrap"],
        arrays["ends"],
    )
    assert out.vs.dtype == torch.float32
    ref_vs, ref_adv = reference_vtrace(
        *(
            inp[k]
            for k in ("mu_logp", "pi_logp", "rewards", "discounts", "values", "bootstrap", "ends")
        )
    )
    np.testing.assert_allclose(out.vs.numpy(), ref_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.pg_advantages.numpy(), ref_adv, rtol=1e-5, atol=1e-5)
    empty = vtrace(*([np.zeros(0, np.float32)] * 6), np.zeros(0, bool))
    assert empty.vs.shape == (0,)


def test_bad_inputs_raise_clear_errors() -> None:
    inp = _trajectory(5, ends=[], seed=8)
    t = {k: torch.tensor(v) for k, v in inp.items()}
    args = [t[k] for k in ("mu_logp", "pi_logp", "rewards", "discounts", "values", "bootstrap")]
    open_end = t["ends"].clone()
    open_end[-1] = False
    with pytest.raises(ValueError, match="last row must end a segment"):
        vtrace(*args, open_end)
    with pytest.raises(ValueError, match="rewards must be 1-D"):
        vtrace(args[0], args[1], args[2][:4], *args[3:], t["ends"])
