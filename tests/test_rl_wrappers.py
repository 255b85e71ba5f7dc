"""Env preprocessing declared in the plan: registered wrappers around every sub-env."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import plangraph
from plangraph.compiler.env_spaces import env_spaces
from plangraph.ops.wrappers import WrapperSpec
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.wrappers import WrappedEnvCreator

ROOT = Path(__file__).resolve().parent.parent


def _specs(*items: dict) -> tuple[WrapperSpec, ...]:
    return tuple(WrapperSpec.model_validate(i) for i in items)


def test_wrappers_apply_in_order_on_the_worker() -> None:
    wrappers = _specs(
        {"name": "time_limit", "params": {"max_episode_steps": 20}},
        {"name": "scale_reward", "params": {"scale": 0.5}},
    )
    worker = RolloutWorker(WrappedEnvCreator("CartPole-v1", wrappers), 2, 64, {"algo": "ppo"})
    batch = worker.sample()
    np.testing.assert_array_equal(batch["rewards"], 0.5)
    assert batch["t"].max() < 20 and batch.episode_lengths.max() <= 20
    np.testing.assert_allclose(batch.episode_returns, 0.5 * batch.episode_lengths)


def test_the_compiler_reads_the_wrapped_spaces() -> None:
    plain = env_spaces("FrozenLake-v1")
    flat = env_spaces("FrozenLake-v1", _specs({"name": "flatten_observation"}))
    assert plain is not None and plain.observation.kind == "Discrete"
    assert flat is not None and (flat.observation.kind, flat.observation.shape) == ("Box", (16,))


@pytest.mark.usefixtures("ray_session")
def test_a_discrete_observation_env_trains_once_one_hot_encoded() -> None:
    plan = json.loads(
        (ROOT / "tests/fixtures/bad_plans/PG184_discrete_observations.json").read_text()
    )
    refused = plangraph.analyze(plan)
    assert [d.code for d in refused.diagnostics if d.is_error] == ["PG184"]
    plan["resources"]["workers"]["params"]["wrappers"] = [{"name": "flatten_observation"}]
    plan["config"].update(num_envs_per_worker=2, rollout_fragment_length=32, train_batch_size=128)
    compiled = plangraph.compile(plan)
    algo = plangraph.build(compiled, seed=0)  # the wrapped creator travels to the Ray actors
    try:
        result = algo.train()
        assert result["num_env_steps_trained"] == 128
    finally:
        algo.stop()
