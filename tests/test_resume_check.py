"""Which plan changes a checkpoint survives (``plangraph.runtime.resume_check``).

A real DQN checkpoint (worker set, replay buffer, ``Concurrently`` rotation state) is saved
once; each changed plan is classified against its ``plan.json`` and state, and for the
blocking rules that are about mechanics (shapes, counts, ids) ``Algorithm.restore`` is
shown to refuse the same checkpoint, and a harmless change to restore and train.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import plangraph
from plangraph.compiler.plan_view import PlanView, read_saved_view
from plangraph.errors import CheckpointError
from plangraph.runtime.resume_check import check_resume, saved_plan_file

ROOT = Path(__file__).resolve().parent.parent
# Sampling in the driver (num_workers 0): the checkpoint has the same parts (a rollout
# worker's state, the learner, replay, the rotation) and every build is quick.
SMALL_DQN = {
    "num_workers": 0,
    "num_envs_per_worker": 2,
    "buffer_size": 2000,
    "learning_starts": 64,
    "train_batch_size": 32,
    "min_env_steps_per_iter": 128,
    "train_steps_per_rollout": 2,
}


def dqn_data() -> dict[str, Any]:
    data = json.loads((ROOT / "plans" / "dqn.json").read_text())
    data["config"].update(SMALL_DQN)
    return data


@pytest.fixture(scope="module")
def saved(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A checkpoint of the small DQN after two iterations (``Checkpoint`` as loaded)."""
    from plangraph.runtime.algorithm import Checkpoint

    path = tmp_path_factory.mktemp("dqn") / "ckpt"
    with plangraph.build(plangraph.compile(dqn_data()), seed=0) as algo:
        algo.train()
        algo.train()
        algo.save(path)
    return Checkpoint.load(path)


def _rename_node(data: dict[str, Any], old: str, new: str) -> None:
    data["nodes"][new] = data["nodes"].pop(old)
    for node in data["nodes"].values():
        node["inputs"] = [new if i == old else i for i in node["inputs"]]
    if data["output"] == old:
        data["output"] = new


def _rename_resource(data: dict[str, Any], old: str, new: str) -> None:
    data["resources"][new] = data["resources"].pop(old)
    for node in data["nodes"].values():
        for k, v in node["params"].items():
            if v == f"@{old}":
                node["params"][k] = f"@{new}"


def _third_branch(data: dict[str, Any]) -> None:
    """A second store branch under the Concurrently: three inputs where it saved two."""
    nodes = data["nodes"]
    nodes["dup"] = {"op": "Duplicate", "inputs": ["rollouts"], "params": {}}
    nodes["store"]["inputs"] = ["dup"]
    nodes["store2"] = {"op": "StoreToReplay", "inputs": ["dup"], "params": {"buffer": "@replay"}}
    nodes["concurrently"]["inputs"] = ["store", "target", "store2"]
    nodes["concurrently"]["params"]["weights"] = [1, "${train_steps_per_rollout}", 1]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        here = data
        for p in parents:
            here = here[p]
        here[last] = value

    return change


# (id, how the plan changes, the JSON pointers of the blocking changes).
CASES: list[tuple[str, Callable[[dict[str, Any]], None], set[str]]] = [
    ("learning rate", _set("config/lr", 0.001), set()),
    ("batch size and reporting", _set("config/min_env_steps_per_iter", 512), set()),
    ("learning_starts", _set("config/learning_starts", 128), set()),
    ("Concurrently weights", _set("config/train_steps_per_rollout", 4), set()),
    ("replay capacity", _set("config/buffer_size", 4000), {"/resources/replay/params/capacity"}),
    (
        "prioritized replay",
        _set("config/prioritized_replay", True),
        {"/resources/replay/params/prioritized"},
    ),
    (
        "model widths",
        _set("resources/workers/params/policy/hiddens", [32]),
        {"/resources/workers/params/policy/hiddens"},
    ),
    (
        "model activation",
        _set("resources/workers/params/policy/activation", "tanh"),
        {"/resources/workers/params/policy/activation"},
    ),
    (
        "sub-envs per worker",
        _set("config/num_envs_per_worker", 4),
        {"/resources/workers/params/num_envs_per_worker"},
    ),
    ("plan name", _set("name", "dqn2"), {"/name"}),
    (
        "stateful node renamed",
        lambda d: _rename_node(d, "concurrently", "merge"),
        {"/nodes/concurrently"},
    ),
    (
        "stateful node's inputs reordered",
        lambda d: (
            _set("nodes/concurrently/inputs", ["target", "store"])(d),
            _set("nodes/concurrently/params/output_indexes", [0])(d),
            _set("nodes/concurrently/params/weights", ["${train_steps_per_rollout}", 1])(d),
        ),
        set(),
    ),
    ("stateful node given a third input", _third_branch, {"/nodes/concurrently/inputs"}),
    ("stateless node renamed", lambda d: _rename_node(d, "target", "sync_target"), set()),
    (
        "replay buffer renamed",
        lambda d: _rename_resource(d, "replay", "buffer"),
        {"/resources/replay"},
    ),
]


