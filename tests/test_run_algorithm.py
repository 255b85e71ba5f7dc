"""Compile-and-execute: seed plans lowered onto real Ray actors, real gymnasium, real torch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_run_state import conforms

import plangraph
from plangraph.runtime.algorithm import Algorithm

PLANS = Path(__file__).resolve().parent.parent / "plans"

pytestmark = pytest.mark.usefixtures("ray_session")


def build(plan: str, config: dict[str, Any] | None = None, **kwargs: Any) -> Algorithm:
    compiled = plangraph.compile(PLANS / f"{plan}.json", config=config)
    return plangraph.build(compiled, **kwargs)


@pytest.fixture
def a2c_small() -> Iterator[Algorithm]:
    algo = build(
        "a2c",
        {"num_envs_per_worker": 2, "rollout_fragment_length": 16, "train_batch_size": 64},
        seed=3,
    )
    yield algo
    algo.stop()


def test_counters_count_env_steps_once(a2c_small: Algorithm) -> None:
    # 2 workers x 2 sub-envs x 16 steps = 64 env steps per rollout item = one train batch.
    for i in range(1, 4):
        r = a2c_small.train()
        assert r["iteration"] == i
        assert r["num_env_steps_sampled"] == 64 * i
        assert r["num_env_steps_trained"] == 64 * i
        assert r["num_env_steps_sampled_this_iter"] == 64
    assert r["time_total_s"] > 0
    from plangraph.runtime.result import MULTI_AGENT_KEYS
    from plangraph.runtime.stopping import RESULT_KEYS

    # --stop checks keys against RESULT_KEYS: it must name exactly what a result holds
    # (evaluation only on the iterations that evaluate: none here).
    assert set(r) == RESULT_KEYS - MULTI_AGENT_KEYS - {"evaluation"}
    # Every node has a timer, the rollout source and the sink included.
    assert set(r["timers"]) == {"rollouts", "concat", "train", "metrics"}
    assert "policy_loss" in r["learner"] or r["learner"]
    profile = a2c_small.profile()
    assert profile.iterations == 3 and profile.first_iteration == 1
    assert {n: (p.items, p.pulls) for n, p in profile.nodes.items()} == {
        n: (3, 3) for n in ("rollouts", "concat", "train", "metrics")
    }
    assert sum(p.seconds for p in profile.nodes.values()) == pytest.approx(profile.wall_s)
    assert set(profile.nodes["rollouts"].phases) == {"sampling", "object_store"}
    assert set(profile.nodes["train"].phases) == {"learning", "broadcast"}


def test_sink_results_have_exactly_the_declared_keys_and_types(a2c_small: Algorithm) -> None:
    """The real sink's results against the Result schema, and the run state they report."""
    from plangraph.runtime.result import MULTI_AGENT_KEYS, RESULT_KEYS, RESULT_TYPES

    for _ in range(30):
        r = a2c_small.train()
        if r["episodes_total"] > 0:
            break
    assert r["episodes_total"] > 0
    assert set(r) == RESULT_KEYS - MULTI_AGENT_KEYS - {"evaluation"}
    wrong = {k: type(r[k]).__name__ for k in r if not conforms(r[k], RESULT_TYPES[k])}
    assert not wrong, wrong
    # One object: what the operators counted is the run state the result reports.
    state = a2c_small.run_state
    assert state.iteration == a2c_small.iteration == r["iteration"]
    assert state.time_total_s == r["time_total_s"]
    assert dict(state.counters) == r["counters"]
    assert state.episodes.total == r["episodes_total"]
    assert state.learner == r["learner"]


def test_one_stop_loop_for_run_and_the_cli(a2c_small: Algorithm) -> None:
    from plangraph.runtime.stopping import StopCriteria
    from plangraph.runtime.training_loop import INTERRUPTED, MAX_ITERATIONS, TrainingLoop

    loop = TrainingLoop(a2c_small.train, StopCriteria.parse({"iteration": 2}))
    assert [r["iteration"] for r in loop] == [1, 2]
    assert loop.reason == "stop criterion met: iteration = 2 >= 2"
    assert not loop.interrupted
    with pytest.raises(RuntimeError, match="runs once"):
        next(iter(loop))
    far = StopCriteria.parse({"iteration": 100})
    loop = TrainingLoop(a2c_small.train, far, max_iterations=3)
    assert [r["iteration"] for r in loop] == [3]
    assert loop.reason == MAX_ITERATIONS
    # An interrupt ends the loop after the iteration it arrived in, before max_iterations.
    loop = TrainingLoop(a2c_small.train, far, max_iterations=4, interrupt_requested=lambda: True)
    assert [r["iteration"] for r in loop] == [4]
    assert (loop.reason, loop.interrupted) == (INTERRUPTED, True)
    # A criterion met wins over an interrupt.
    loop = TrainingLoop(
        a2c_small.train, StopCriteria.parse({"iteration": 5}), interrupt_requested=lambda: True
    )
    assert [r["iteration"] for r in loop] == [5]
    assert loop.reason == "stop criterion met: iteration = 5 >= 5"
    # Algorithm.run is the same loop.
    assert a2c_small.run({"iteration": 100}, max_iterations=6)["iteration"] == 6
    assert a2c_small.run({"iteration": 7})["iteration"] == 7


