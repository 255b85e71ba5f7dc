"""Replay actors (Ape-X) on real Ray actors: sharded capacity and FIFO eviction, where
batches go, priorities back to the right shard and slot, per-worker exploration, and
runs that lose a replay shard or a rollout worker and go on."""

from __future__ import annotations

import itertools
import json
import queue
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plangraph
from plangraph.algorithms.dqn import DQNConfig
from plangraph.algorithms.dqn.config import per_worker_epsilon
from plangraph.flow.local import LocalIterator
from plangraph.ops.resources import ReplayActorsParams, shard_split
from plangraph.rl.replay_actors import GENERATION_STRIDE, ReplayActorSet, ReplayShardError
from plangraph.rl.sample_batch import SampleBatch
from plangraph.runtime.implementations import LOWERINGS
from plangraph.runtime.items import ReplayPriorities, TrainInfo
from tests.waiting import wait_until_dead

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(300)]

SMALL = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 16,
    "num_replay_shards": 2,
    "buffer_size": 4_000,
    "learning_starts": 256,
    "train_batch_size": 32,
    "min_env_steps_per_iter": 256,
    "target_network_update_freq": 512,
}


def _rows(first: int, n: int) -> SampleBatch:
    """``n`` rows whose ``obs`` is their global row number ``first ..``."""
    obs = np.arange(first, first + n, dtype=np.float32)[:, None]
    return SampleBatch({"obs": obs, "actions": np.zeros(n, dtype=np.int64)})


def _apex(replay: dict[str, Any] | None = None, workers: dict[str, Any] | None = None) -> Any:
    plan = json.loads((PLANS / "apex.json").read_text())
    plan["resources"]["replay"]["params"].update(replay or {})
    plan["resources"]["workers"]["params"].update(workers or {})
    return plangraph.compile(plan, config=SMALL)


def _shard_state(shards: ReplayActorSet, k: int) -> dict[str, Any]:
    import ray

    return ray.get(shards.shards[k].stats.remote())


# -- shards: capacity, eviction, readiness ---------------------------------------------------


def test_capacity_and_learning_starts_are_split_over_the_shards_in_env_steps() -> None:
    assert shard_split(10, 4) == [3, 3, 2, 2]
    params = ReplayActorsParams(capacity=10, learning_starts=5, num_shards=3)
    shards = ReplayActorSet(params, seed=0, name="replay")
    try:
        assert shards.capacities == [4, 3, 3] and sum(shards.capacities) == 10
        assert shards.learning_starts == [2, 2, 1]
        # Shard 0 keeps its last 4 env steps (FIFO), whatever the batch sizes.
        for first in range(0, 6, 2):
            shards.add(0, _rows(first, 2), 2, "store")
        shards.add(0, _rows(6, 3), 3, "store")  # 9 rows in total sent to shard 0
        import ray

        ray.get(shards.shards[0].ping.remote())  # adds run in order before this
        stats = _shard_state(shards, 0)
        assert stats["num_entries"] == 4 and stats["num_added"] == 9
        batch = ray.get(shards.shards[0].replay.remote(64))
        assert set(batch["obs"][:, 0].astype(int)) <= {5, 6, 7, 8}  # the newest 4 rows
        assert set(batch["replay_shard"]) == {0}
        assert np.array_equal(batch["batch_indexes"], batch["obs"][:, 0].astype(np.int64))
        # The other shards hold nothing, and are not ready.
        assert _shard_state(shards, 1)["num_entries"] == 0
        assert shards.ready(0) and not shards.ready(1) and not shards.ready(2)
        assert ray.get(shards.shards[1].replay.remote(4)) is None
    finally:
        shards.stop()