def _check(saved: Any, data: dict[str, Any], **launch: Any) -> Any:
    before = read_saved_view(saved_plan_file(saved.path, saved.path.parent))
    after = PlanView.from_compiled(plangraph.compile(data))
    return check_resume(before, after.with_resource_params("WorkerSet", launch), saved.state)


@pytest.mark.parametrize(("change", "blocking"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_changes_are_blocking_or_harmless_by_what_restore_needs(
    saved: Any, change: Callable[[dict[str, Any]], None], blocking: set[str]
) -> None:
    data = dqn_data()
    change(data)
    verdict = _check(saved, data)
    assert {i.pointer for i in verdict.blocking} == blocking
    assert verdict.ok == (not blocking)
    assert verdict.blocking or verdict.harmless  # every case changes something
    for issue in verdict.blocking:
        assert issue.why  # each refusal says why
    for issue in verdict.harmless:
        assert issue.why is None


def test_the_unchanged_plan_passes_and_issues_are_located(saved: Any) -> None:
    assert _check(saved, dqn_data()).blocking == () == _check(saved, dqn_data()).harmless
    data = dqn_data()
    data["resources"]["workers"]["params"]["policy"]["hiddens"] = [32]
    path = saved.path.parent / "changed.json"
    path.write_text(json.dumps(data, indent=2))
    before = read_saved_view(saved.path / "plan.json")
    after = PlanView.from_compiled(plangraph.compile(path))
    (issue,) = check_resume(before, after, saved.state).blocking
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if '"hiddens"' in t)
    assert issue.where is not None and issue.where.startswith(f"{path}:{line}:")
    assert issue.format().startswith(f"{issue.where}: /resources/workers/params/policy/hiddens: ")
    assert "[64, 64] -> [32]" in issue.format()


def test_launch_overrides_count_as_changes(saved: Any) -> None:
    verdict = _check(saved, dqn_data(), num_workers=2, env="Acrobot-v1")
    assert {i.pointer for i in verdict.blocking} == {
        "/resources/workers/params/num_workers",
        "/resources/workers/params/env",
    }


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(c[1], id=c[0])
        for c in CASES
        if c[0]
        in ("replay capacity", "model widths", "stateful node renamed", "replay buffer renamed")
    ],
)
def test_a_blocking_change_is_one_restore_refuses(
    saved: Any, change: Callable[[dict[str, Any]], None]
) -> None:
    data = dqn_data()
    change(data)
    with plangraph.build(plangraph.compile(data), seed=0) as algo, pytest.raises(CheckpointError):
        algo.restore(saved)


def test_a_harmless_change_restores_and_trains(saved: Any) -> None:
    data = dqn_data()
    data["config"]["lr"] = 0.001
    data["config"]["train_steps_per_rollout"] = 4
    assert _check(saved, data).ok
    with plangraph.build(plangraph.compile(data), seed=0) as algo:
        algo.restore(saved)
        result = algo.train()
    assert result["iteration"] == 3
    assert result["counters"]["num_env_steps_sampled"] > saved.meta.num_env_steps_sampled


def test_check_needs_no_ray(saved: Any) -> None:
    # The classification is data only: a copy of the state tree's keys is enough.
    state = {k: dict.fromkeys(v) for k, v in saved.state.items() if isinstance(v, dict)}
    data = copy.deepcopy(dqn_data())
    data["config"]["buffer_size"] = 4000
    assert not _check(saved, data).ok
    before = read_saved_view(saved.path / "plan.json")
    after = PlanView.from_compiled(plangraph.compile(data))
    assert [i.pointer for i in check_resume(before, after, state).blocking] == [
        "/resources/replay/params/capacity"
    ]
