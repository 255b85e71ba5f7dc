"""No silent remote failures (issue 35): every call sent to an actor without waiting for its
reply is looked at, on real Ray actors and gymnasium envs.

The user's report: a rollout worker's ``set_weights`` raised (its policy's weights had an
extra entry); ``WorkerSet`` never looked at the reply, Ray logged "Unhandled error" hundreds
of times, and the run logged normal iterations with a flat return and exited 0 while the
workers kept acting with their first weights. Now:

* through the CLI, the run stops with a non-zero exit, stderr names the worker, the call and
  the remote error, and the run directory keeps the checkpoint of the last good iteration
  (none of the iteration whose broadcast failed: its workers would be saved stale);
* in-process, ``train()`` raises ``RemoteCallError`` before the learner trains on a batch
  sampled after the failed sync;
* a failing ``set_batch_transforms``, a replay shard's failing ``add`` and
  ``update_priorities`` surface the same way; the multi-agent worker set's syncs too.

The failing policy is a user's algorithm (``tests/fixtures/remote_errors/stale_sync.py``)
whose ``set_weights`` raises on Ray actors only, from its ``fail_from``-th call on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plangraph
from plangraph.commands.user_modules import import_user_modules
from plangraph.errors import WaitTimeoutError
from plangraph.flow.errors import OperatorError, RemoteCallError
from plangraph.flow.local import LocalIterator
from plangraph.flow.pending import PendingCalls
from plangraph.rl.sample_batch import SampleBatch
from plangraph.runtime.algorithm import Algorithm, Checkpoint
from plangraph.runtime.run_loop import latest_checkpoint

ROOT = Path(__file__).resolve().parent.parent
STALE_SYNC = ROOT / "tests" / "fixtures" / "remote_errors" / "stale_sync.py"
MESSAGE = "weights do not match the model: unexpected ['pi_head.extra'] (a stale worker)"
SMALL = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 8,
    "train_batch_size": 32,
}

pytestmark = pytest.mark.timeout(300)


def _a2c_plan(fail_from: int) -> dict[str, Any]:
    plan = json.loads((ROOT / "plans" / "a2c.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    plan["config"].update(SMALL)
    plan["resources"]["workers"]["params"]["policy"] = {
        "algo": "a2c_stale_sync",
        "fail_from": fail_from,
    }
    return plan


@pytest.fixture(scope="module")
def stale_sync() -> None:
    assert import_user_modules([str(STALE_SYNC)]) is None


@pytest.fixture
def algos() -> Iterator[list[Algorithm]]:
    made: list[Algorithm] = []
    yield made
    for algo in made:
        algo.stop()


# -- the user's report, through the CLI ---------------------------------------------------


def test_a_failing_weight_sync_stops_the_cli_run_and_keeps_the_last_good_checkpoint(
    tmp_path: Path,
) -> None:
    """The broadcast after iteration 2 fails on both workers: the checkpoint of iteration
    2 (written every iteration here) finds it and fails, so the run exits non-zero naming
    the worker, ``set_weights()`` and the remote error; iteration 1's checkpoint stays."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_a2c_plan(fail_from=3)), encoding="utf-8")
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "plangraph", "run", str(plan), "--import", str(STALE_SYNC),
            "--out", str(run_dir), "--max-iterations", "10", "--checkpoint-every", "1",
            "--seed", "0", "--no-progress",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    err = proc.stderr
    assert proc.returncode != 0, err[-3000:]
    assert "RemoteCallError" in err, err[-3000:]
    assert "plan node 'train' failed on actor rollout worker" in err, err[-3000:]
    assert "set_weights() raised ValueError: " + MESSAGE in err
    assert "Ray node" in err and "stale_sync.py" in err  # where, and the remote traceback
    assert "Unhandled error" not in err  # every reply was read, none left to Ray's logger
    results = [json.loads(x) for x in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in results] == [1, 2]
    # The last good state is kept, complete and loadable; iteration 2's is not written.
    kept = latest_checkpoint(run_dir)
    assert kept is not None and kept.name == "iter_000001"
    assert Checkpoint.load(kept).meta.iteration == 1
    assert sorted((run_dir / "checkpoints").glob("iter_*")) == [kept]  # no .tmp left