def test_episode_return_absent_until_an_episode_ends() -> None:
    # 2 x 1 x 4 = 8 env steps per iteration: no CartPole episode ends in the first one.
    algo = build(
        "a2c",
        {"num_envs_per_worker": 1, "rollout_fragment_length": 4, "train_batch_size": 8},
        seed=0,
    )
    try:
        first = algo.train()
        assert "episode_return_mean" not in first
        assert first["episodes_total"] == 0
        from plangraph.runtime.result import EPISODE_STAT_KEYS, MULTI_AGENT_KEYS, RESULT_KEYS

        assert set(first) == RESULT_KEYS - EPISODE_STAT_KEYS - MULTI_AGENT_KEYS - {"evaluation"}
        for _ in range(20):
            r = algo.train()
        assert r["episodes_total"] > 0
        assert np.isfinite(r["episode_return_mean"])
        assert r["episode_len_mean"] == pytest.approx(r["episode_return_mean"])  # +1 per step
    finally:
        algo.stop()


def test_ppo_trains_one_batch_once_per_iteration() -> None:
    algo = build(
        "ppo",
        {
            "num_envs_per_worker": 2,
            "rollout_fragment_length": 32,
            "train_batch_size": 128,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 3,
        },
    )
    try:
        r = algo.train()
        # 3 epochs x 4 minibatches were run, but the batch's 128 rows count once.
        assert r["num_env_steps_sampled"] == 128
        assert r["num_env_steps_trained"] == 128
        assert "kl" in r["learner"]
    finally:
        algo.stop()


@pytest.mark.parametrize("mode", ["async", "bulk_sync"])
def test_rollouts_survive_a_dead_worker(mode: str) -> None:
    import ray

    compiled = plangraph.compile(
        {
            "name": "a2c_async",
            "config": {},
            "resources": {
                "workers": {
                    "kind": "WorkerSet",
                    "params": {
                        "num_workers": 2,
                        "num_envs_per_worker": 2,
                        "rollout_fragment_length": 8,
                        "policy": {"algo": "a2c"},
                    },
                }
            },
            "nodes": {
                "rollouts": {"op": "ParallelRollouts", "params": {"mode": mode}},
                "concat": {
                    "op": "ConcatBatches",
                    "inputs": ["rollouts"],
                    "params": {"min_batch_size": 32},
                },
                "train": {"op": "TrainOneStep", "inputs": ["concat"]},
                "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"]},
            },
            "output": "metrics",
        }
    )
    algo = plangraph.build(compiled, seed=1)
    try:
        r = algo.train()
        assert r["num_env_steps_sampled"] == 32  # 2 fragments of 2 x 8
        ws = algo.ctx.worker_sets["workers"]
        dead = ws.remote_workers[0]
        ray.kill(dead, no_restart=True)
        for _ in range(5):
            r = algo.train()
        # The dead worker was replaced; nothing already sampled was lost.
        assert ws.remote_workers[0] is not dead
        assert r["num_env_steps_sampled"] == 32 * 6
    finally:
        algo.stop()


def _weights(algo: Algorithm) -> dict[str, np.ndarray]:
    return algo.ctx.worker_sets["workers"].local_policy.get_weights()


def _plan_with_policy(plan: str, config: dict[str, Any], **policy: Any) -> Algorithm:
    data = json.loads((PLANS / f"{plan}.json").read_text())
    data["resources"]["workers"]["params"]["policy"].update(policy)
    return plangraph.build(plangraph.compile(data, config=config), seed=7)


