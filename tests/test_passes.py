"""The optimisation passes at compile time: what each decides, and why not (no Ray).

The run-time half (identical results with each pass on and off, on real Ray) is
``tests/test_passes_run.py``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plangraph
from plangraph.cli import main
from plangraph.compiler import CompiledPlan, analyze, pass_names
from plangraph.errors import RegistrationError, UnknownPassError
from plangraph.ops import register_op, unregister_op
from plangraph.ops.registry import OpParams

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"


def _seed(name: str) -> dict[str, Any]:
    return json.loads((PLANS / f"{name}.json").read_text())


def _result(c: CompiledPlan, name: str) -> Any:
    return next(r for r in c.optimisations if r.name == name)


def _ppo(**config: Any) -> dict[str, Any]:
    plan = _seed("ppo")
    plan["config"].update(config)
    return plan


@pytest.fixture
def scale_advantages() -> Any:
    """A user operator declared pure and row-wise (registered for this test only)."""

    @register_op(
        category="combine",
        inputs=["SampleBatch"],
        output="SampleBatch",
        pure=True,
        rowwise=True,
        replace=True,
    )
    class ScaleColumn(OpParams):
        """Multiply one column by ``factor``."""

        factor: float = 1.0

    yield ScaleColumn
    unregister_op("ScaleColumn")


def _with_map(plan: dict[str, Any], op: str, after: str = "rollouts", **params: Any) -> None:
    """Insert node ``m`` running ``op`` right after node ``after``."""
    for node in plan["nodes"].values():
        node["inputs"] = ["m" if i == after else i for i in node["inputs"]]
    plan["nodes"]["m"] = {"op": op, "inputs": [after], "params": params}


# -- the framework ----------------------------------------------------------------------


def test_passes_run_in_order_after_the_checks_and_each_reports() -> None:
    c = plangraph.compile(PLANS / "dqn.json")
    assert pass_names() == (
        "rollout-sizing",
        "worker-side-maps",
        "map-fusion",
        "broadcast-coalescing",
    )
    assert [r.name for r in c.optimisations] == list(pass_names())
    assert [r.status for r in c.optimisations] == [
        "not applied",
        "not applied",
        "applied",
        "applied",
    ]
    for r in c.optimisations:  # every pass says what it did, or why not
        assert r.changes or r.notes, r.name
    text = c.explain()
    checks_at = text.index("checks run:")
    passes_at = text.index("optimisation passes (they change the executed plan")
    assert checks_at < passes_at < text.index("nodes (topological order")
    for name in pass_names():
        assert f". {name} " in text


def test_the_declared_plan_is_kept_for_display_and_the_executed_one_for_lowering() -> None:
    c = plangraph.compile(PLANS / "dqn.json")
    assert c.nodes["train"].params.update_workers_every == 1  # as declared
    assert c.executed.nodes["train"].params.update_workers_every == 16  # as it runs
    assert c.executed.executed is c.executed
    assert json.loads(c.to_json())["nodes"]["train"]["params"]["update_workers_every"] == 1
    assert "executed with: update_workers_every=16" in c.explain()
    # same graph and placements in both
    assert list(c.nodes) == list(c.executed.nodes)
    for nid, node in c.nodes.items():
        other = c.executed.nodes[nid]
        assert (node.inputs, node.placement, node.stage) == (
            other.inputs,
            other.placement,
            other.stage,
        )


def test_compiling_twice_gives_the_same_executed_plan_and_explanation() -> None:
    a, b = (plangraph.compile(PLANS / "dqn.py") for _ in range(2))
    assert a.explain() == b.explain()
    assert a.executed.to_json() == b.executed.to_json()
    assert [r.to_dict() for r in a.optimisations] == [r.to_dict() for r in b.optimisations]


def test_a_pass_turned_off_changes_nothing_and_says_so() -> None:
    c = plangraph.compile(PLANS / "dqn.json", disable_passes=["map-fusion"])
    fusion = _result(c, "map-fusion")
    assert fusion.status == "off" and not fusion.changes
    assert all(not n.stage for n in c.executed.nodes.values())
    assert _result(c, "broadcast-coalescing").status == "applied"
    assert "off (--no-pass map-fusion)" in c.explain()
    c = plangraph.compile(PLANS / "dqn.json", disable_passes=["all"])
    assert {r.status for r in c.optimisations} == {"off"}
    assert c.executed.to_json() == c.to_json()
    assert c.disabled_passes == frozenset(pass_names())


def test_unknown_pass_names_are_refused_with_a_did_you_mean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(UnknownPassError, match="did you mean map-fusion"):
        plangraph.compile(PLANS / "dqn.json", disable_passes=["map-fuson"])
    with pytest.raises(UnknownPassError, match="the passes: rollout-sizing, worker-side-maps"):
        analyze(PLANS / "dqn.json", disable_passes=["nope"])
    for command in ("validate", "explain", "render", "run"):
        extra = ["--max-iterations", "1"] if command == "run" else []
        rc = main([command, "--no-pass", "broadcast-coalesing", *extra, "plans/dqn.json"])
        err = capsys.readouterr().err
        assert rc == 2, command
        assert "did you mean broadcast-coalescing?" in err, command


def test_a_resumed_run_keeps_the_passes_it_ran_with(tmp_path: Path) -> None:
    """run.json records --no-pass; --resume compiles with it (no Ray: the launch only)."""
    from plangraph.cli import build_parser
    from plangraph.commands.run import _prepare

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = {"plan": "plans/dqn.json", "env": None, "num_workers": None, "seed": 0,
             "overrides": {}, "stop": {"iteration": 5.0}, "no_pass": ["map-fusion"]}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(saved))
    (run_dir / "plan.source.json").write_text((PLANS / "dqn.json").read_text())
    launch = _prepare(build_parser().parse_args(["run", "--resume", str(run_dir)]))
    assert not isinstance(launch, int)
    assert launch.compiled.disabled_passes == {"map-fusion"}
    assert launch.no_pass == ("map-fusion",)
    args = build_parser().parse_args(["run", "--resume", str(run_dir), "--no-pass", "all"])
    launch = _prepare(args)
    assert not isinstance(launch, int) and launch.compiled.disabled_passes == set(pass_names())
    # a run.json written before the passes existed has no "no_pass": every pass runs
    del saved["no_pass"]
    (run_dir / "run.json").write_text(json.dumps(saved))
    launch = _prepare(build_parser().parse_args(["run", "--resume", str(run_dir)]))
    assert not isinstance(launch, int) and launch.compiled.disabled_passes == frozenset()


def test_a_pass_that_crashes_is_rolled_back_and_reported_as_pg199() -> None:
    from plangraph.compiler import Context, load
    from plangraph.compiler.passes import BUILTIN_PASSES, OptimisationPass, run_passes
    from plangraph.compiler.pipeline import checks, run_checks

    def broken(draft: Any) -> Any:
        draft.params["train"] = None  # half a rewrite, then a bug
        raise RuntimeError("oops")

    loaded = load(PLANS / "dqn.json")
    ctx = Context(plan=loaded.plan, source=loaded.source, overrides={})
    run_checks(ctx, checks())
    passes = (OptimisationPass("broken", "A pass with a bug", broken), *BUILTIN_PASSES)
    draft, results = run_passes(ctx, passes=passes)
    assert results[0].status == "not applied" and results[0].notes == ("it crashed",)
    assert draft.params["train"] is not None  # rolled back
    assert draft.params["train"].update_workers_every == 16  # the others still ran
    (d,) = ctx.diagnostics
    assert d.code == "PG199" and "pass 'broken' crashed with RuntimeError: oops" in d.message
    assert "--no-pass broken" in (d.hint or "")


def test_a_plan_with_errors_is_not_optimised() -> None:
    plan = _seed("dqn")
    plan["nodes"]["train"]["op"] = "TrainOneStp"
    c = analyze(plan)
    assert not c.ok and c.optimisations == () and c.executed is c
    assert "optimisation passes: not run (the plan has errors)" in c.explain()


def test_explain_json_has_what_each_pass_did_and_the_placement(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main(["explain", "--format", "json", "plans/dqn.json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    by_name = {r["name"]: r for r in data["optimisations"]}
    change = by_name["broadcast-coalescing"]["changes"][0]
    assert change["target"] == "node 'train'"
    assert change["after"].startswith("update_workers_every=16")
    assert data["placement"]["rollouts"] == "rollout workers (actors)"
    assert data["placement"]["train"] == "driver, fused stage train+target"
    assert data["execution"]["rollouts"]["placement"] == "actors"
    assert data["execution"]["train"]["stage"] == ["train", "target"]
    assert data["executed"]["nodes"]["train"]["params"]["update_workers_every"] == 16
    assert data["nodes"]["train"]["params"]["update_workers_every"] == 1


def test_explain_shows_where_each_node_runs() -> None:
    text = plangraph.compile(PLANS / "impala.json").explain()
    assert text.split("\n  rollouts ", 1)[1].split("\n")[0].endswith("[rollout workers (actors)]")
    enqueue = text.split("\n  enqueue ", 1)[1].split("\n")[0]
    assert enqueue.endswith("[driver, feeds learner thread @learner]")
    assert "\n  learner thread                   enqueue (its batches train in learner)\n" in text
    assert (
        "\n  driver                           sync, concat, dequeue, concurrently, metrics\n"
        in text
    )
    assert "\n  each rollout worker of @workers  rollouts\n" in text
    text = plangraph.compile(PLANS / "dqn.json").explain()
    target = text.split("\n  target ", 1)[1].split("\n")[0]
    assert target.endswith("[driver, fused stage train+target]")
    assert (
        "\n  driver                           store, replay_batches, train+target (one stage),"
        in text
    )
    assert "\n  each rollout worker of @workers  rollouts\n" in text


# -- rollout-sizing ---------------------------------------------------------------------


def test_auto_fragments_make_exactly_one_train_batch_per_round() -> None:
    c = plangraph.compile(_ppo(rollout_fragment_length="auto", train_batch_size=512))
    r = _result(c, "rollout-sizing")
    assert r.status == "applied"
    assert c.resources["workers"].params.rollout_fragment_length == "auto"
    ws = c.executed.resources["workers"]
    assert ws.params.rollout_fragment_length == 32  # 2 workers x 8 envs x 32 = 512
    assert ws.sized_for == 512
    assert "exactly the min_batch_size 512 of 'concat'" in r.changes[0].why
    assert not c.warnings


def test_auto_rounds_up_never_to_a_second_round_and_pg174_reports_the_rest() -> None:
    c = plangraph.compile(_ppo(rollout_fragment_length="auto", train_batch_size=1000))
    frag = c.executed.resources["workers"].params.rollout_fragment_length
    assert frag == 63  # 2 x 8 x 63 = 1008 >= 1000 in one round (64 x 16 would be 1024)
    (pg174,) = [d for d in c.warnings if d.code == "PG174"]
    assert "1 x 1008 = 1008 env steps: 8 env steps" in pg174.message
    assert 'sized from "auto" by pass rollout-sizing' in pg174.message
    assert "a multiple of 16 (num_workers x num_envs_per_worker), e.g. 992 or 1008" in (
        pg174.hint or ""
    )
    # More sub-envs than the batch has env steps: one step each is the least there is.
    c = plangraph.compile(
        _ppo(rollout_fragment_length="auto", train_batch_size=10, sgd_minibatch_size=8)
    )
    assert c.executed.resources["workers"].params.rollout_fragment_length == 1
    assert [d.code for d in c.warnings] == ["PG174"]


def test_auto_without_a_train_batch_to_size_for_is_the_default() -> None:
    plan = _seed("dqn")
    plan["config"]["rollout_fragment_length"] = "auto"
    c = plangraph.compile(plan)
    r = _result(c, "rollout-sizing")
    assert r.status == "not applied"
    assert "reach no ConcatBatches" in r.notes[0] and '"auto" is 64' in r.notes[0]
    assert c.executed.resources["workers"].params.rollout_fragment_length == 64
    assert c.executed.resources["workers"].sized_for is None


def test_auto_with_the_pass_off_is_the_default_and_pg174_says_so() -> None:
    c = plangraph.compile(
        _ppo(rollout_fragment_length="auto", train_batch_size=1000),
        disable_passes=["rollout-sizing"],
    )
    assert c.executed.resources["workers"].params.rollout_fragment_length == 64
    assert _result(c, "rollout-sizing").notes == (
        "resource 'workers': \"auto\" is 64 (the WorkerSet default)",
    )
    (pg174,) = c.warnings
    assert '"auto" = 64, pass rollout-sizing off' in pg174.message
    assert "without --no-pass rollout-sizing" in (pg174.hint or "")


def test_auto_sizes_async_rollouts_to_one_fragment_per_worker() -> None:
    c = plangraph.compile(PLANS / "impala.json", config={"rollout_fragment_length": "auto"})
    assert c.executed.resources["workers"].params.rollout_fragment_length == 32
    assert "set of 2 async fragments" in _result(c, "rollout-sizing").changes[0].why


def test_a_fixed_uneven_fragment_length_gets_auto_as_a_fix() -> None:
    c = plangraph.compile(_ppo(train_batch_size=1536))
    (pg174,) = c.warnings
    assert 'or to "auto" (96: one round of 1536)' in (pg174.hint or "")
    c = plangraph.compile(_ppo(train_batch_size=1536), disable_passes=["rollout-sizing"])
    assert '"auto"' not in (c.warnings[0].hint or "")


def test_a_num_workers_override_sizes_auto_again() -> None:
    from plangraph.runtime.build_context import _resized

    c = plangraph.compile(_ppo(rollout_fragment_length="auto", train_batch_size=512))
    ws = c.executed.resources["workers"]
    assert _resized(ws, {"num_workers": 4}) == {"num_workers": 4, "rollout_fragment_length": 16}
    assert _resized(ws, {"env": "CartPole-v1"}) == {"env": "CartPole-v1"}
    fixed = plangraph.compile(_ppo()).executed.resources["workers"]
    assert _resized(fixed, {"num_workers": 4}) == {"num_workers": 4}


def test_rollout_fragment_length_takes_a_positive_int_or_auto() -> None:
    c = analyze(_ppo(rollout_fragment_length="aut"))
    (d,) = c.errors
    assert d.code == "PG141" and d.suggestions == ("auto",)
    assert not analyze(_ppo(rollout_fragment_length=0)).ok


# -- worker-side-maps -------------------------------------------------------------------


def test_a_rowwise_pure_map_after_bulk_sync_rollouts_moves_onto_the_workers(
    scale_advantages: Any,
) -> None:
    plan = _seed("ppo")
    _with_map(plan, "ScaleColumn", factor=0.5)
    c = plangraph.compile(plan)
    r = _result(c, "worker-side-maps")
    assert r.status == "applied"
    assert r.changes[0].target == "node 'm' (ScaleColumn)"
    assert "row-wise" in r.changes[0].why
    m, rollouts = c.executed.nodes["m"], c.executed.nodes["rollouts"]
    assert (m.placement, m.host) == ("actors", "rollouts")
    assert rollouts.worker_maps == ("m",)
    line = c.explain().split("\n  m ", 1)[1].split("\n")[0]
    assert line.endswith(
        "[rollout workers (actors), on each worker of @workers, moved after rollouts by pass "
        "worker-side-maps]"
    )
    assert (
        "\n  each rollout worker of @workers  rollouts, m (moved, after rollouts)\n" in c.explain()
    )
    assert "ScaleColumn · on rollout workers" in plangraph.to_dot(c)
    off = plangraph.compile(plan, disable_passes=["worker-side-maps"])
    assert off.nodes["m"].placement == "driver" and "ScaleColumn · on" not in plangraph.to_dot(off)


def test_standardize_fields_stays_on_the_driver_after_a_bulk_sync_round() -> None:
    plan = _seed("ppo")
    _with_map(plan, "StandardizeFields")
    c = plangraph.compile(plan)
    r = _result(c, "worker-side-maps")
    assert r.status == "not applied"
    assert "is bulk_sync, so each item concatenates every worker's fragment" in r.notes[0]
    assert "StandardizeFields is not row-wise" in r.notes[0]
    # where RLlib puts it, after ConcatBatches: per train batch, on the driver
    plan = _seed("ppo")
    _with_map(plan, "StandardizeFields", after="concat")
    r = _result(plangraph.compile(plan), "worker-side-maps")
    assert "it reads 'concat' (ConcatBatches), not a rollout source" in r.notes[0]


def test_standardize_fields_after_async_rollouts_moves_onto_the_workers() -> None:
    plan = _seed("ppo")
    plan["nodes"]["rollouts"]["params"]["mode"] = "async"
    _with_map(plan, "StandardizeFields")
    c = plangraph.compile(plan)
    assert c.executed.nodes["m"].placement == "actors"
    assert "'rollouts' is async: each item is one worker's fragment" in (
        _result(c, "worker-side-maps").changes[0].why
    )


def test_a_map_stays_on_the_driver_when_the_rollouts_are_shared_through_a_duplicate(
    scale_advantages: Any,
) -> None:
    plan = _seed("dqn")  # rollouts -> store; put a map beside the store
    plan["nodes"]["dup"] = {"op": "Duplicate", "inputs": ["rollouts"], "params": {}}
    plan["nodes"]["store"]["inputs"] = ["dup"]
    plan["nodes"]["m"] = {"op": "ScaleColumn", "inputs": ["dup"], "params": {}}
    plan["nodes"]["u"] = {"op": "Union", "inputs": ["store", "m"], "params": {}}
    plan["nodes"]["concurrently"]["inputs"] = ["u", "target"]
    c = plangraph.compile(plan)
    assert c.ok
    notes = _result(c, "worker-side-maps").notes
    assert "it reads 'dup' (Duplicate), not a rollout source" in notes[0]


def test_pure_is_declared_on_per_item_operators_only() -> None:
    with pytest.raises(RegistrationError, match="needs apply='for_each'"):
        register_op(
            "BadPure", category="combine", apply="combine", inputs=["T"], output="T", pure=True
        )
    with pytest.raises(RegistrationError, match="rowwise=True needs pure=True"):
        register_op("BadRows", category="combine", inputs=["T"], output="T", rowwise=True)


def test_standardize_fields_standardises_each_named_column() -> None:
    from plangraph.rl import SampleBatch
    from plangraph.rl.standardize import standardize_fields

    adv = np.array([1.0, 2.0, 3.0, 6.0], dtype=np.float32)
    batch = SampleBatch(
        {"advantages": adv, "rewards": np.ones(4, np.float32)},
        episode_returns=[3.0],
        episode_lengths=[3],
    )
    out = standardize_fields(batch, ["advantages", "rewards"])
    assert out["advantages"].dtype == np.float32
    np.testing.assert_allclose(out["advantages"], (adv - 3.0) / np.std(adv), rtol=1e-6)
    assert np.all(out["rewards"] == 0.0)  # constant: std floored, becomes 0
    assert list(out.episode_returns) == [3.0] and np.all(batch["advantages"] == adv)
    with pytest.raises(KeyError, match="no column 'values'"):
        standardize_fields(batch, ["values"])


# -- map-fusion -------------------------------------------------------------------------


def test_chains_of_per_item_operators_become_one_stage() -> None:
    c = plangraph.compile(PLANS / "dqn.json")
    assert c.executed.nodes["train"].stage == ("train", "target")
    assert c.nodes["store"].stage == ()  # a single map is its own stage
    c = plangraph.compile(PLANS / "a2c_microbatch.json")
    assert c.nodes["average"].stage == ("average", "apply")
    assert c.nodes["grads"].stage == ()  # Batch between grads and average is a stream op
    r = _result(plangraph.compile(PLANS / "ppo.json"), "map-fusion")
    assert r.status == "not applied" and "no chain of two or more" in r.notes[0]


def test_a_node_read_twice_ends_a_fused_stage() -> None:
    plan = _seed("dqn")
    plan["nodes"]["dup"] = {"op": "Duplicate", "inputs": ["train"], "params": {}}
    plan["nodes"]["target"]["inputs"] = ["dup"]
    c = plangraph.compile(plan)
    assert all(not n.stage for n in c.nodes.values())


# -- broadcast-coalescing ---------------------------------------------------------------


def test_dqn_broadcasts_once_per_round_derived_from_the_round_robin_weight() -> None:
    c = plangraph.compile(PLANS / "dqn.json", config={"train_steps_per_rollout": 4})
    assert c.executed.nodes["train"].params.update_workers_every == 4
    why = _result(c, "broadcast-coalescing").changes[0].why
    assert "pulls 4 items per turn from 'target'" in why


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"weights": [1, 2.5]}, "its weight 2.5 is fractional"),
        ({"weights": [1, "*"]}, 'its weight is "*"'),
        ({"weights": [1, 1]}, "its weight is 1"),
        ({"weights": None, "mode": "async"}, "'concurrently' is async"),
    ],
)
def test_broadcasts_are_kept_where_a_sample_may_observe_them(
    change: dict[str, Any], reason: str
) -> None:
    plan = _seed("dqn")
    plan["nodes"]["concurrently"]["params"].update(change)
    c = plangraph.compile(plan)
    r = _result(c, "broadcast-coalescing")
    assert r.status == "not applied"
    assert reason in r.notes[0], r.notes
    assert c.executed.nodes["train"].params.update_workers_every == 1


def test_broadcasts_are_kept_with_async_rollouts_or_training_on_them() -> None:
    plan = _seed("dqn")
    plan["nodes"]["rollouts"]["params"]["mode"] = "async"
    r = _result(plangraph.compile(plan), "broadcast-coalescing")
    assert "'rollouts' samples asynchronously" in r.notes[0]
    r = _result(plangraph.compile(PLANS / "ppo.json"), "broadcast-coalescing")
    assert "its batches come from 'rollouts'" in r.notes[0]


def test_a_hand_set_update_workers_every_is_kept() -> None:
    plan = _seed("dqn")
    plan["nodes"]["train"]["params"]["update_workers_every"] = 3
    c = plangraph.compile(plan)
    r = _result(c, "broadcast-coalescing")
    assert r.notes == ("node 'train': update_workers_every=3 is set in the plan, which is kept",)
    assert c.executed.nodes["train"].params.update_workers_every == 3
    # 1, the default, written out (as a run's plan.json writes every value) is merged
    plan["nodes"]["train"]["params"]["update_workers_every"] = 1
    c = plangraph.compile(plan)
    assert c.executed.nodes["train"].params.update_workers_every == 16


def test_another_trainer_of_the_same_workers_keeps_the_broadcasts() -> None:
    plan = copy.deepcopy(_seed("dqn"))
    plan["nodes"]["train2"] = {"op": "TrainOneStep", "inputs": ["dup"], "params": {}}
    plan["nodes"]["dup"] = {"op": "Duplicate", "inputs": ["replay_batches"], "params": {}}
    plan["nodes"]["train"]["inputs"] = ["dup"]
    plan["nodes"]["u"] = {"op": "Union", "inputs": ["target", "train2"], "params": {}}
    plan["nodes"]["concurrently"]["inputs"] = ["store", "u"]
    c = plangraph.compile(plan)
    assert c.ok, [d.format() for d in c.errors]
    notes = _result(c, "broadcast-coalescing").notes
    assert "'train2' (TrainOneStep) also send worker set 'workers''s weights" in notes[0]
