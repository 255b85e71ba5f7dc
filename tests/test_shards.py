"""Per-shard streams: the ``Shard[T]`` port type, ``ParallelRollouts(mode="raw")``,
per-shard operators (``register_op(..., placement="shard")``) and ``GatherShards``: how
they are typed, registered and checked, and that they run inside the rollout workers on
real Ray (the shard operator contract, docs/extending.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plangraph
from plangraph.errors import RegistrationError
from plangraph.ir.types import is_assignable, parse_type, shard_of, unify
from plangraph.ops import OpParams, register_op, unregister_op
from plangraph.runtime.implementations import OP_IMPLS, register_impl

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"

PPO_SMALL = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 32,  # 2 workers x 2 envs x 32 = 128 env steps per round
    "train_batch_size": 128,
    "num_sgd_iter": 2,
    "sgd_minibatch_size": 64,
}
TIME_KEYS = {"time_this_iter_s", "time_total_s", "timestamp", "env_steps_per_s"}
TIME_KEYS |= {"env_steps_per_s_total", "timers"}
TAGS = ("worker_index", "worker_pid", "shard_items")


# -- the port type ------------------------------------------------------------------------


def test_shard_types_parse_print_and_only_fit_shards() -> None:
    t = parse_type("Shard[SampleBatch]")
    assert t == shard_of(parse_type("SampleBatch")) and str(t) == "Shard[SampleBatch]"
    assert t.is_shard and not t.is_list
    assert is_assignable(t, parse_type("Shard[SampleBatch | MultiAgentBatch]"))
    assert not is_assignable(t, parse_type("SampleBatch"))
    assert not is_assignable(parse_type("SampleBatch"), t)
    assert not is_assignable(t, parse_type("list[SampleBatch]"))
    bindings: dict[str, Any] = {}
    assert unify(parse_type("Shard[T]"), t, bindings)
    assert str(bindings["T"]) == "SampleBatch"
    with pytest.raises(ValueError, match="Shard needs an item type"):
        parse_type("Shard")


# -- registration -------------------------------------------------------------------------


def test_a_per_shard_op_must_read_and_emit_shards() -> None:
    with pytest.raises(RegistrationError, match="reads Shard"):
        register_op(
            "BadShardIn", category="combine", inputs=["SampleBatch"],
            output="Shard[SampleBatch]", placement="shard",
        )  # fmt: skip
    with pytest.raises(RegistrationError, match="emits a Shard"):
        register_op(
            "BadShardOut", category="combine", inputs=["Shard[SampleBatch]"],
            output="SampleBatch", placement="shard",
        )  # fmt: skip
    with pytest.raises(RegistrationError, match="only a per-shard op"):
        register_op(
            "DriverReadsShards", category="combine", inputs=["Shard[SampleBatch]"],
            output="SampleBatch",
        )  # fmt: skip
    with pytest.raises(RegistrationError, match="apply='for_each'"):
        register_op(
            "ShardFilter", category="combine", apply="filter",
            inputs=["Shard[SampleBatch]"], output="Shard[SampleBatch]", placement="shard",
        )  # fmt: skip


# -- a per-shard operator that tags each row with its worker --------------------------------


def tag_batch(worker: Any, batch: Any) -> Any:
    """TagWorker's function, run inside each rollout worker."""
    seen = worker.shard_state.get("tag", 0) + 1
    worker.shard_state["tag"] = seen
    batch["worker_index"] = np.full(batch.count, worker.index, np.int64)
    batch["worker_pid"] = np.full(batch.count, os.getpid(), np.int64)
    batch["shard_items"] = np.full(batch.count, seen, np.int64)
    return batch


@pytest.fixture
def tag_worker() -> Iterator[Any]:
    """``TagWorker``: adds columns ``worker_index``, ``worker_pid`` and ``shard_items`` (the
    items this worker's operator has seen, kept in ``worker.shard_state``)."""

    @register_op(
        category="combine",
        inputs=["Shard[SampleBatch]"],
        output="Shard[SampleBatch]",
        placement="shard",
        replace=True,
    )
    class TagWorker(OpParams):
        """Tag each row with the rollout worker that sampled it."""

    @register_impl("TagWorker")
    def _tag(params: Any) -> Any:
        return tag_batch  # a module-level function: shipped to the workers by value

    yield TagWorker
    unregister_op("TagWorker")
    OP_IMPLS.pop("TagWorker", None)