def test_training_intensity_owes_replay_per_env_step_stored_past_learning_starts() -> None:
    params = ReplayActorsParams(
        capacity=100, learning_starts=8, num_shards=2, training_intensity=2.0
    )
    shards = ReplayActorSet(params, seed=0, name="replay")
    try:
        # Below learning_starts nothing is owed and storing goes on.
        shards.add(0, _rows(0, 6), 6, "store")
        assert shards.replay_owed() == 0 and not shards.may_replay() and not shards.store_waits()
        # 4 env steps past learning_starts owe 8 of replay; shard 0 (4 of its 4) is ready,
        # so the writer holds its next batch until the reader has asked for them.
        shards.add(1, _rows(6, 6), 6, "store")
        assert shards.replay_owed() == 8 and shards.may_replay() and shards.store_waits()
        shards.set_in_flight("replay_batches", 6)
        assert shards.replay_owed() == 2 and shards.store_waits()
        shards.set_in_flight("replay_batches", 4)  # set, not added
        shards.add_replayed(6)
        assert shards.replay_owed() == -2 and not shards.may_replay() and not shards.store_waits()
        # A checkpoint keeps the ratio's account.
        state = shards.get_state()
        assert (state["inserted"], state["replayed"], state["training_intensity"]) == (12, 6, 2)
        shards.set_in_flight("replay_batches", 0)
        shards.set_state(state)
        assert (shards.inserted, shards.replayed, shards.replay_owed()) == (12, 6, 2)
    finally:
        shards.stop()
    # Restored with another ratio, or from a checkpoint from before the ratio was kept, the
    # ratio applies from the restore on: no burst of replay (or of sampling) at once.
    for changed in (
        {**state, "training_intensity": 8.0},
        {k: v for k, v in state.items() if k not in ("ratio_mark", "training_intensity")},
    ):
        again = ReplayActorSet(params.model_copy(update={"training_intensity": 3.0}))
        try:
            again.set_state(changed)
            assert again.replay_owed() == 0 and not again.store_waits()
            again.add(0, _rows(12, 2), 2, "store")
            assert again.replay_owed() == 6  # 3 x the 2 env steps stored since
        finally:
            again.stop()
    # Without training_intensity replay is always owed and storing never waits.
    free = ReplayActorSet(ReplayActorsParams(capacity=10, learning_starts=0, num_shards=1))
    try:
        free.add(0, _rows(0, 4), 4, "store")
        assert free.may_replay() and not free.store_waits()
    finally:
        free.stop()


def test_a_writer_is_not_held_while_no_shard_can_be_asked() -> None:
    """Replay owed to shards that are not ready yet (an uneven split, a replaced shard)
    cannot be asked for: storing is what makes it possible, so it goes on."""
    params = ReplayActorsParams(
        capacity=100, learning_starts=8, num_shards=2, training_intensity=1.0
    )
    shards = ReplayActorSet(params, seed=0, name="replay")
    try:
        shards.add(0, _rows(0, 3), 3, "store")
        shards.add(1, _rows(3, 9), 9, "store")  # 12 inserted, 4 owed; shard 0 holds 3 of 4
        assert shards.may_replay() and shards.ready(1) and shards.store_waits()
        shards.stored[1] = 0  # as after shard 1 was replaced by an empty one
        assert shards.may_replay() and not shards.store_waits()
    finally:
        shards.stop()