# -- in-process ------------------------------------------------------------------------------


@pytest.mark.usefixtures("ray_session", "stale_sync")
def test_train_raises_before_the_learner_uses_a_round_sampled_after_a_failed_sync(
    algos: list[Algorithm],
) -> None:
    algo = plangraph.build(plangraph.compile(_a2c_plan(fail_from=2)), seed=0)
    algos.append(algo)
    first = algo.train()  # the broadcast after it fails on both workers
    assert first["num_env_steps_trained"] == 32
    with pytest.raises(RemoteCallError) as info:
        algo.train()
    err = info.value
    assert isinstance(err, OperatorError)
    assert err.node_id == "train"  # the node that sent the weights
    assert err.call == "set_weights()"
    assert err.actor is not None
    assert err.actor.startswith(("rollout worker 1 of 'workers'", "rollout worker 2 of 'workers'"))
    assert "Ray node" in err.actor and "pid" in err.actor
    assert err.detail == f"set_weights() raised ValueError: {MESSAGE}"
    assert "stale_sync.py" in err.traceback_text and "\x1b[" not in err.traceback_text
    assert isinstance(err.__cause__, Exception)
    # Found right after the round was gathered: the learner never trained on it.
    assert algo.run_state.counters["num_env_steps_trained"] == 32


@pytest.mark.usefixtures("ray_session")
def test_healthy_syncs_are_read_at_the_next_round_and_cost_no_wait(
    algos: list[Algorithm],
) -> None:
    plan = _a2c_plan(fail_from=1)
    plan["resources"]["workers"]["params"]["policy"] = {"algo": "a2c"}
    algo = plangraph.build(plangraph.compile(plan), seed=0)
    algos.append(algo)
    ws = algo.ctx.worker_sets["workers"]
    for _ in range(3):
        algo.train()
        # This iteration's broadcast is pending (one per worker), the earlier ones read.
        assert len(ws.pending_calls) == 2
    ws.check_pending(block=True)
    assert len(ws.pending_calls) == 0