def _sharded(mode: str = "sync", op: str | None = "TagWorker", **gather: Any) -> dict[str, Any]:
    """plans/ppo.json with its rollouts raw -> ``op`` -> GatherShards(mode) -> concat."""
    plan = json.loads((PLANS / "ppo.json").read_text())
    plan["nodes"]["rollouts"]["params"]["mode"] = "raw"
    src = "rollouts"
    if op is not None:
        plan["nodes"]["tag"] = {"op": op, "inputs": ["rollouts"]}
        src = "tag"
    plan["nodes"]["gather"] = {
        "op": "GatherShards",
        "inputs": [src],
        "params": {"mode": mode, **gather},
    }
    plan["nodes"]["concat"]["inputs"] = ["gather"]
    return plan


def test_a_sharded_plan_compiles_with_its_types_and_placement(tag_worker: Any) -> None:
    c = plangraph.compile(_sharded(), config=PPO_SMALL)
    assert c.ok, [d.format() for d in c.diagnostics]
    assert str(c.nodes["rollouts"].output_type) == "Shard[SampleBatch]"
    assert str(c.nodes["tag"].output_type) == "Shard[SampleBatch]"
    assert str(c.nodes["gather"].output_type) == "SampleBatch"
    assert c.nodes["tag"].placement == "actors" and c.nodes["tag"].host == "rollouts"
    assert c.placement("tag") == (
        "rollout workers (actors), per-shard on each worker of @workers, after rollouts"
    )
    assert c.worker_set_of("tag") == "workers" and c.worker_set_of("gather") is None
    assert c.shard_regions() == {"rollouts": ("rollouts", "tag")}
    text = c.explain()
    assert "\n  each rollout worker of @workers  rollouts, tag (per-shard)\n" in text
    batch = plangraph.analyze(_sharded("batch"), config=PPO_SMALL)
    assert str(batch.nodes["gather"].output_type) == "list[SampleBatch]"


