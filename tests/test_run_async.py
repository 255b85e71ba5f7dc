"""Asynchronous learning: the learner thread, Enqueue/Dequeue back-pressure, per-actor
weight sync, shutdown in every path, and checkpoints of an async run."""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plangraph
from plangraph.flow.concurrency import concurrently
from plangraph.flow.errors import OperatorTimeoutError
from plangraph.flow.local import LocalIterator
from plangraph.runtime import learner_thread
from plangraph.runtime.algorithm import Checkpoint
from plangraph.runtime.implementations import LOWERINGS
from tests.waiting import run_has_results, wait_until

pytestmark = pytest.mark.usefixtures("ray_session")


def _async_plan(
    algo: str = "a2c", *, inqueue_size: int = 2, num_workers: int = 2, delay: int = 1
) -> dict[str, Any]:
    return {
        "name": "async_test",
        "resources": {
            "workers": {
                "kind": "WorkerSet",
                "params": {
                    "num_workers": num_workers,
                    "num_envs_per_worker": 4,
                    "rollout_fragment_length": 16,
                    "policy": {"algo": algo},
                },
            },
            "learner": {"kind": "LearnerThread", "params": {"inqueue_size": inqueue_size}},
        },
        "nodes": {
            "rollouts": {"op": "ParallelRollouts", "params": {"mode": "async", "num_async": 2}},
            "sync": {
                "op": "UpdateWorkerWeights",
                "inputs": ["rollouts"],
                "params": {"max_weight_sync_delay": delay},
            },
            "concat": {
                "op": "ConcatBatches",
                "inputs": ["sync"],
                "params": {"min_batch_size": 128},
            },
            "enqueue": {"op": "Enqueue", "inputs": ["concat"], "params": {"queue": "@learner"}},
            "dequeue": {"op": "Dequeue", "params": {"queue": "@learner"}},
            "merged": {
                "op": "Concurrently",
                "inputs": ["enqueue", "dequeue"],
                "params": {"mode": "async", "output_indexes": [1]},
            },
            "metrics": {
                "op": "StandardMetricsReporting",
                "inputs": ["merged"],
                "params": {"min_env_steps_per_iter": 512},
            },
        },
        "output": "metrics",
    }