def test_shards_are_chosen_round_robin_or_by_worker() -> None:
    params = ReplayActorsParams(capacity=30, learning_starts=0, num_shards=3)
    shards = ReplayActorSet(params, seed=0, name="replay")
    try:
        assert [shards.shard_for() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
        # by worker: each worker sticks to the shard it got when first seen
        assert [shards.shard_for(w) for w in ("a", "b", "a", "c", "b", "a")] == [1, 2, 1, 0, 2, 1]
    finally:
        shards.stop()


def test_store_to_replay_by_worker_sends_each_workers_batches_to_its_shard() -> None:
    import ray

    plan = json.loads((PLANS / "apex.json").read_text())
    plan["nodes"]["store"]["params"]["shard"] = "by_worker"
    algo = plangraph.build(plangraph.compile(plan, config=SMALL), seed=0)
    try:
        r = algo.train()
        shards = algo.ctx.replay_actors["replay"]
        added = [int(_shard_state(shards, k)["num_added"]) for k in range(2)]
        stored = r["counters"]["num_env_steps_stored"]
        # Every env step sampled and stored went to exactly one shard.
        assert sum(added) == stored == sum(shards.stored)
        assert 0 < stored <= r["num_env_steps_sampled"]
        for k in range(2):
            sample = ray.get(shards.shards[k].replay.remote(256))
            if sample is not None:
                # eps_id = worker_index * 2**40 + episode: one worker per shard
                assert len(set((sample["eps_id"] >> 40).tolist())) == 1
    finally:
        algo.stop()


def test_store_to_replay_passes_the_rollout_workers_object_ref() -> None:
    """The shard gets the ref the rollout worker's result came in, not a second copy."""
    from plangraph.flow.metrics import MetricsContext, metrics_context
    from plangraph.flow.parallel import ParallelIterator

    algo = plangraph.build(_apex(), seed=0)
    try:
        ctx = algo.ctx
        ws = ctx.worker_sets["workers"]
        shards = ctx.replay_actors["replay"]
        sent: list[Any] = []
        original_add = shards.add

        def spy(shard: int, batch: Any, count: int, node_id: str) -> None:
            sent.append(batch)
            original_add(shard, batch, count, node_id)

        shards.add = spy  # records what StoreToReplay hands the shards
        gathered = ParallelIterator.from_actors(ws.remote_workers, name="rollouts").gather_async()
        store = LOWERINGS["StoreToReplay"](ctx.compiled.nodes["store"], [gathered], ctx)
        local = LOWERINGS["StoreToReplay"](
            ctx.compiled.nodes["store"], [LocalIterator.from_iterable([_rows(0, 4)])], ctx
        )
        metrics = MetricsContext()
        store.shared_metrics.set(metrics)
        local.shared_metrics.set(metrics)
        with metrics_context(metrics):
            batches = store.take(4)
            local.take(1)
        import ray

        assert all(isinstance(b, ray.ObjectRef) for b in sent[:4])
        assert all(isinstance(b, SampleBatch) and b.count == 32 for b in batches)
        assert isinstance(sent[4], SampleBatch)  # a batch made in the driver: sent as is
        assert metrics.counters["num_env_steps_stored"] == 4 * 32 + 4
    finally:
        algo.stop()


@pytest.mark.parametrize("intensity", [0.5, 3.0])
def test_a_run_keeps_the_replay_ratio_its_training_intensity_sets(intensity: float) -> None:
    """Replayed env steps track ``intensity * (stored - learning_starts)`` at every
    iteration, within what is in flight: the shards' requests (2 shards x 4 x 32 env steps)
    and one held rollout fragment (32 env steps) of replay."""
    algo = plangraph.build(_apex(replay={"training_intensity": intensity}), seed=0)
    try:
        for _ in range(6):
            r = algo.train()
            stored = r["counters"]["num_env_steps_stored"]
            replayed = r["counters"]["num_env_steps_replayed"]
            target = intensity * max(0, stored - SMALL["learning_starts"])
            assert target - (2 * 4 * 32 + intensity * 32) <= replayed <= target + 32, r["counters"]
        assert replayed > 0 and r["num_env_steps_trained"] > 0
        shards = algo.ctx.replay_actors["replay"]
        assert shards.inserted == stored and shards.replayed >= replayed
    finally:
        algo.stop()


# -- priorities: the right shard and slot, stale ones dropped --------------------------------


def test_priorities_land_on_the_right_shard_and_slot_and_stale_ones_are_dropped() -> None:
    import ray

    algo = plangraph.build(
        _apex(replay={"capacity": 64, "learning_starts": 2}), seed=0
    )  # 2 x 32 rows
    try:
        ctx = algo.ctx
        shards = ctx.replay_actors["replay"]
        for k in range(2):
            shards.add(k, _rows(100 * k, 32), 32, "store")
        b0, b1 = ray.get([shards.shards[k].replay.remote(8) for k in range(2)])
        assert set(b0["replay_shard"]) == {0} and set(b1["replay_shard"]) == {1}
        batch = SampleBatch.concat_samples([b0, b1])
        td = np.arange(1, 17, dtype=np.float32) * np.where(np.arange(16) % 2, -1, 1)
        keys = ReplayPriorities.of(batch, {"td_error": td})
        assert keys is not None
        # Shard 1 then gets 32 new rows: every slot sampled from it is overwritten (FIFO).
        shards.add(1, _rows(1000, 32), 32, "store")
        info = TrainInfo({"loss": 0.0}, batch.count, keys)
        op = LOWERINGS["UpdatePriorities"](
            ctx.compiled.nodes["priorities"], [LocalIterator.from_iterable([info, info])], ctx
        )
        op.shared_metrics.set(ctx.run_state.metrics)
        assert [i.count for i in op.take(2)] == [16, 16]  # passes the TrainInfo through
        rows0 = np.asarray(batch["batch_indexes"][:8])
        # Shard 0: each sampled slot holds |td| + eps of its own row (last write for a
        # row sampled twice); shard 1: nothing applied, its slots hold the new rows.
        got = ray.get(shards.shards[0].priorities.remote(rows0))
        want = {int(i): abs(float(t)) + 1e-6 for i, t in zip(rows0, td[:8], strict=True)}
        assert np.allclose(got, [want[int(i)] for i in rows0])
        assert np.isnan(
            ray.get(shards.shards[1].priorities.remote(batch["batch_indexes"][8:]))
        ).all()
        new_ids = np.arange(32, 64)
        assert np.allclose(ray.get(shards.shards[1].priorities.remote(new_ids)), 1.0)
        # The counters add up once the shards have replied.
        op2 = LOWERINGS["UpdatePriorities"](
            ctx.compiled.nodes["priorities"],
            [LocalIterator.from_iterable([TrainInfo({}, 0)] * 2)],
            ctx,
        )
        op2.shared_metrics.set(ctx.run_state.metrics)
        time.sleep(0.5)
        op2.take(2)
        counters = ctx.run_state.counters
        assert counters["num_priorities_sent"] == 32
        assert counters["num_priorities_applied"] + counters["num_priorities_stale"] <= 32
    finally:
        algo.stop()


def test_a_replaced_shard_ignores_priorities_of_its_predecessor() -> None:
    params = ReplayActorsParams(
        capacity=64, learning_starts=1, num_shards=1, prioritized=True, max_shard_restarts=1
    )
    shards = ReplayActorSet(params, seed=0, name="replay")
    try:
        import ray

        shards.add(0, _rows(0, 16), 16, "store")
        old = ray.get(shards.shards[0].replay.remote(8))
        dead = shards.shards[0]
        ray.kill(dead, no_restart=True)
        wait_until_dead(dead)
        from ray.exceptions import RayActorError

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            shards.replace_dead_shard(0, dead, RayActorError(), "replay_batches")
        assert any("replay shard 0" in str(w.message) for w in caught)
        assert shards.generations == [1] and shards.stored == [0] and shards.num_restarts == 1
        shards.add(0, _rows(0, 16), 16, "store")
        new = ray.get(shards.shards[0].replay.remote(8))
        assert (new["batch_indexes"] >= GENERATION_STRIDE).all()  # the new generation's ids
        applied, stale = ray.get(
            shards.shards[0].update_priorities.remote(old["batch_indexes"], np.ones(8))
        )
        assert (applied, stale) == (0, 8)
    finally:
        shards.stop()


def test_the_learner_thread_returns_td_errors_keyed_by_shard_and_slot() -> None:
    import ray

    algo = plangraph.build(_apex(replay={"learning_starts": 2}), seed=0)
    try:
        ctx = algo.ctx
        shards = ctx.replay_actors["replay"]
        worker = ctx.worker_sets["workers"].remote_workers[0]
        for k in range(2):
            shards.add(k, worker.sample.remote(), 32, "store")
        batch = SampleBatch.concat_samples(
            ray.get([shards.shards[k].replay.remote(16) for k in range(2)])
        )
        learner = ctx.learner("@learner")
        learner.inqueue.put(batch)
        try:
            update = learner.outqueue.get(timeout=60)
        except queue.Empty:
            pytest.fail("the learner thread put no update on its out-queue within 60 s")
        assert update.replay is not None
        assert np.array_equal(update.replay.shards, batch["replay_shard"])
        assert np.array_equal(update.replay.batch_indexes, batch["batch_indexes"])
        assert update.replay.td_errors.shape == (32,) and np.isfinite(update.replay.td_errors).all()
    finally:
        algo.stop()


# -- per-worker exploration ---------------------------------------------------------------


def test_per_worker_epsilons_follow_the_ape_x_formula() -> None:
    import ray

    from plangraph.rl.worker_set import WorkerSet

    config = DQNConfig(epsilon_final=0.4, epsilon_timesteps=0, per_worker_epsilon_alpha=7.0)
    ws = WorkerSet("CartPole-v1", 3, 2, 8, config, seed=0)
    try:
        eps = ray.get(
            [w.__ray_call__.remote(lambda self: self.policy.epsilon) for w in ws.remote_workers]
        )
        want = [0.4 ** (1 + 7 * i / 2) for i in range(3)]
        assert np.allclose(eps, want) and eps[0] == pytest.approx(0.4)
        assert per_worker_epsilon(0.4, 0, 1, 7.0) == 0.4  # a single worker keeps epsilon

        # And they act on it: the first worker explores far more than the last.
        def random_share(self: Any) -> float:
            obs = np.zeros((2000, 4), dtype=np.float32)
            greedy = self.policy.compute_actions(obs, explore=False)[0]
            acted = self.policy.compute_actions(obs, explore=True)[0]
            return float((acted != greedy).mean())

        shares = ray.get([w.__ray_call__.remote(random_share) for w in ws.remote_workers])
        assert shares[0] == pytest.approx(0.2, abs=0.05)  # eps 0.4, half the random picks differ
        assert shares[2] < 0.01
    finally:
        ws.stop()


def test_explain_shows_the_shards_the_memory_and_the_per_worker_epsilons(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from plangraph import cli

    assert cli.main(["explain", str(PLANS / "apex.json")]) == 0
    out = capsys.readouterr().out
    assert "replay: ReplayActors (sharded over Ray actors)" in out
    assert "shards: 4 Ray actors, prioritized (alpha 0.6, beta 0.4 -> 0.4), FIFO" in out
    assert "per shard: 25,000 env steps, sampled once holding 250" in out
    assert (
        "        replay ratio: 8 env steps replayed per env step stored past learning_starts\n"
        "          (replay waits when ahead, StoreToReplay when behind)\n"
    ) in out
    assert "78 bytes per env step" in out and "2.9 MiB per shard, 11.4 MiB in total" in out
    assert "epsilon_i = epsilon ** (1 + 7 * i / (N - 1))" in out
    assert "worker 1: 0.1, worker 2: 1e-08" in out


# -- failures: a dead shard, a dead rollout worker ------------------------------------------


def _monotone(results: list[dict[str, Any]]) -> None:
    for before, after in itertools.pairwise(results):
        for key, value in before["counters"].items():
            assert after["counters"].get(key, 0) >= value, key
        assert after["num_env_steps_sampled"] >= before["num_env_steps_sampled"]
        assert after["num_env_steps_trained"] >= before["num_env_steps_trained"]


def test_a_killed_replay_shard_is_replaced_and_the_run_goes_on() -> None:
    import ray

    algo = plangraph.build(_apex(replay={"max_shard_restarts": 2}), seed=0)
    try:
        results = [algo.train() for _ in range(3)]
        assert results[-1]["num_env_steps_trained"] > 0
        shards = algo.ctx.replay_actors["replay"]
        dead = shards.shards[1]
        ray.kill(dead, no_restart=True)
        wait_until_dead(dead)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(4):
                results.append(algo.train())
        _monotone(results)
        assert results[-1]["counters"]["num_replay_shard_restarts"] == 1
        assert shards.generations == [0, 1] and shards.shards[1] is not dead
        messages = [str(w.message) for w in caught]
        assert any(
            "replay shard 1 of 'replay'" in m and "Ray node" in m and "plan node" in m
            for m in messages
        ), messages
        assert results[-1]["num_env_steps_trained"] > results[2]["num_env_steps_trained"]
    finally:
        algo.stop()


def test_a_killed_replay_shard_stops_the_run_when_not_to_be_replaced() -> None:
    import ray

    algo = plangraph.build(_apex(), seed=0)  # max_shard_restarts = 0
    try:
        algo.train()
        dead = algo.ctx.replay_actors["replay"].shards[0]
        ray.kill(dead, no_restart=True)
        wait_until_dead(dead)
        with pytest.raises(ReplayShardError) as info:
            for _ in range(5):
                algo.train()
        message = str(info.value)
        assert info.value.node_id in ("store", "replay_batches")
        assert "replay shard 0 of 'replay' (Ray node" in message
        assert "set max_shard_restarts on resource 'replay'" in message
    finally:
        algo.stop()


def test_a_killed_rollout_worker_is_replaced_and_the_run_goes_on() -> None:
    import ray

    algo = plangraph.build(_apex(workers={"worker_restart_backoff_s": 0.05}), seed=0)
    try:
        results = [algo.train() for _ in range(3)]
        ws = algo.ctx.worker_sets["workers"]
        dead = ws.remote_workers[0]
        ray.kill(dead, no_restart=True)
        for _ in range(4):
            results.append(algo.train())
        _monotone(results)
        assert results[-1]["counters"]["num_worker_restarts"] == 1
        assert ws.remote_workers[0] is not dead
    finally:
        algo.stop()


# -- memory -----------------------------------------------------------------------------------


def test_replay_actors_that_cannot_fit_in_rays_memory_are_refused_with_a_located_diagnostic() -> (
    None
):
    compiled = plangraph.compile(PLANS / "apex.json", config={"buffer_size": 10**10})
    with pytest.raises(plangraph.BuildError) as info:
        plangraph.build(compiled, seed=0)
    message = str(info.value)
    assert message.startswith("plans/apex.json:") and "error PG185 [replay-memory]" in message
    assert "replay actors 'replay' (4 shards) of capacity 10,000,000,000 env steps" in message
    assert "needs about 1.2 TiB when full (78 bytes per env step of CartPole-v1" in message
    assert "309.6 GiB per shard x 4" in message and "but Ray reports only" in message
    assert "at /resources/replay/params/capacity" in message and "--set buffer_size=N" in message


def test_compiler_accepts_replay_actors_where_each_op_can_use_them() -> None:
    plan = json.loads((PLANS / "apex.json").read_text())
    plan["nodes"]["replay_batches"] = {
        "op": "LocalReplay",
        "params": {"buffer": "@replay", "batch_size": 32},
    }
    compiled = plangraph.analyze(plan)
    (diag,) = [d for d in compiled.diagnostics if d.code == "PG142"]
    assert "needs a ReplayBuffer resource, but '@replay' is a ReplayActors" in diag.message
    dqn = json.loads((PLANS / "dqn.json").read_text())
    dqn["nodes"]["replay_batches"] = {
        "op": "ParallelReplay",
        "params": {"buffer": "@replay", "batch_size": 32},
    }
    (diag,) = [d for d in plangraph.analyze(dqn).diagnostics if d.code == "PG142"]
    assert "needs a ReplayActors resource, but '@replay' is a ReplayBuffer" in diag.message
    assert plangraph.analyze(PLANS / "apex.json").ok  # StoreToReplay takes either kind


def test_a_checkpoint_holds_every_shard_and_a_restored_run_goes_on(tmp_path: Path) -> None:
    compiled = _apex()
    algo = plangraph.build(compiled, seed=0)
    try:
        algo.train()
        r1 = algo.train()
        algo.save(tmp_path / "ckpt")
        shards = algo.ctx.replay_actors["replay"]
        held = [_shard_state(shards, k)["num_entries"] for k in range(2)]
        stored = list(shards.stored)
    finally:
        algo.stop()
    assert sum(held) > 0
    restored = plangraph.build(compiled, seed=0)
    try:
        restored.restore(tmp_path / "ckpt")
        shards = restored.ctx.replay_actors["replay"]
        assert [_shard_state(shards, k)["num_entries"] for k in range(2)] == held
        assert shards.stored == stored
        r2 = restored.train()
        assert r2["iteration"] == r1["iteration"] + 1
        assert r2["num_env_steps_sampled"] > r1["num_env_steps_sampled"]
        assert r2["counters"]["num_env_steps_replayed"] > r1["counters"]["num_env_steps_replayed"]
    finally:
        restored.stop()


def test_validate_replay_memory_against_the_target_memory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from plangraph import cli

    plan = str(PLANS / "apex.json")
    assert cli.main(["validate", "--replay-memory", "--memory", "lots", plan]) == 2
    assert "--memory: " in capsys.readouterr().err
    target = ["--cpus", "8", "--replay-memory"]
    assert cli.main(["validate", "--quiet", *target, "--memory", "64GiB", plan]) == 0
    capsys.readouterr()
    assert cli.main(["validate", "--quiet", *target, "--memory", "8MiB", plan]) == 1
    out = capsys.readouterr().out
    assert "error PG185 [replay-memory]" in out and "needs about 11.4 MiB when full" in out