def _run(plan: Any, config: dict[str, Any], iterations: int) -> dict[str, Any]:
    compiled = plangraph.compile(plan, config=config)
    assert compiled.ok, [d.format() for d in compiled.diagnostics]
    seen: list[Any] = []
    with plangraph.build(compiled, seed=0) as algo:
        policy = algo.ctx.worker_sets["workers"].local_policy
        learn = policy.train

        def spy(batch: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append({k: np.asarray(batch[k]) for k in batch.keys() if k in TAGS})
            return learn(batch, *args, **kwargs)

        policy.train = spy  # what each TrainOneStep trains on
        results = [algo.train() for _ in range(iterations)]
        weights = {k: v.tobytes() for k, v in sorted(policy.get_weights().items())}
        pids = _worker_pids(algo)
        stages = dict(algo.ctx.stages)
    return {
        "results": [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in results],
        "weights": weights,
        "batches": seen,
        "pids": pids,
        "stages": stages,
    }


def _worker_pids(algo: Any) -> list[int]:
    import ray

    ws = algo.ctx.worker_sets["workers"]
    return ray.get([w.__ray_call__.remote(lambda self: os.getpid()) for w in ws.remote_workers])


def test_a_per_shard_op_runs_inside_each_rollout_worker(tag_worker: Any) -> None:
    run = _run(_sharded("sync"), {**PPO_SMALL, "num_workers": 2}, 3)
    assert run["stages"]["tag"] == "rollouts@workers"
    assert len(run["batches"]) == 3
    for batch in run["batches"]:
        # each train batch: one sync round, every worker's fragment in worker order
        assert list(np.unique(batch["worker_index"])) == [1, 2]
        assert set(np.unique(batch["worker_pid"])) == set(run["pids"])
        assert os.getpid() not in set(batch["worker_pid"])
    # the state each worker kept between its items
    assert [int(b["shard_items"][0]) for b in run["batches"]] == [1, 2, 3]
    counters = [r["counters"]["num_env_steps_sampled"] for r in run["results"]]
    assert counters == [128, 256, 384]


def test_gathering_raw_shards_counts_and_trains_as_bulk_sync_rollouts() -> None:
    """raw -> GatherShards(sync) -> ConcatBatches is PPO's bulk_sync rollouts, bit for bit:
    the same counters, episodes, learner stats and weights."""
    config = {**PPO_SMALL, "num_workers": 2}
    sharded = _run(_sharded("sync", op=None), config, 3)
    plain = _run(PLANS / "ppo.json", config, 3)
    assert sharded["results"] == plain["results"]
    assert sharded["weights"] == plain["weights"]


def test_async_gathered_shards_count_every_env_step(tag_worker: Any) -> None:
    run = _run(_sharded("async"), {**PPO_SMALL, "num_workers": 2}, 2)
    steps = [r["counters"]["num_env_steps_sampled"] for r in run["results"]]
    # each async item is one worker's 64-step fragment; a train batch takes two
    assert steps == [128, 256]
    assert all(set(np.unique(b["worker_index"])) <= {1, 2} for b in run["batches"])


def test_the_local_worker_is_the_one_shard_without_remote_workers(tag_worker: Any) -> None:
    config = {**PPO_SMALL, "num_workers": 0, "train_batch_size": 64}
    compiled = plangraph.analyze(_sharded("batch"), config=config)
    # batch mode gives lists: flatten them for ConcatBatches
    plan = _sharded("batch")
    plan["nodes"]["flat"] = {"op": "Flatten", "inputs": ["gather"]}
    plan["nodes"]["concat"]["inputs"] = ["flat"]
    assert not compiled.ok  # list[SampleBatch] into ConcatBatches
    run = _run(plan, config, 2)
    for batch in run["batches"]:
        assert set(batch["worker_index"]) == {0}
        assert set(batch["worker_pid"]) == {os.getpid()}
    assert [r["counters"]["num_env_steps_sampled"] for r in run["results"]] == [64, 128]


def test_a_gather_of_the_wrong_mode_is_told_the_mode_that_fits() -> None:
    """A type mismatch at a GatherShards output names the modes whose items the consumer
    takes (here ConcatBatches, SampleBatch), not the generic Flatten/Batch hint."""
    (d,) = plangraph.analyze(_sharded("batch", op=None)).diagnostics
    assert d.code == "PG130" and d.node == "concat"
    assert d.hint == (
        'set mode to "sync" or "async" on GatherShards \'gather\' (/nodes/gather/params/mode), '
        "which then emits SampleBatch"
    )


# -- render and explain ---------------------------------------------------------------------

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "render"


def _snapshot(name: str, dot: str) -> None:
    snap = SNAPSHOTS / f"{name}.dot"
    if os.environ.get("PLANGRAPH_UPDATE_SNAPSHOTS") == "1":
        snap.write_text(dot, encoding="utf-8")
    assert dot == snap.read_text(encoding="utf-8"), (
        f"DOT of {name} changed; if intended, regenerate with PLANGRAPH_UPDATE_SNAPSHOTS=1 "
        "pytest tests/test_shards.py and review the diff"
    )


def test_render_draws_the_shard_region_as_a_box(tag_worker: Any) -> None:
    c = plangraph.analyze(_sharded())
    dot = plangraph.to_dot(c)
    _snapshot("ppo_sharded", dot)
    box = dot.split('subgraph "cluster_workers/rollouts" {', 1)[1].split("\n  }\n", 1)[0]
    assert "on each rollout worker (workers)" in box
    inside = [ln.strip().split(" ", 1)[0] for ln in box.splitlines() if " [shape=" in ln]
    assert inside == ['"rollouts"', '"tag"']
    declared = [ln for ln in dot.splitlines() if ln.strip().startswith('"gather" [')]
    assert len(declared) == 1 and declared[0].startswith('  "gather"')  # outside the box


def test_moved_maps_are_drawn_and_explained_like_per_shard_ops() -> None:
    """The nodes pass worker-side-maps moves onto the workers are in the same box, and
    explain names the worker set they run on."""
    plan = json.loads((PLANS / "ppo.json").read_text())
    plan["nodes"]["rollouts"]["params"]["mode"] = "async"
    plan["nodes"]["m"] = {"op": "StandardizeFields", "inputs": ["rollouts"], "params": {}}
    plan["nodes"]["concat"]["inputs"] = ["m"]
    c = plangraph.compile(plan)
    assert c.executed.nodes["m"].host == "rollouts"
    dot = plangraph.to_dot(c)
    box = dot.split('subgraph "cluster_workers/rollouts" {', 1)[1].split("\n  }\n", 1)[0]
    inside = [ln.strip().split(" ", 1)[0] for ln in box.splitlines() if " [shape=" in ln]
    assert inside == ['"rollouts"', '"m"']
    assert "\n  each rollout worker of @workers  rollouts, m (moved, after rollouts)\n" in (
        c.explain()
    )
    # a plan with nothing moved and no raw source draws no box
    assert "cluster_workers" not in plangraph.to_dot(plangraph.compile(PLANS / "ppo.json"))


def test_a_checkpoint_warns_that_per_shard_state_is_not_saved(
    tag_worker: Any, tmp_path: Path
) -> None:
    """What a per-shard op keeps in ``worker.shard_state`` is not in checkpoints: saving
    one says so (``ResumeWarning``, naming the workers and the keys), as for sub-envs
    whose state cannot be captured, and the checkpoint's worker states stay plain."""
    from plangraph.rl.worker_set import ResumeWarning

    compiled = plangraph.compile(_sharded("sync"), config={**PPO_SMALL, "num_workers": 2})
    with plangraph.build(compiled, seed=0) as algo:
        algo.train()
        with pytest.warns(ResumeWarning) as caught:
            algo.save(tmp_path / "ckpt")
            state = algo.ctx.get_state()
    [message] = {str(w.message) for w in caught if issubclass(w.category, ResumeWarning)}
    assert message.startswith(
        "rollout workers 1, 2: the per-shard operator state (worker.shard_state 'tag') is "
        "not in the checkpoint; a restored worker starts without it"
    )
    assert all(set(w) >= {"envs", "obs"} for w in state["workers"]["workers"]["workers"])
    assert not any("unsaved" in w for w in state["workers"]["workers"]["workers"])


def test_a_per_shard_op_keeps_its_state_on_the_worker_not_the_driver() -> None:
    from plangraph.errors import BuildError
    from plangraph.runtime.implementations import OperatorContext

    class Build:
        seed = 0

    op = OperatorContext("tag", Build(), per_shard=True)  # type: ignore[arg-type]
    assert op.on_workers
    with pytest.raises(BuildError, match=r"per-shard.*worker\.shard_state"):
        op.save_state(dict, lambda state: None)
    with pytest.raises(
        BuildError,
        match=r"took op\.rng.*cannot keep an RNG.*default_rng\(\[seed, worker\.index\]\)",
    ):
        _ = op.rng


def test_batch_checks_and_rollout_sizing_see_through_a_sync_gather() -> None:
    """GatherShards(sync) emits each worker's fragment: "auto" fragments are sized for the
    train batch as for bulk_sync rollouts, and PG174 counts in fragments."""
    c = plangraph.analyze(
        _sharded(op=None), config={"rollout_fragment_length": "auto", "train_batch_size": 1024}
    )
    assert c.ok and c.executed.resources["workers"].params.rollout_fragment_length == 64
    uneven = plangraph.analyze(_sharded(op=None), config={"train_batch_size": 1000})
    assert [d.code for d in uneven.diagnostics] == ["PG174"]
    assert "512 env steps of one rollout fragment" in uneven.diagnostics[0].message


# -- the runtime half: ParallelIterator.for_each_actor -------------------------------------


@pytest.mark.usefixtures("ray_session")
def test_for_each_actor_runs_with_the_actor_instance_in_each_shard() -> None:
    from plangraph.flow.parallel import ParallelIterator

    def count_on_actor(instance: Any, item: int) -> tuple[str, int, int]:
        # the actor's class, the item, and the items this actor has seen (kept on it)
        seen = getattr(instance, "seen", 0) + 1
        instance.seen = seen
        return type(instance).__name__, item, seen

    par = ParallelIterator.from_items([1, 2, 3, 4], num_shards=2, repeat=False)
    got = par.for_each_actor(count_on_actor, name="count").gather_sync().take(4)
    assert got == [
        ("IteratorShard", 1, 1),
        ("IteratorShard", 2, 1),
        ("IteratorShard", 3, 2),
        ("IteratorShard", 4, 2),
    ]