def _batches(algo: Any, n: int, rows: int) -> list[Any]:
    """``n`` real postprocessed batches of ``rows`` env steps from the local policy's spaces."""
    from plangraph.rl.rollout_worker import RolloutWorker

    ws = algo.ctx.worker_sets["workers"]
    worker = RolloutWorker("CartPole-v1", 8, rows // 8, ws.policy_config, seed=3, worker_index=9)
    return [worker.sample() for _ in range(n)]


def test_back_pressure_never_loses_a_batch() -> None:
    """A full in-queue makes Enqueue retry the same batch; every batch is trained once."""
    compiled = plangraph.compile(_async_plan("ppo", inqueue_size=1))
    algo = plangraph.build(compiled, seed=0)
    try:
        batches = _batches(algo, 12, 2048)  # PPO steps on 2048 rows: slower than a put
        ctx = algo.ctx
        source = LocalIterator.from_iterable(batches, name="finite")
        enqueue = LOWERINGS["Enqueue"](compiled.nodes["enqueue"], [source], ctx)
        dequeue = LOWERINGS["Dequeue"](compiled.nodes["dequeue"], [], ctx)
        merged = concurrently([enqueue, dequeue], mode="async", output_indexes=[1])
        merged.shared_metrics.set(ctx.run_state.metrics)
        infos = merged.take(len(batches))
        counters = ctx.run_state.counters
        assert [i.count for i in infos] == [2048] * len(batches)
        assert counters["num_env_steps_enqueued"] == 2048 * len(batches)
        assert counters["num_env_steps_trained"] == 2048 * len(batches)
        assert counters["num_enqueue_retries"] > 0  # the queue really was full
        assert ctx.learners["learner"].version == len(batches)  # one update per batch
    finally:
        algo.stop()


def test_async_plan_trains_and_overlaps_sampling() -> None:
    algo = plangraph.build(plangraph.compile(_async_plan()), seed=0)
    try:
        for _ in range(3):
            r = algo.train()
        counters = r["counters"]
        assert r["num_env_steps_sampled"] >= 3 * 512
        # Rows are sampled, then enqueued, then trained; in flight between the stages.
        assert r["num_env_steps_sampled"] >= counters["num_env_steps_enqueued"]
        assert counters["num_env_steps_enqueued"] >= r["num_env_steps_trained"] > 0
        assert counters["num_weight_syncs"] > 0
        assert "policy_lag" in r["learner"] and "learner_busy_fraction" in r["learner"]
        learner = algo.ctx.learners["learner"]
        assert learner.alive
    finally:
        algo.stop()
    assert not learner.alive  # stop() joins the learner thread


def test_per_actor_weight_sync_sends_only_to_the_source_actor() -> None:
    """With a delay of 2 batches per actor, each actor's syncs follow its own batches."""
    compiled = plangraph.compile(_async_plan(delay=2))
    algo = plangraph.build(compiled, seed=0)
    try:
        ctx = algo.ctx
        ws = ctx.worker_sets["workers"]
        calls: list[Any] = []
        from plangraph.flow.parallel import ParallelIterator

        par = ParallelIterator.from_actors(ws.remote_workers, method="sample", name="rollouts")
        gathered = par.gather_async(num_async=1)

        def note(batch: Any) -> Any:
            from plangraph.flow.metrics import get_metrics

            calls.append(get_metrics().current_actor)
            return batch

        sync = LOWERINGS["UpdateWorkerWeights"](
            compiled.nodes["sync"], [gathered.for_each(note)], ctx
        )
        sync.shared_metrics.set(ctx.run_state.metrics)
        sync.take(12)
        syncs = ctx.run_state.counters["num_weight_syncs"]
        per_actor = {id(a): sum(1 for c in calls if c is a) for a in ws.remote_workers}
        # Exactly one sync per two batches of each actor, never to an actor without batches.
        assert syncs == sum(n // 2 for n in per_actor.values())
    finally:
        algo.stop()


def test_learner_error_surfaces_at_the_driver_naming_the_node() -> None:
    compiled = plangraph.compile(_async_plan())
    algo = plangraph.build(compiled, seed=0)
    try:
        ctx = algo.ctx
        bad = _batches(algo, 1, 64)[0]
        del bad["advantages"]  # the a2c loss needs it: learn_on_batch raises in the thread
        source = LocalIterator.from_iterable([bad, *_batches(algo, 3, 64)], name="finite")
        enqueue = LOWERINGS["Enqueue"](compiled.nodes["enqueue"], [source], ctx)
        dequeue = LOWERINGS["Dequeue"](compiled.nodes["dequeue"], [], ctx)
        merged = concurrently([enqueue, dequeue], mode="async", output_indexes=[1])
        merged.shared_metrics.set(ctx.run_state.metrics)
        started = time.monotonic()
        with pytest.raises(plangraph.OperatorError) as info:
            merged.take(4)
        assert time.monotonic() - started < 60  # surfaced, not a hang
        assert info.value.node_id in ("enqueue", "dequeue")
        assert "learner thread 'learner' failed" in str(info.value)
        assert "advantages" in str(info.value)
        assert not ctx.learners["learner"].alive
    finally:
        algo.stop()


def test_a_learner_update_that_never_ends_is_reported_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``learn_on_batch`` stuck (here: held by an event the test sets at the end): the
    driver's ``Dequeue`` raises at ``UPDATE_DEADLINE_S`` naming the learner thread, and
    ``stop()`` raises at its deadline instead of returning with the thread still running."""
    compiled = plangraph.compile(_async_plan())
    algo = plangraph.build(compiled, seed=0)
    release = threading.Event()
    try:
        ctx = algo.ctx
        learner = ctx.learners["learner"]
        policy = ctx.worker_sets["workers"].local_policy
        learn = policy.learn_on_batch

        def stuck_learn(batch: Any) -> Any:
            release.wait(120)  # a hang guard: the test sets it long before
            return learn(batch)

        policy.learn_on_batch = stuck_learn
        monkeypatch.setattr(learner_thread, "UPDATE_DEADLINE_S", 1.0)
        source = LocalIterator.from_iterable(_batches(algo, 1, 64), name="finite")
        enqueue = LOWERINGS["Enqueue"](compiled.nodes["enqueue"], [source], ctx)
        dequeue = LOWERINGS["Dequeue"](compiled.nodes["dequeue"], [], ctx)
        merged = concurrently([enqueue, dequeue], mode="async", output_indexes=[1])
        merged.shared_metrics.set(ctx.run_state.metrics)
        with pytest.raises(OperatorTimeoutError) as info:
            merged.take(1)
        assert info.value.node_id == "dequeue"
        message = str(info.value)
        assert "learner thread 'learner' has been in one update for more than 1 s" in message
        assert "UPDATE_DEADLINE_S" in message and "is learn_on_batch stuck" in message
        with pytest.raises(
            plangraph.WaitTimeoutError, match=r"learner thread 'learner' did not stop within 0\.5 s"
        ):
            learner.stop(timeout_s=0.5)
        assert learner.alive
    finally:
        release.set()
        algo.stop()
    assert not learner.alive  # released, it finished its update and stopped


def test_checkpoint_of_an_async_run_continues_counters_and_learner(tmp_path: Path) -> None:
    compiled = plangraph.compile(_async_plan())
    algo = plangraph.build(compiled, seed=0)
    try:
        algo.train()
        r1 = algo.train()
        # The learner thread trains on: held off while saving and reading, so that what is
        # read here is what was saved.
        with algo.ctx.policy_lock("workers"):
            algo.save(tmp_path / "ckpt")
            version = algo.ctx.learners["learner"].version
            weights = copy.deepcopy(algo.ctx.worker_sets["workers"].local_policy.get_weights())
    finally:
        algo.stop()
    restored = plangraph.build(compiled, seed=0)
    try:
        restored.restore(tmp_path / "ckpt")
        assert restored.ctx.learners["learner"].version == version
        got = restored.ctx.worker_sets["workers"].local_policy.get_weights()
        assert all(np.array_equal(weights[k], got[k]) for k in weights)
        r2 = restored.train()
        assert r2["iteration"] == r1["iteration"] + 1
        assert r2["num_env_steps_sampled"] > r1["num_env_steps_sampled"]
        assert r2["num_env_steps_trained"] >= r1["num_env_steps_trained"]
        assert restored.ctx.learners["learner"].version > version
    finally:
        restored.stop()


def test_ctrl_c_stops_an_async_run_and_joins_the_learner(tmp_path: Path) -> None:
    """Ctrl-C during an IMPALA run: the iteration finishes, the learner thread is stopped
    and joined, a checkpoint is written, exit code 130, no traceback, no hang."""
    import json
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "plangraph", "run", str(root / "plans" / "impala.json"),
         "--num-workers", "1", "--set", "min_env_steps_per_iter=512",
         "--stop", "num_env_steps_sampled=1000000000", "--out", str(run_dir),
         "--no-progress", "--checkpoint-every", "0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        log = run_dir / "result.jsonl"
        wait_until(
            lambda: run_has_results(proc, log, 2),
            f"2 results in {log}",
            timeout_s=240,
            interval_s=0.2,
        )
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted (Ctrl-C)" in out
    assert "Traceback" not in err
    last = json.loads(log.read_text().splitlines()[-1])
    ckpt = run_dir / "checkpoints" / f"iter_{last['iteration']:06d}"
    assert (ckpt / "algorithm.json").exists()


def test_a_checkpoint_pairs_the_learner_weights_with_their_version(tmp_path: Path) -> None:
    """``save()`` while the learner thread trains: the checkpoint holds the weights of the
    version it records, not those of an update made while the rest was being saved."""
    compiled = plangraph.compile(_async_plan())
    algo = plangraph.build(compiled, seed=0)
    try:
        learner = algo.ctx.learners["learner"]
        policy = algo.ctx.worker_sets["workers"].local_policy
        after_update = [copy.deepcopy(policy.get_weights())]  # [k]: weights of version k
        learn = policy.learn_on_batch

        def recording_learn(batch: Any) -> Any:
            stats = learn(batch)
            after_update.append(copy.deepcopy(policy.get_weights()))
            return stats

        policy.learn_on_batch = recording_learn
        workers = algo.ctx.worker_sets["workers"]
        save_workers = workers.get_state

        def slow_save_workers() -> Any:  # room for the learner to update, were it not held off
            time.sleep(0.5)
            return save_workers()

        workers.get_state = slow_save_workers
        for batch in _batches(algo, 8, 128):
            learner.inqueue.put(batch)
        learner.start()
        # training, with batches still queued
        wait_until(lambda: learner.version >= 2, "the learner thread's 2nd update", 120, 0.01)
        algo.save(tmp_path / "ckpt")
    finally:
        algo.stop()
    state = Checkpoint.load(tmp_path / "ckpt").state
    version = state["learners"]["learner"]["version"]
    saved = state["policies"]["workers"]["weights"]
    expected = after_update[version]
    assert saved.keys() == expected.keys()
    assert all(np.array_equal(saved[k], expected[k]) for k in expected), version