@pytest.mark.parametrize(
    ("num_microbatches", "normalize"), [(1, False), (4, False), (1, True), (4, True)]
)
def test_microbatch_plan_is_the_same_math_as_a2c(num_microbatches: int, normalize: bool) -> None:
    """One iteration of a2c and of a2c_microbatch from the same seed: the same weights.

    With 1 microbatch the paths are identical; with 4 equal microbatches the row-weighted
    mean of the per-microbatch gradients equals the whole-batch gradient (per-row-mean
    loss), also when advantages are standardised: per train batch, not per microbatch."""
    common = {"num_envs_per_worker": 2, "rollout_fragment_length": 16, "train_batch_size": 256}
    a2c = _plan_with_policy("a2c", common, normalize_advantages=normalize)
    micro = _plan_with_policy(
        "a2c_microbatch",
        {**common, "microbatch_size": 256 // num_microbatches},
        normalize_advantages=normalize,
    )
    try:
        before = _weights(a2c)
        for k, v in _weights(micro).items():
            np.testing.assert_array_equal(v, before[k])  # same seed, same init
        r1, r2 = a2c.train(), micro.train()
        assert r1["num_env_steps_trained"] == r2["num_env_steps_trained"] == 256
        after_a2c, after_micro = _weights(a2c), _weights(micro)
        assert any(not np.array_equal(after_a2c[k], before[k]) for k in before)
        for k in after_a2c:
            if num_microbatches == 1:
                np.testing.assert_array_equal(after_micro[k], after_a2c[k])
            else:
                np.testing.assert_allclose(after_micro[k], after_a2c[k], rtol=1e-4, atol=1e-6)
    finally:
        a2c.stop()
        micro.stop()


@pytest.mark.parametrize("unit", ["sampled", "trained"])
def test_dqn_target_updates_exactly_at_each_multiple(unit: str) -> None:
    freq = 96
    algo = build(
        "dqn",
        {
            "num_workers": 1,
            "num_envs_per_worker": 2,
            "rollout_fragment_length": 4,
            "learning_starts": 16,
            "train_batch_size": 8,
            "train_steps_per_rollout": 2,
            "target_network_update_freq": freq,
            "target_update_unit": unit,
            "min_env_steps_per_iter": 0,
        },
        seed=0,
    )
    counter = "num_env_steps_sampled" if unit == "sampled" else "num_env_steps_trained"
    try:
        policy = algo.ctx.worker_sets["workers"].local_policy
        prev_updates = 0
        for _ in range(60):
            r = algo.train()  # one item of the training branch per iteration
            # Every training item passes UpdateTarget with the counter as reported, and the
            # counter moves by less than freq per item, so each multiple fires exactly once.
            assert r["num_target_updates"] == r[counter] // freq
            synced = all(
                np.array_equal(a.detach().numpy(), b.detach().numpy())
                for a, b in zip(
                    policy.model.parameters(), policy.target_model.parameters(), strict=True
                )
            )
            assert synced == (r["num_target_updates"] > prev_updates)
            prev_updates = r["num_target_updates"]
        assert prev_updates >= 2
    finally:
        algo.stop()


def test_train_one_step_broadcasts_every_n_updates() -> None:
    """DQN's TrainOneStep(update_workers_every=k): the rollout worker holds the learner's
    weights exactly when a multiple of k updates has been made, and stale ones otherwise."""
    import ray

    k = 4
    algo = build(
        "dqn",
        {
            "num_workers": 1,
            "num_envs_per_worker": 2,
            "rollout_fragment_length": 4,
            "learning_starts": 16,
            "train_batch_size": 8,
            "train_steps_per_rollout": k,
            "min_env_steps_per_iter": 0,
        },
        seed=0,
    )
    try:
        ws = algo.ctx.worker_sets["workers"]
        for i in range(1, 3 * k + 1):
            r = algo.train()  # one update per iteration
            assert r["counters"]["num_updates/train"] == i
            remote = ray.get(ws.remote_workers[0].get_weights.remote())
            local = ws.local_policy.get_weights()
            same = all(np.array_equal(remote[name], local[name]) for name in local)
            assert same == (i % k == 0), i
    finally:
        algo.stop()


def test_short_learning_run_beats_random() -> None:
    """PPO with 2 rollout workers: clearly above a random policy (~22) within 40k env steps."""
    algo = build("ppo", seed=0)
    try:
        r = algo.run(stop={"num_env_steps_sampled": 40_000})
        assert r["num_env_steps_sampled"] >= 40_000
        assert r["episode_return_mean"] > 60, r["episode_return_mean"]
        # max_iterations alone is a stop criterion too; neither would never end
        assert algo.run(max_iterations=1)["iteration"] == r["iteration"] + 1
        with pytest.raises(ValueError, match=r"needs stop=.* or max_iterations"):
            algo.run()
    finally:
        algo.stop()


def test_user_operator_runs_in_a_plan() -> None:
    from pydantic import Field

    from plangraph.ops import register_op, unregister_op
    from plangraph.ops.registry import OpParams
    from plangraph.runtime.implementations import OP_IMPLS
    from plangraph.runtime.lowering import register_impl

    @register_op(category="combine", inputs=["SampleBatch"], output="SampleBatch", replace=True)
    class ScaleRewards(OpParams):
        """Multiply rewards by ``factor``."""

        factor: float = Field(1.0, gt=0)

    seen: list[float] = []

    @register_impl("ScaleRewards")
    def scale_rewards(params: Any) -> Any:
        def scale(batch: Any) -> Any:
            batch["rewards"] = batch["rewards"] * params.factor
            seen.append(float(batch["rewards"].max()))
            return batch

        return scale

    plan = {
        "name": "scaled",
        "resources": {
            "workers": {
                "kind": "WorkerSet",
                "params": {
                    "num_workers": 1,
                    "num_envs_per_worker": 2,
                    "rollout_fragment_length": 8,
                    "policy": {"algo": "a2c"},
                },
            }
        },
        "nodes": {
            "rollouts": {"op": "ParallelRollouts"},
            "scale": {"op": "ScaleRewards", "inputs": ["rollouts"], "params": {"factor": 3}},
            "train": {"op": "TrainOneStep", "inputs": ["scale"]},
            "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"]},
        },
        "output": "metrics",
    }
    algo = plangraph.build(plangraph.compile(plan), seed=0)
    try:
        r = algo.train()
        assert seen == [3.0]  # CartPole's +1 reward, scaled on the driver
        assert "scale" in r["timers"]
    finally:
        algo.stop()
        # The registries are process-wide: leave no test operator behind for other tests.
        unregister_op("ScaleRewards")
        OP_IMPLS.pop("ScaleRewards", None)


