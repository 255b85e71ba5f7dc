"""Observation normalisation: running moments pooled over the rollout workers, synced with
each weight broadcast, and saved in checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import ray

import plangraph
from plangraph.rl.wrappers import NormalizeObservation, merge_moments

ROOT = Path(__file__).resolve().parent.parent
TIME_KEYS = {"time_this_iter_s", "time_total_s", "timestamp", "env_steps_per_s"}
TIME_KEYS |= {"env_steps_per_s_total", "timers"}


def test_pooled_moments_are_those_of_all_observations() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(2.0, 3.0, (50, 4)), rng.normal(-1.0, 0.5, (30, 4))

    def moments(x: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        return float(len(x)), x.mean(0), ((x - x.mean(0)) ** 2).sum(0)

    n, mean, m2 = merge_moments(moments(a), moments(b))
    both = np.concatenate([a, b])
    assert n == 80
    np.testing.assert_allclose(mean, both.mean(0))
    np.testing.assert_allclose(m2 / n, both.var(0))


def test_the_wrapper_standardises_and_clips() -> None:
    env = NormalizeObservation(gym.make("CartPole-v1"), clip=5.0)
    env.action_space.seed(0)  # the same random walk on every run
    obs, _ = env.reset(seed=0)
    seen = [obs]
    for _ in range(500):
        obs, _, term, trunc, _ = env.step(env.action_space.sample())
        seen.append(obs)
        if term or trunc:
            obs, _ = env.reset()
            seen.append(obs)
    z = np.array(seen[-200:])
    assert z.dtype == np.float32 and np.abs(z).max() <= 5.0
    assert np.abs(z.mean(0)).max() < 0.5 and np.all(z.std(0) > 0.5) and np.all(z.std(0) < 1.5)
    assert env.count == len(seen) == env.delta_count
    env.take_delta()
    assert env.delta_count == 0.0 and env.count == len(seen)


def _plan() -> dict[str, Any]:
    plan = json.loads((ROOT / "plans" / "ppo.json").read_text())
    plan["resources"]["workers"]["params"]["wrappers"] = [{"name": "normalize_observation"}]
    plan["config"].update(
        num_envs_per_worker=2, rollout_fragment_length=32, train_batch_size=128,
        sgd_minibatch_size=64, num_sgd_iter=2,
    )  # fmt: skip
    return plan


def _filters(algo: Any) -> dict[str, Any]:
    """The driver's pooled moments and every worker's normalising moments."""
    ws = algo.ctx.worker_sets["workers"]
    out = {"driver": ws._global_vars["obs_filter"]}
    states = ray.get([w.get_state.remote() for w in ws.remote_workers])
    for i, s in enumerate(states):
        for k, env in enumerate(s["envs"]):
            layer = env["snapshot"]["layers"][0]
            assert layer["class"] == "NormalizeObservation"
            out[f"worker{i + 1}/{k}"] = {
                name: layer["attrs"][name]["v"] for name in ("count", "mean", "m2")
            }
    return out


def _same(a: Any, b: Any) -> None:
    assert sorted(a) == sorted(b)
    for key in a:
        for name in ("count", "mean", "m2"):
            assert np.asarray(a[key][name]).tobytes() == np.asarray(b[key][name]).tobytes(), (
                key,
                name,
            )


@pytest.mark.usefixtures("ray_session")
def test_normalisation_statistics_survive_checkpoint_and_resume(tmp_path: Path) -> None:
    compiled = plangraph.compile(_plan())
    with plangraph.build(compiled, seed=0) as algo:
        straight = [algo.train() for _ in range(4)]
        want = _filters(algo)
    # every observation of both workers' 4 sub-envs is pooled: 4 x 128 steps + resets
    assert want["driver"]["count"] >= 4 * 128
    # after a broadcast every worker normalises with the pooled moments
    for key, moments in want.items():
        if key != "driver":
            assert moments["count"] == want["driver"]["count"], key
    ckpt = tmp_path / "ckpt"
    with plangraph.build(compiled, seed=0) as algo:
        for _ in range(2):
            algo.train()
        algo.save(ckpt)
    with plangraph.build(compiled, seed=0) as algo:
        algo.restore(ckpt)
        resumed = [algo.train() for _ in range(2)]
        got = _filters(algo)
    _same(got, want)

    def comparable(r: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in r.items() if k not in TIME_KEYS}

    assert [comparable(r) for r in resumed] == [comparable(r) for r in straight[2:]]