def test_nothing_pending_makes_no_ray_call(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    def no_call(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a Ray call with nothing pending")

    monkeypatch.setattr(ray, "wait", no_call)
    monkeypatch.setattr(ray, "get", no_call)
    PendingCalls("workers").check("rollouts", settled=0, block=True)


@pytest.mark.usefixtures("ray_session", "stale_sync")
def test_worker_set_calls_not_waited_for_surface_naming_worker_and_call() -> None:
    from plangraph.rl.worker_set import WorkerSet

    ws = WorkerSet(
        "CartPole-v1", 2, 1, 8, {"algo": "a2c_stale_sync", "fail_from": 2}, seed=0, name="wk"
    )
    try:
        ws.check_pending(block=True)  # the first weights, sent at construction: fine
        # A3C's and IMPALA's path: weights to one worker.
        ws.sync_weights_to(ws.remote_workers[1], {"timestep": 8}, node_id="apply")
        with pytest.raises(RemoteCallError) as info:
            ws.check_pending(block=True)
        assert info.value.node_id == "apply"
        assert info.value.actor is not None
        assert info.value.actor.startswith("rollout worker 2 of 'wk' (Ray node ")
        assert MESSAGE in str(info.value)
        # Worker-side maps the worker cannot install (not (node id, map) pairs).
        ws.set_batch_transforms([("no map",)], node_id="rollouts")
        with pytest.raises(RemoteCallError, match=r"set_batch_transforms\(\) raised ValueError"):
            ws.check_pending(block=True)
        # A checkpoint of workers that missed a weight sync is refused.
        ws.sync_weights(node_id="train")
        with pytest.raises(RemoteCallError, match=r"set_weights\(\) raised ValueError"):
            ws.get_state()
    finally:
        ws.stop()


@pytest.mark.usefixtures("ray_session", "stale_sync")
def test_multi_agent_weight_syncs_are_looked_at() -> None:
    from plangraph.rl.multi_agent_worker_set import MultiAgentWorkerSet

    policies = {
        "a": {"algo": "a2c"},
        "b": {"algo": "a2c_stale_sync", "fail_from": 2},
    }
    mapping = {"agent_0": "a", "agent_1": "b"}
    ws = MultiAgentWorkerSet("MultiAgentCartPole", {"num_agents": 2}, 1, 1, 8, policies, mapping)
    try:
        ws.check_pending(block=True)
        ws.sync_weights({"b": {"timestep": 8}}, policies=["b"], node_id="train_b")
        with pytest.raises(RemoteCallError) as info:
            ws.check_pending(block=True)
        assert info.value.node_id == "train_b" and info.value.call == "set_weights()"
    finally:
        ws.stop()


def test_a_wait_for_a_settled_call_is_bounded() -> None:
    """A reply that never comes (a stand-in ref) ends at the deadline, naming the actor."""

    class Never:
        pass

    pending = PendingCalls("workers")
    with pytest.MonkeyPatch.context() as mp:
        import ray

        def not_yet(*_a: Any, **_k: Any) -> Any:
            raise ray.exceptions.GetTimeoutError("not yet")

        mp.setattr(ray, "get", not_yet)
        mp.setattr(ray, "wait", lambda refs, **_k: ([], list(refs)))
        pending.add(Never(), "rollout worker 1 of 'workers'", "set_weights()", "train")
        with pytest.raises(WaitTimeoutError, match=r"rollout worker 1 of 'workers' did not"):
            pending.check("rollouts", settled=pending.mark(), deadline_s=0.05)


# -- replay shards ---------------------------------------------------------------------------


def _shards(prioritized: bool = True) -> Any:
    from plangraph.ops.resources import ReplayActorsParams
    from plangraph.rl.replay_actors import ReplayActorSet

    params = ReplayActorsParams(
        capacity=64, learning_starts=1, num_shards=1, prioritized=prioritized
    )
    return ReplayActorSet(params, seed=0, name="replay")


def _rows(n: int) -> SampleBatch:
    return SampleBatch(
        {"obs": np.arange(n, dtype=np.float32)[:, None], "actions": np.zeros(n, dtype=np.int64)}
    )


@pytest.mark.usefixtures("ray_session")
def test_a_failing_update_priorities_surfaces_from_its_node() -> None:
    import types

    import plangraph.runtime.ops  # noqa: F401  (registers the built-in implementations)
    from plangraph.runtime.implementations import MAPS
    from plangraph.runtime.items import ReplayPriorities, TrainInfo

    shards = _shards()
    try:
        shards.add(0, _rows(16), 16, "store")
        params = types.SimpleNamespace(buffer="@replay")
        node = types.SimpleNamespace(id="priorities", params=params)
        ctx = types.SimpleNamespace(replay_actor_set=lambda _ref: shards)
        update = MAPS["UpdatePriorities"](node, ctx)
        # A TD error that is not finite: the shard's buffer refuses it (ValueError there).
        bad = TrainInfo(
            {},
            1,
            ReplayPriorities(
                np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.array([np.nan])
            ),
        )

        def items() -> Iterator[TrainInfo]:
            yield bad
            for _ in range(600):  # the reply is read on a later item, once it is in
                time.sleep(0.05)
                yield TrainInfo({}, 0)

        stream = LocalIterator.from_iterable(items).for_each(update, name="priorities")
        with pytest.raises(RemoteCallError) as info:
            stream.take(601)
        err = info.value
        assert err.node_id == "priorities" and err.call == "update_priorities()"
        assert err.actor is not None and err.actor.startswith("replay shard 0 of 'replay'")
        assert "td_errors must be finite" in err.detail
    finally:
        shards.stop()


@pytest.mark.usefixtures("ray_session")
def test_an_add_that_raises_in_its_shard_surfaces() -> None:
    shards = _shards(prioritized=False)
    try:
        shards.add(0, _rows(16), 16, "store")
        shards.add(0, "not a batch", 1, "store")  # the shard's buffer cannot store it
        with pytest.raises(RemoteCallError) as info:
            shards.get_state()  # a checkpoint looks at every add sent before it
        err = info.value
        assert err.call == "add()" and err.node_id == "store"
        assert err.actor is not None and err.actor.startswith("replay shard 0 of 'replay'")
        # Read once: the next add does not raise it again.
        shards.add(0, _rows(4), 4, "store")
    finally:
        shards.stop()
