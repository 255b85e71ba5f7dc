"""A3C on real Ray actors: gradients computed on the rollout workers, applied on the driver,
new weights to the source worker only; counters, a killed worker, checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

import plangraph
from plangraph.compiler import load_plan
from plangraph.rl.rollout_worker import RolloutWorker

PLANS = Path(__file__).resolve().parent.parent / "plans"
FRAGMENT = 2 * 16  # env steps per gradient: num_envs_per_worker x rollout_fragment_length
SMALL = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 16,
    "min_env_steps_per_iter": 256,
}


def _build(**config: Any) -> Any:
    return plangraph.build(
        plangraph.compile(PLANS / "a3c.json", config={**SMALL, **config}), seed=0
    )


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def _policy_version(worker: Any) -> int:
    return int(ray.get(worker.__ray_call__.remote(lambda self: self.policy_version)))


def test_explain_shows_the_gradients_computed_on_the_rollout_workers() -> None:
    text = plangraph.compile(PLANS / "a3c.json").explain()
    lines = {ln.split()[0]: ln for ln in text.splitlines() if ln.startswith("  ") and ln.split()}
    assert "AsyncGradients" in lines["grads"] and "() -> GradInfo" in lines["grads"]
    assert lines["grads"].endswith("[rollout workers (actors)]")
    assert "ApplyGradients" in lines["apply"] and lines["apply"].endswith("[driver]")
    assert 'update_workers="source"' in text


def test_update_workers_source_needs_gradients_from_the_rollout_workers() -> None:
    """Gradients averaged in the driver have no single source: PG182, located."""
    plan = load_plan(PLANS / "a3c.json").to_dict()
    plan["nodes"]["batch"] = {"op": "Batch", "inputs": ["grads"], "params": {"n": 2}}
    plan["nodes"]["average"] = {"op": "AverageGradients", "inputs": ["batch"], "params": {}}
    plan["nodes"]["apply"]["inputs"] = ["average"]
    diagnostics = plangraph.analyze(plan).diagnostics
    assert [(d.code, d.node, d.pointer) for d in diagnostics] == [
        ("PG182", "apply", "/nodes/apply/params/update_workers")
    ]
    assert "AverageGradients 'average'" in diagnostics[0].message
    plan["nodes"]["apply"]["params"]["update_workers"] = True  # a broadcast is fine
    assert plangraph.analyze(plan).diagnostics == ()


def test_worker_gradients_are_its_policy_gradients_on_its_own_fragment() -> None:
    """What a worker sends equals sample() then compute_gradients() on a twin worker."""
    config = {"algo": "a2c", "gae_lambda": 0.95}
    a = RolloutWorker("CartPole-v1", 4, 32, config, seed=5, worker_index=1)
    b = RolloutWorker("CartPole-v1", 4, 32, config, seed=5, worker_index=1)
    for _ in range(3):  # episodes end in later fragments
        got = a.sample_and_compute_gradients()
        batch = b.sample()
        want, stats = b.policy.compute_gradients(batch)
        assert got.count == batch.env_steps() == 4 * 32
        assert len(got.grads) == len(want) == len(list(a.policy.model.parameters()))
        for g, w, p in zip(got.grads, want, a.policy.model.parameters(), strict=True):
            assert g.dtype == np.float32 and g.shape == tuple(p.shape)
            assert g.tobytes() == w.tobytes()
        assert got.stats == {k: float(v) for k, v in stats.items()}
        assert got.episode_returns.tolist() == batch.episode_returns.tolist()
        assert got.episode_lengths.tolist() == batch.episode_lengths.tolist()
        assert got.worker_index == 1 and got.policy_version == 0
    # No optimizer step on the worker: its weights are still the ones it was built with.
    assert _same(a.get_weights(), b.get_weights())


@pytest.mark.usefixtures("ray_session")
def test_new_weights_go_to_the_source_worker_only() -> None:
    """After each applied gradient only its worker holds the new weights; the other keeps
    the weights of the last update of its own gradients (or the initial ones)."""
    from plangraph.flow.metrics import get_metrics
    from plangraph.runtime.implementations import LOWERINGS

    algo = _build()
    try:
        ctx = algo.ctx
        ws = ctx.worker_sets["workers"]
        initial = ws.local_policy.get_weights()
        assert all(
            _same(w, initial) for w in ray.get([w.get_weights.remote() for w in ws.remote_workers])
        )
        nodes = ctx.compiled.nodes
        grads = LOWERINGS["AsyncGradients"](nodes["grads"], [], ctx)
        applied: list[tuple[Any, dict[str, np.ndarray], int]] = []

        def note(info: Any) -> Any:
            version = get_metrics().counters["num_updates/apply"]
            applied.append((get_metrics().current_actor, ws.local_policy.get_weights(), version))
            return info

        sources: list[Any] = []

        def source(info: Any) -> Any:
            sources.append(info.source)
            return info

        stream = LOWERINGS["ApplyGradients"](nodes["apply"], [grads.for_each(source)], ctx)
        stream = stream.for_each(note)
        stream.shared_metrics.set(ctx.run_state.metrics)
        stream.take(1)
        # One update: the source worker has the new weights, the other one is untouched.
        src, after, _ = applied[0]
        other = next(w for w in ws.remote_workers if w is not src)
        assert not _same(after, initial)
        assert _same(ray.get(src.get_weights.remote()), after)
        assert _same(ray.get(other.get_weights.remote()), initial)

        stream.take(9)
        assert [s for s in sources] == [a[0] for a in applied]  # the item names its actor
        counters = ctx.run_state.counters
        assert counters["num_weight_syncs"] == counters["num_updates/apply"] == len(applied)
        for worker in ws.remote_workers:
            mine = [(w, v) for a, w, v in applied if a is worker]
            want, version = mine[-1] if mine else (initial, 0)
            assert _same(ray.get(worker.get_weights.remote()), want)
            assert _policy_version(worker) == version  # tagged with the learner's version
    finally:
        algo.stop()


@pytest.mark.usefixtures("ray_session")
def test_gradients_without_a_source_are_refused_before_the_step() -> None:
    """What the compiler cannot see (e.g. a user operator emitting GradInfo) fails at the
    first item, naming the node, with the learner untouched."""
    from plangraph.flow.local import LocalIterator
    from plangraph.runtime.implementations import LOWERINGS
    from plangraph.runtime.items import GradInfo

    algo = _build(num_workers=1)
    try:
        ctx = algo.ctx
        policy = ctx.worker_sets["workers"].local_policy
        before = policy.get_weights()
        grads = [np.ones(tuple(p.shape), dtype=np.float32) for p in policy.model.parameters()]
        source = LocalIterator.from_iterable([GradInfo(grads, FRAGMENT)], name="user_grads")
        stream = LOWERINGS["ApplyGradients"](ctx.compiled.nodes["apply"], [source], ctx)
        stream.shared_metrics.set(ctx.run_state.metrics)
        with pytest.raises(plangraph.OperatorError, match="no source rollout worker") as info:
            next(iter(stream))
        assert info.value.node_id == "apply"
        assert _same(policy.get_weights(), before)
        assert ctx.run_state.counters.get("num_env_steps_trained", 0) == 0
    finally:
        algo.stop()


@pytest.mark.usefixtures("ray_session")
def test_env_steps_are_counted_when_gradients_arrive_and_when_applied() -> None:
    algo = _build()
    try:
        results = [algo.train() for _ in range(3)]
    finally:
        algo.stop()
    last = results[-1]
    for r in results:
        # Every gradient that arrived was applied in the same pull: no rows in between.
        assert r["num_env_steps_sampled"] == r["num_env_steps_trained"]
        assert r["num_env_steps_sampled"] % FRAGMENT == 0
        assert r["num_env_steps_sampled_this_iter"] >= 256
    updates = last["num_env_steps_trained"] // FRAGMENT
    assert last["counters"]["num_updates/apply"] == updates
    assert last["counters"]["num_weight_syncs"] == updates
    assert last["episodes_total"] > 0
    learner = last["learner"]
    assert learner["policy_lag"] >= 0 and "policy_loss" in learner and "cur_lr" in learner


@pytest.mark.usefixtures("ray_session")
def test_without_remote_workers_the_local_worker_computes_the_gradients() -> None:
    algo = _build(num_workers=0)
    try:
        ws = algo.ctx.worker_sets["workers"]
        before = ws.local_policy.get_weights()
        result = algo.train()
        assert not _same(ws.local_policy.get_weights(), before)
    finally:
        algo.stop()
    assert result["num_env_steps_sampled"] == result["num_env_steps_trained"] >= 256
    assert result["counters"]["num_updates/apply"] == result["num_env_steps_trained"] // FRAGMENT
    assert "num_weight_syncs" not in result["counters"]  # the worker shares the policy
    assert result["learner"]["policy_lag"] == 0.0


@pytest.mark.usefixtures("ray_session")
@pytest.mark.timeout(240)
def test_a_killed_rollout_worker_is_replaced_and_the_counters_stay_monotone() -> None:
    algo = _build(num_async=2)
    try:
        ws = algo.ctx.worker_sets["workers"]
        results = [algo.train()]
        victim = ws.remote_workers[0]
        ray.kill(victim, no_restart=True)  # requests to it are in flight
        results += [algo.train() for _ in range(3)]
        assert ws.remote_workers[0] is not victim
        replacement = ws.remote_workers[0]
        # The replacement computes gradients and receives weights like the others.
        assert _policy_version(replacement) > 0
    finally:
        algo.stop()
    assert results[0]["num_worker_restarts"] == 0
    assert [r["num_worker_restarts"] for r in results[1:]] == [1, 1, 1]
    for key in ("num_env_steps_sampled", "num_env_steps_trained", "episodes_total"):
        values = [r[key] for r in results]
        assert values == sorted(values) and values[-1] > values[0], key
    assert all(r["num_env_steps_sampled"] == r["num_env_steps_trained"] for r in results)


@pytest.mark.usefixtures("ray_session")
def test_a3c_checkpoint_restores_learner_workers_and_counters(tmp_path: Path) -> None:
    algo = _build()
    try:
        algo.train()
        saved = algo.train()
        algo.save(tmp_path / "ckpt")
        ws = algo.ctx.worker_sets["workers"]
        learner = ws.local_policy.get_weights()
        state = ws.get_state()
    finally:
        algo.stop()
    restored = _build()
    try:
        restored.restore(tmp_path / "ckpt")
        ws = restored.ctx.worker_sets["workers"]
        assert _same(ws.local_policy.get_weights(), learner)
        # Each worker is back where it was: its own (possibly older) weights and version.
        for worker, want in zip(ws.remote_workers, state["workers"], strict=True):
            assert _same(ray.get(worker.get_weights.remote()), want["policy"]["weights"])
            assert _policy_version(worker) == want["policy_version"]
        result = restored.train()
        resumed = [_policy_version(worker) for worker in ws.remote_workers]
    finally:
        restored.stop()
    assert result["iteration"] == saved["iteration"] + 1
    for key in ("num_env_steps_sampled", "num_env_steps_trained", "episodes_total"):
        assert result[key] > saved[key], key
    before = saved["counters"]["num_updates/apply"]
    after = result["counters"]["num_updates/apply"]
    assert after > before
    # The learner's version and the workers' continue from the checkpoint's numbering: each
    # worker's version only moves forward, to versions the restored learner issued after
    # `before`. How many updates a worker lags depends on the machine's load (a slow worker
    # waits while the other's gradients are applied), but no gradient can be older than the
    # oldest version a worker was restored with; a worker reset to version 0 would be.
    for version, want in zip(resumed, state["workers"], strict=True):
        assert want["policy_version"] <= version <= after
    assert max(resumed) > before
    oldest = min(want["policy_version"] for want in state["workers"])
    assert 0 <= result["learner"]["policy_lag"] <= after - 1 - oldest
