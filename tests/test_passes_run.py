"""Each optimisation pass keeps the run's results: the same counters, episodes, learner
stats and learner weights with it on and off, on a fixed seed, on real Ray (short runs).

The compile-time decisions are in ``tests/test_passes.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import Field

import plangraph
from plangraph.flow.errors import OperatorError
from plangraph.flow.sentinel import NOT_READY
from plangraph.ops import register_op, unregister_op
from plangraph.ops.registry import OpParams
from plangraph.runtime.fusion import FusedMap
from plangraph.runtime.implementations import OP_IMPLS, register_impl

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"

# Result keys that measure wall time (the timers too); everything else must match exactly.
TIME_KEYS = {"time_this_iter_s", "time_total_s", "timestamp", "env_steps_per_s"}
TIME_KEYS |= {"env_steps_per_s_total", "timers"}

DQN_SMALL = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 8,  # 32 env steps per round
    "learning_starts": 64,
    "train_batch_size": 16,
    "train_steps_per_rollout": 4,
    "min_env_steps_per_iter": 64,
    "exploration_steps": 500,
}
PPO_SMALL = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 32,  # 2 workers x 2 envs x 32 = 128 env steps per round
    "train_batch_size": 128,
    "num_sgd_iter": 2,
    "sgd_minibatch_size": 64,
}


def _digest(weights: dict[str, np.ndarray]) -> dict[str, bytes]:
    return {k: np.ascontiguousarray(v).tobytes() for k, v in sorted(weights.items())}


def _run(
    plan: Any, config: dict[str, Any], iterations: int, off: tuple[str, ...] = (), **build: Any
) -> dict[str, Any]:
    """``iterations`` results (time keys dropped), the learner weights and what ran where."""
    compiled = plangraph.compile(plan, config=config, disable_passes=off)
    with plangraph.build(compiled, seed=0, **build) as algo:
        results = [algo.train() for _ in range(iterations)]
        ws = algo.ctx.worker_sets["workers"]
        if ws.remote_workers:
            import ray

            ran = ray.get(
                [
                    w.__ray_call__.remote(lambda self: sorted(self.transform_time_s))
                    for w in ws.remote_workers
                ]
            )
        else:
            ran = [sorted(ws.local_worker.transform_time_s)]
        return {
            "results": [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in results],
            "timers": [sorted(r["timers"]) for r in results],
            "weights": _digest(ws.local_policy.get_weights()),
            "stages": dict(algo.ctx.stages),
            "broadcasts": ws.num_weight_broadcasts,
            "fragment": ws.rollout_fragment_length,
            "worker_maps": ran,  # per rollout worker: the maps it ran on its fragments
            # items each node emitted, as the run's profile counts them
            "profile_items": {nid: n.items for nid, n in sorted(algo.profile().nodes.items())},
        }


def _without(results: list[dict[str, Any]], counter: str) -> list[dict[str, Any]]:
    out = []
    for r in results:
        r = dict(r)
        r["counters"] = {k: v for k, v in r["counters"].items() if k != counter}
        out.append(r)
    return out


# -- map-fusion and broadcast-coalescing (DQN: both apply) --------------------------------


@pytest.fixture(scope="module")
def dqn_runs() -> dict[str, dict[str, Any]]:
    """DQN with every pass, without map-fusion, without broadcast-coalescing."""
    return {
        "on": _run(PLANS / "dqn.json", DQN_SMALL, 4),
        "no fusion": _run(PLANS / "dqn.json", DQN_SMALL, 4, ("map-fusion",)),
        "no coalescing": _run(PLANS / "dqn.json", DQN_SMALL, 4, ("broadcast-coalescing",)),
    }


def test_map_fusion_keeps_dqns_results(dqn_runs: dict[str, dict[str, Any]]) -> None:
    on, off = dqn_runs["on"], dqn_runs["no fusion"]
    assert on["stages"]["train"] == on["stages"]["target"] == "train+target"
    assert off["stages"]["train"] == "train" and off["stages"]["target"] == "target"
    assert on["results"] == off["results"]
    assert on["weights"] == off["weights"]
    assert on["results"][-1]["num_env_steps_trained"] > 0  # it trained
    assert on["timers"] == off["timers"]  # each fused node keeps its own timer
    assert {"train", "target"} <= set(on["timers"][-1])
    # and its own line in the profile, with the items it emitted
    assert on["profile_items"] == off["profile_items"]
    assert on["profile_items"]["target"] == on["profile_items"]["train"] > 0


def test_broadcast_coalescing_keeps_dqns_results_with_fewer_broadcasts(
    dqn_runs: dict[str, dict[str, Any]],
) -> None:
    on, off = dqn_runs["on"], dqn_runs["no coalescing"]
    # The one difference: the pass's own bookkeeping of the broadcast phase.
    assert all("num_updates/train" in r["counters"] for r in on["results"])
    assert _without(on["results"], "num_updates/train") == off["results"]
    assert on["weights"] == off["weights"]
    updates = on["results"][-1]["counters"]["num_updates/train"]
    k = DQN_SMALL["train_steps_per_rollout"]
    assert updates >= 2 * k
    # one broadcast when the worker set starts, then one per update / per block of k
    assert off["broadcasts"] == 1 + updates
    assert on["broadcasts"] == 1 + updates // k


def test_a_fused_stage_resumes_at_the_step_that_was_not_ready() -> None:
    calls: list[tuple[str, Any]] = []
    busy = [True]

    def first(x: int) -> int:
        calls.append(("first", x))
        return x + 1

    def second(x: int) -> Any:
        calls.append(("second", x))
        if busy[0]:  # back-pressure once, like a full learner queue
            busy[0] = False
            return NOT_READY
        return x * 10

    fused = FusedMap([("a", first), ("b", second)])
    assert fused(1) is NOT_READY
    assert fused(1) == 20  # for_each offers the same item again; "a" is not re-run
    assert calls == [("first", 1), ("second", 2), ("second", 2)]
    assert fused(2) == 30

    def broken(x: int) -> int:
        raise ValueError("bad item")

    with pytest.raises(OperatorError) as info:
        FusedMap([("a", first), ("b", broken)])(1)
    assert info.value.node_id == "b" and "ValueError: bad item" in str(info.value)


# -- worker-side-maps -------------------------------------------------------------------


@pytest.fixture
def scale_column() -> Any:
    """A pure, row-wise user operator that changes what the learner sees."""

    @register_op(
        category="combine",
        inputs=["SampleBatch"],
        output="SampleBatch",
        pure=True,
        rowwise=True,
        replace=True,
    )
    class ScaleColumn(OpParams):
        """Multiply column ``column`` by ``factor``."""

        column: str = Field("value_targets", description="Column name.")
        factor: float = Field(1.0, description="Multiplier.")

    @register_impl("ScaleColumn")
    def _scale(params: Any) -> Any:
        column, factor = params.column, np.float32(params.factor)

        def scale(batch: Any) -> Any:
            from plangraph.rl import SampleBatch

            out = SampleBatch(dict(batch.items()))
            out[column] = batch[column] * factor
            return out

        return scale

    yield ScaleColumn
    unregister_op("ScaleColumn")
    OP_IMPLS.pop("ScaleColumn", None)


def _with_map(plan_name: str, op: str, mode: str = "bulk_sync", **params: Any) -> dict:
    plan = json.loads((PLANS / f"{plan_name}.json").read_text())
    plan["nodes"]["rollouts"]["params"]["mode"] = mode
    plan["nodes"]["m"] = {"op": op, "inputs": ["rollouts"], "params": params}
    plan["nodes"]["concat"]["inputs"] = ["m"]
    return plan


def test_worker_side_maps_keep_ppos_results_and_leave_the_driver(scale_column: Any) -> None:
    plan = _with_map("ppo", "ScaleColumn", factor=0.5)
    on = _run(plan, PPO_SMALL, 3)
    off = _run(plan, PPO_SMALL, 3, ("worker-side-maps",))
    assert on["stages"]["m"] == "rollouts@workers" and off["stages"]["m"] == "m"
    assert on["results"] == off["results"] and on["weights"] == off["weights"]
    # each rollout worker ran the map on its own fragments, and only with the pass
    assert on["worker_maps"] == [["m"], ["m"]] and off["worker_maps"] == [[], []]
    # and the map matters: without it the learner sees other value targets
    plain = _run(PLANS / "ppo.json", PPO_SMALL, 1)
    assert plain["results"][0]["learner"] != on["results"][0]["learner"]


def test_standardize_fields_on_the_local_worker_keeps_the_results() -> None:
    plan = _with_map("ppo", "StandardizeFields", mode="async")
    config = {**PPO_SMALL, "num_workers": 0, "train_batch_size": 64}
    on = _run(plan, config, 2)
    off = _run(plan, config, 2, ("worker-side-maps",))
    assert on["stages"]["m"] == "rollouts@workers"
    assert on["worker_maps"] == [["m"]] and off["worker_maps"] == [[]]
    assert on["results"] == off["results"] and on["weights"] == off["weights"]


def test_rollout_worker_applies_its_batch_transforms_after_postprocessing() -> None:
    from plangraph.algorithms.ppo import PPOConfig
    from plangraph.rl import RolloutWorker
    from plangraph.rl.standardize import standardize_fields

    def worker() -> RolloutWorker:
        return RolloutWorker("CartPole-v1", 2, 64, PPOConfig(), seed=5, worker_index=1)

    plain, mapped = worker(), worker()
    mapped.set_batch_transforms([("std", lambda b: standardize_fields(b, ["advantages"]))])
    want, got = plain.sample(), mapped.sample()
    expected = standardize_fields(want, ["advantages"])
    assert got.keys() == expected.keys()
    for key in got.keys():
        assert np.array_equal(got[key], expected[key]), key
    assert list(got.episode_returns) == list(want.episode_returns)
    assert mapped.transform_time_s["std"] > 0
    mapped.set_batch_transforms([("drop", lambda b: b.slice(0, 3))])
    with pytest.raises(RuntimeError, match=r"node 'drop' is declared pure .* returned 3 rows"):
        mapped.sample()
    mapped.set_batch_transforms([])
    assert mapped.sample().count == 128


# -- rollout-sizing ---------------------------------------------------------------------


def test_auto_fragments_run_as_the_sized_literal_would() -> None:
    auto = {**PPO_SMALL, "rollout_fragment_length": "auto"}
    sized = _run(PLANS / "ppo.json", auto, 2)
    literal = _run(PLANS / "ppo.json", PPO_SMALL, 2, ("rollout-sizing",))
    assert sized["fragment"] == literal["fragment"] == 32
    assert sized["results"] == literal["results"] and sized["weights"] == literal["weights"]
    # one worker instead of two: sized again, a round is still the train batch
    one = _run(PLANS / "ppo.json", auto, 2, num_workers=1)
    assert one["fragment"] == 64
    assert [r["num_env_steps_sampled"] for r in one["results"]] == [128, 256]
