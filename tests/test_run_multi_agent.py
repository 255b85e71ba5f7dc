"""Multi-agent plans run: per-policy counters, schedules and results; SelectExperiences;
checkpoint/resume of every policy; a PettingZoo env of PettingZoo's own through a plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_checkpoint import assert_identical

import plangraph
from plangraph import Plan
from plangraph.flow.local import LocalIterator
from plangraph.ops import (
    ConcatBatches,
    ParallelRollouts,
    SelectExperiences,
    StandardMetricsReporting,
    TrainOneStep,
    worker_set,
)
from plangraph.rl import MultiAgentBatch
from plangraph.runtime.implementations import LOWERINGS
from plangraph.runtime.stopping import lookup

PLANS = Path(__file__).resolve().parent.parent / "plans"
SMALL = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 8,
    "learning_starts": 64,
    "dqn_train_batch_size": 32,
    "dqn_train_steps_per_rollout": 2,
    "ppo_train_batch_size": 64,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 2,
    "exploration_steps": 1_000,
    "min_env_steps_per_iter": 0,
    "target_network_update_freq": 100,
}

pytestmark = pytest.mark.usefixtures("ray_session")


def _two_trainer(**kwargs: Any) -> Any:
    return plangraph.build(plangraph.compile(PLANS / "two_trainer.json", config=SMALL), **kwargs)


def test_two_trainer_counts_env_and_agent_steps_per_policy() -> None:
    algo = _two_trainer(num_workers=1, seed=0)
    try:
        for _ in range(40):
            r = algo.train()
    finally:
        algo.stop()
    c = r["counters"]
    ppo, dqn = "ppo_policy", "dqn_policy"
    sampled = {p: c[f"num_agent_steps_sampled/{p}"] for p in (ppo, dqn)}
    # Every env step moves each live agent once: agents that are done wait for the other.
    assert c["num_agent_steps_sampled"] == sampled[ppo] + sampled[dqn]
    assert max(sampled.values()) <= c["num_env_steps_sampled"] < c["num_agent_steps_sampled"]
    assert r["num_agent_steps_sampled"] == c["num_agent_steps_sampled"]
    # Each branch trains its own policy only, on its own agent's rows.
    assert c[f"num_agent_steps_trained/{dqn}"] == 32 * c["num_updates/train_dqn"]
    assert c[f"num_agent_steps_trained/{ppo}"] >= 64 * c["num_updates/train_ppo"] > 0
    assert c[f"num_target_updates/{dqn}"] == c["num_target_updates"] >= 1
    for p in (ppo, dqn):
        assert lookup(r, f"policies/{p}/episode_return_mean") > 0
        assert lookup(r, f"policies/{p}/num_agent_steps_sampled") == sampled[p]
    assert "epsilon" in r["policies"][dqn]["learner"]
    assert "kl" in r["policies"][ppo]["learner"]
    # An env episode's return is both agents' returns summed.
    assert r["episode_return_mean"] > r["policies"][ppo]["episode_return_mean"]
    from plangraph.runtime.result import RESULT_KEYS

    assert set(r) == RESULT_KEYS - {"evaluation"}


def test_dqn_epsilon_follows_its_own_agent_steps_only() -> None:
    """TrainOneStep(policies=["dqn_policy"]) sets the DQN policy's timestep (epsilon) from
    num_agent_steps_sampled/dqn_policy, not from the env steps or the PPO policy's steps,
    and broadcasts that to the rollout workers."""
    import ray

    algo = _two_trainer(num_workers=1, seed=0)
    try:
        ctx = algo.ctx
        counters = ctx.run_state.counters
        counters["num_env_steps_sampled"] = 900
        counters["num_agent_steps_sampled/ppo_policy"] = 880
        counters["num_agent_steps_sampled/dqn_policy"] = 250
        ws = ctx.worker_set("@workers")
        rows = ws.sample().policy_batches["dqn_policy"]
        stream = LOWERINGS["TrainOneStep"](
            ctx.compiled.nodes["train_dqn"], [LocalIterator.from_iterable([rows])], ctx
        )
        stream.shared_metrics.set(ctx.run_state.metrics)
        info = next(iter(stream))
        dqn = ws.local_policy["dqn_policy"]
        assert dqn.global_timestep == 250
        assert info.stats["dqn_policy/epsilon"] == pytest.approx(1.0 - 0.98 * 250 / 1_000)
        assert ws.local_policy["ppo_policy"].global_timestep == 0  # untouched
        ws.sync_weights(ctx.run_state.policy_global_vars(ws.local_policy))
        state = ray.get(ws.remote_workers[0].get_state.remote())
        assert state["policies"]["dqn_policy"]["global_timestep"] == 250
        assert state["policies"]["ppo_policy"]["global_timestep"] == 880
    finally:
        algo.stop()


def test_select_experiences_keeps_exactly_the_named_policies() -> None:
    algo = _two_trainer(num_workers=0, seed=1)
    try:
        ctx = algo.ctx
        batch = ctx.worker_set("@workers").sample()
        assert set(batch.policy_batches) == {"dqn_policy", "ppo_policy"}
        stream = LOWERINGS["SelectExperiences"](
            ctx.compiled.nodes["select_ppo"], [LocalIterator.from_iterable([batch])], ctx
        )
        out = next(iter(stream))
        assert isinstance(out, MultiAgentBatch)
        assert list(out.policy_batches) == ["ppo_policy"]
        assert out.env_steps() == batch.env_steps()
        assert out.agent_steps() == batch.policy_batches["ppo_policy"].count
    finally:
        algo.stop()


def test_checkpoint_resume_keeps_every_policy(tmp_path: Path) -> None:
    original = _two_trainer(num_workers=1, seed=3)
    restored = _two_trainer(num_workers=1, seed=8)
    try:
        for _ in range(30):
            original.train()
        ckpt = original.save(tmp_path / "ckpt")
        restored.restore(ckpt)
        saved = {**original.run_state.get_state(), **original.ctx.get_state()}
        assert_identical(saved, {**restored.run_state.get_state(), **restored.ctx.get_state()})
        assert sorted(saved["policies"]["workers"]) == ["dqn_policy", "ppo_policy"]
        assert saved["policy_episodes"]["dqn_policy"]["total"] > 0
        # Both continue identically: the same rollouts, updates and per-policy results.
        a, b = original.train(), restored.train()
        assert a["policies"] == b["policies"]
        for key in sorted(k for k in a if k.startswith("num_")):
            assert a[key] == b[key], key
        pol_a = original.ctx.worker_set("@workers").local_policy
        pol_b = restored.ctx.worker_set("@workers").local_policy
        assert_identical(pol_a.get_state(), pol_b.get_state())
    finally:
        original.stop()
        restored.stop()


def test_a_pettingzoo_env_runs_through_a_plan() -> None:
    """PettingZoo's own knights_archers_zombies_v11 (agents die at different times):
    archers on one PPO policy, knights on another, a few iterations."""
    rollouts = ParallelRollouts(mode="bulk_sync", id="rollouts")
    archers = rollouts.for_each(SelectExperiences(policies=["archers", "knights"], id="select"))
    train = archers.combine(
        ConcatBatches(min_batch_size=64, count_steps_by="agent_steps", id="concat")
    ).for_each(TrainOneStep(num_sgd_iter=1, sgd_minibatch_size=64, id="train"))
    plan = Plan.from_builder(
        StandardMetricsReporting(train, id="metrics"),
        name="kaz",
        resources={
            "workers": worker_set(
                env="knights_archers_zombies_v11",
                env_config={"max_cycles": 25},
                num_workers=1,
                num_envs_per_worker=1,
                rollout_fragment_length=20,
                policies={"archers": {"algo": "ppo"}, "knights": {"algo": "ppo"}},
                policy_mapping={"archer_*": "archers", "knight_*": "knights"},
            )
        },
    )
    compiled = plangraph.compile(plan)
    assert compiled.ok, compiled.diagnostics
    algo = plangraph.build(compiled, seed=0)
    try:
        before = {
            pid: {k: np.array(v) for k, v in p.get_weights().items()}
            for pid, p in algo.ctx.worker_set("@workers").local_policy.items()
        }
        for _ in range(3):
            r = algo.train()
        after = algo.ctx.worker_set("@workers").local_policy
    finally:
        algo.stop()
    assert r["num_env_steps_sampled"] == 60
    assert r["episodes_total"] >= 2  # max_cycles=25: an env episode ends every 25 steps
    for pid in ("archers", "knights"):
        assert r["policies"][pid]["num_agent_steps_trained"] > 0
        changed = [
            not np.array_equal(before[pid][k], w) for k, w in after[pid].get_weights().items()
        ]
        assert any(changed), pid


def test_progress_shows_one_return_per_policy() -> None:
    from plangraph.runtime.metric_tags import metric_tags
    from plangraph.runtime.run_loop import _progress_line

    result: Any = {
        "iteration": 3,
        "num_env_steps_sampled": 3072,
        "episode_return_mean": 60.5,
        "policies": {
            "dqn_policy": {"episode_return_mean": 20.25, "learner": {"epsilon": 0.5}},
            "ppo_policy": {},  # no episode ended yet
        },
    }
    assert _progress_line(result) == (
        "iter 3: env steps 3,072, return dqn_policy 20.2, ppo_policy -"
    )
    tags = metric_tags(result)
    assert tags["policies/dqn_policy/episode_return_mean"] == 20.25
    assert tags["policies/dqn_policy/learner/epsilon"] == 0.5


def test_greedy_evaluation_of_a_multi_agent_plan_is_refused_clearly() -> None:
    from plangraph.errors import BuildError

    with pytest.raises(BuildError, match="multi-agent worker set is not supported yet"):
        _two_trainer(num_workers=0, evaluation_interval=1)
