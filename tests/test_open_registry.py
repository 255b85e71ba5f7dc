"""No closed set of algorithm or model names: a copy of each built-in algorithm and model
type registered under a new name, as a user would, passes every check its original
passes, on every plan, and its learner builds, samples and learns the same way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from pydantic import ValidationError, create_model

import plangraph
from plangraph.ops.algorithms import algorithm, algorithms, unregister_algorithm
from plangraph.ops.models import MLPModel, register_model, unregister_model

ROOT = Path(__file__).resolve().parent.parent
PLANS = sorted((ROOT / "plans").glob("*.json"))
BUILTINS = [name for name, spec in algorithms().items() if spec.builtin]


def _copy_of(name: str) -> str:
    """Register ``user_<name>``: the built-in's config and learner under a new name."""
    spec = algorithm(name)
    new = f"user_{name}"
    config: Any = create_model(
        f"User{spec.config.__name__}",
        __base__=spec.config,
        algo=(Literal[new], new),  # type: ignore[valid-type]
    )
    base = spec.policy_class()
    policy = type(f"User{base.__name__}", (base,), {"config_type": config})
    plangraph.register_algorithm(new, config=config, policy=policy)
    return new


class UserMLP(MLPModel):
    """The built-in MLP under a user's name."""

    type: Literal["user_mlp"] = "user_mlp"  # type: ignore[assignment]


@pytest.fixture(scope="module")
def copies() -> Iterator[dict[str, str]]:
    names = {name: _copy_of(name) for name in BUILTINS}
    register_model("user_mlp", config=UserMLP, build="plangraph.rl.models:build_mlp")
    yield names
    for new in names.values():
        unregister_algorithm(new)
    unregister_model("user_mlp")


def _swap(node: Any, names: dict[str, str]) -> Any:
    """The plan with every policy's algo and every mlp model renamed to the copies'."""
    if isinstance(node, dict):
        out = {k: _swap(v, names) for k, v in node.items()}
        if isinstance(out.get("algo"), str) and out["algo"] in names:
            out["algo"] = names[out["algo"]]
        if out.get("type") == "mlp" and "hiddens" in out:
            out["type"] = "user_mlp"
        return out
    if isinstance(node, list):
        return [_swap(v, names) for v in node]
    return node


def _diagnostics(plan: dict[str, Any], env: str | None = None) -> list[tuple[str, str | None]]:
    config = {"env": env} if env else None
    compiled = plangraph.analyze(plan, config=config)
    return sorted((d.code, d.node) for d in compiled.diagnostics)


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_every_plan_checks_the_same_with_the_copies(path: Path, copies: dict[str, str]) -> None:
    plan = json.loads(path.read_text(encoding="utf-8"))
    swapped = _swap(plan, copies)
    assert swapped != plan  # every plan names an algorithm
    assert _diagnostics(swapped) == _diagnostics(plan)


@pytest.mark.parametrize("algo", BUILTINS)
@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0"])
def test_the_copies_meet_the_same_space_and_capability_checks(
    algo: str, env: str, copies: dict[str, str]
) -> None:
    """Every built-in algorithm on every env, in plans that call on each capability."""
    seen: set[str] = set()
    for name in ("ppo", "dqn", "a2c_microbatch", "sac_pendulum"):
        plan = json.loads((ROOT / "plans" / f"{name}.json").read_text(encoding="utf-8"))
        plan["resources"]["workers"]["params"]["policy"] = {"algo": algo}
        swapped = _swap(plan, copies)
        assert _diagnostics(swapped, env) == _diagnostics(plan, env), (name, env)
        refused = {code for code, _ in _diagnostics(plan, env)}
        seen.update(refused)
    if algo == "dqn" and env != "CartPole-v1":
        assert "PG183" in seen  # the checks did run: DQN cannot act in Box actions


@pytest.mark.parametrize("algo", BUILTINS)
def test_a_copy_learns_exactly_as_its_original(algo: str, copies: dict[str, str]) -> None:
    from plangraph.rl.rollout_worker import RolloutWorker

    env = "Pendulum-v1" if "Discrete" not in algorithm(algo).config.action_spaces else "CartPole-v1"
    results = []
    for name in (algo, copies[algo]):
        config = {"algo": name, "model": {"type": "mlp" if name == algo else "user_mlp"}}
        worker = RolloutWorker(env, 2, 16, config, seed=0)
        batch = worker.sample()
        if "replay" in algorithm(algo).config.capabilities:
            batch["weights"] = np.ones(batch.count, np.float32)
        worker.policy.learn_on_batch(batch)
        results.append((batch, worker.policy.get_weights()))
    (batch_a, weights_a), (batch_b, weights_b) = results
    assert sorted(batch_a.keys()) == sorted(batch_b.keys())
    for key in batch_a.keys():
        np.testing.assert_array_equal(batch_a[key], batch_b[key], err_msg=key)
    for key, value in weights_a.items():
        np.testing.assert_array_equal(value, weights_b[key], err_msg=key)


@pytest.mark.parametrize("algo", BUILTINS)
def test_the_declared_row_layout_is_what_sampling_gives(algo: str) -> None:
    """An algorithm's ``sample_columns`` (what sizes a replay buffer before launch) names
    exactly the columns, row shapes and dtypes its learner's sampling produces."""
    from plangraph.rl.rollout_worker import RolloutWorker
    from plangraph.rl.row_layout import sample_row_layout

    spec = algorithm(algo)
    env = "CartPole-v1" if "Discrete" in spec.config.action_spaces else "Pendulum-v1"
    for config in ({"algo": algo}, {"algo": algo, "n_step": 3}):
        if "n_step" in config and "n_step" not in spec.config.model_fields:
            continue
        try:  # CQL's n_step is always 1 (a dataset holds one-step transitions)
            spec.config.model_validate(config)
        except ValidationError:
            continue
        worker = RolloutWorker(env, 2, 8, config, seed=0)
        batch = worker.sample()
        layout = sample_row_layout(worker.observation_space, worker.action_space, config)
        got = {k: (tuple(batch[k].shape[1:]), batch[k].dtype) for k in batch.keys()}
        assert got == layout, config