def test_generic_combinators_lowered() -> None:
    """Duplicate, WaitUntilTimestepsElapsed, Batch, Flatten and Union in one plan.

    Rollouts (32 env steps per item) fan out to a train branch that waits for 64 sampled
    env steps and to a branch that pairs and re-flattens batches; a deterministic Union
    alternates between them. Every step of the pull order is deterministic, so the
    (sampled, trained) counters per reported item are pinned exactly."""
    plan = {
        "name": "combinators",
        "resources": {
            "workers": {
                "kind": "WorkerSet",
                "params": {
                    "num_workers": 2,
                    "num_envs_per_worker": 2,
                    "rollout_fragment_length": 8,
                    "policy": {"algo": "a2c"},
                },
            }
        },
        "nodes": {
            "rollouts": {"op": "ParallelRollouts"},
            "dup": {"op": "Duplicate", "inputs": ["rollouts"]},
            "wait": {
                "op": "WaitUntilTimestepsElapsed",
                "inputs": ["dup"],
                "params": {"target": 64},
            },
            "train": {"op": "TrainOneStep", "inputs": ["wait"]},
            "pairs": {"op": "Batch", "inputs": ["dup"], "params": {"n": 2}},
            "flat": {"op": "Flatten", "inputs": ["pairs"]},
            "union": {
                "op": "Union",
                "inputs": ["train", "flat"],
                "params": {"deterministic": True},
            },
            "metrics": {"op": "StandardMetricsReporting", "inputs": ["union"]},
        },
        "output": "metrics",
    }
    algo = plangraph.build(plangraph.compile(plan), seed=0)
    try:
        seen = []
        for _ in range(8):
            r = algo.train()
            seen.append((r["num_env_steps_sampled"], r["num_env_steps_trained"]))
        # The first rollout item (32 < 64 env steps sampled) is filtered before training;
        # every later one is trained once; the other branch re-emits every item.
        assert seen == [
            (64, 0),
            (64, 32),
            (64, 32),
            (96, 64),
            (128, 64),
            (128, 96),
            (128, 96),
            (160, 128),
        ]
    finally:
        algo.stop()


def test_sac_plan_trains_with_soft_target_updates_on_ray() -> None:
    algo = build(
        "sac_pendulum",
        {"learning_starts": 64, "random_timesteps": 64, "min_env_steps_per_iter": 128},
        seed=0,
    )
    try:
        r = algo.train()
        updates = r["counters"]["num_updates/train"]
        assert updates > 0 and r["num_target_updates"] == updates  # freq=0: every update
        assert r["num_env_steps_trained"] == 256 * updates
        assert {"critic_loss", "actor_loss", "alpha"} <= set(r["learner"])
        policy = algo.ctx.worker_sets["workers"].local_policy
        target, online = policy.target_critics[0], policy.model.q1
        # Polyak averages: close to, but not equal to, the online critics
        assert not all(
            np.array_equal(t.detach().numpy(), o.detach().numpy())
            for t, o in zip(target.parameters(), online.parameters(), strict=True)
        )
    finally:
        algo.stop()


def test_ppo_pendulum_plan_samples_box_actions_on_ray() -> None:
    algo = build(
        "ppo_pendulum",
        {"num_envs_per_worker": 2, "rollout_fragment_length": 32, "train_batch_size": 128},
        seed=0,
    )
    try:
        r = algo.train()
        assert r["num_env_steps_trained"] == 128
        assert np.isfinite(r["learner"]["kl"]) and r["learner"]["entropy"] > 1.0
    finally:
        algo.stop()
