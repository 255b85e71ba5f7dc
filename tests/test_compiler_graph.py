"""The analysis graph: CompiledPlan's dataflow queries, replay facts, the check pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import plangraph
from plangraph.compiler import CHECKS, Check, analyze, pipeline, register_check
from plangraph.compiler.context import Context

ROOT = Path(__file__).resolve().parent.parent


def n(op: str, *inputs: str, **params: Any) -> dict[str, Any]:
    return {"op": op, "inputs": list(inputs), "params": params}


def _doc(nodes: dict[str, Any], output: str = "m") -> dict[str, Any]:
    return {
        "name": "t",
        "resources": {"workers": {"kind": "WorkerSet", "params": {"policy": {"algo": "ppo"}}}},
        "nodes": nodes,
        "output": output,
    }


DIAMOND = _doc(
    {
        "m": n("StandardMetricsReporting", "u"),
        "u": n("Union", "a", "b"),
        "b": n("TrainOneStep", "d"),
        "a": n("TrainOneStep", "d"),
        "d": n("Duplicate", "r"),
        "r": n("ParallelRollouts"),
    }
)


def test_users_ancestors_descendants_and_order() -> None:
    c = plangraph.compile(DIAMOND)
    assert c.topological_order() == ("r", "d", "b", "a", "u", "m") == tuple(c.nodes)
    assert c.users("d") == ("b", "a")  # declaration order of the users
    assert c.users("d") == c.nodes["d"].consumers == c.nodes["d"].users
    assert c.users("m") == ()
    assert c.ancestors("u") == frozenset({"r", "d", "a", "b"})
    assert c.ancestors("r") == frozenset()
    assert c.descendants("d") == frozenset({"a", "b", "u", "m"})
    assert c.upstream("m") == ("r", "d", "b", "a", "u")
    assert c.upstream("m", op="TrainOneStep") == ("b", "a")
    with pytest.raises(KeyError, match="no node 'ghost'"):
        c.users("ghost")


def test_users_lists_a_node_once_per_input_port() -> None:
    doc = _doc({"r": n("ParallelRollouts"), "u": n("Union", "r", "r"), "m": n("Union", "u")})
    c = analyze(doc)
    assert c.users("r") == ("u", "u")
    assert c.graph.edges["r", "u"]["ports"] == (0, 1)
    (fan_out,) = [d for d in c.diagnostics if d.code == "PG153"]
    assert "consumed 2 times (by 'u', 'u')" in fan_out.message


def test_dqn_train_is_fed_by_its_replay_buffer() -> None:
    c = plangraph.compile(ROOT / "plans" / "dqn.json")
    train = next(nid for nid, node in c.nodes.items() if node.op == "TrainOneStep")
    assert c.nodes[train].replay_sources == ("replay",)
    assert c.fed_by(train) == ("replay",) == c.fed_by(train, kind="ReplayBuffer")
    # the rollouts (which read the worker set) feed the store branch, not the train node
    assert c.fed_by(train, kind="WorkerSet") == ()
    assert c.fed_by("metrics", kind="WorkerSet") == ("workers",)
    # the reader itself is not fed by the buffer (nothing arrives on its inputs), nor is
    # the writer's branch
    assert c.fed_by("replay_batches") == ()
    assert c.fed_by("store") == ()
    assert "replayed from: replay" in c.explain()


def test_ppo_is_fed_by_no_replay_buffer() -> None:
    c = plangraph.compile(ROOT / "plans" / "ppo.json")
    assert all(node.replay_sources == () for node in c.nodes.values())
    assert "replayed from" not in c.explain()


def test_replay_sources_come_from_read_access_not_the_op_name() -> None:
    """A user op that reads a ReplayBuffer (say a future ParallelReplay) feeds its users."""
    from plangraph.ops import register_op, unregister_op
    from plangraph.ops.registry import OpParams

    class SampleParams(OpParams):
        """Sample from a buffer."""

        buffer: str = "@replay"

    register_op(
        "SampleReplayTest",
        category="source",
        apply="source",
        output="SampleBatch",
        params=SampleParams,
        resources={"buffer": ("ReplayBuffer", "read")},
    )
    try:
        doc = _doc(
            {
                "r": n("ParallelRollouts"),
                "s": n("StoreToReplay", "r", buffer="@replay"),
                "p": n("SampleReplayTest", buffer="@replay"),
                "t": n("TrainOneStep", "p"),
                "c": n("Concurrently", "s", "t", output_indexes=[1]),
                "m": n("StandardMetricsReporting", "c"),
            }
        )
        doc["resources"]["replay"] = {"kind": "ReplayBuffer", "params": {}}
        doc["resources"]["workers"]["params"]["policy"]["algo"] = "dqn"  # learns from replay
        c = plangraph.compile(doc)
        assert c.nodes["t"].replay_sources == ("replay",)
        assert c.users("p") == ("t",)
    finally:
        unregister_op("SampleReplayTest")


def test_a_user_trainer_that_learns_gets_the_replay_use_check() -> None:
    """Which ops train a policy on the experience they get is read from their signature
    (``learns=True`` and batches in), not from a list of built-in names: a user's own
    trainer fed from replay gets PG171 for an on-policy PPO, as TrainOneStep does; the
    same op without ``learns`` is not taken for a trainer."""
    from plangraph.ops import register_op, unregister_op
    from plangraph.ops.registry import OpParams

    class MyTrainParams(OpParams):
        """Train the policy of ``workers`` on each batch."""

        workers: str = "@workers"

    def plan(op: str) -> dict[str, Any]:
        doc = _doc(
            {
                "r": n("ParallelRollouts"),
                "s": n("StoreToReplay", "r", buffer="@replay"),
                "p": n("LocalReplay", buffer="@replay"),
                "t": n(op, "p"),
                "c": n("Concurrently", "s", "t", output_indexes=[1]),
                "m": n("StandardMetricsReporting", "c"),
            }
        )
        doc["resources"]["replay"] = {"kind": "ReplayBuffer", "params": {}}
        doc["resources"]["workers"]["params"]["policy"]["algo"] = "ppo"
        return doc

    def pg171(op: str) -> list[tuple[str | None, str | None]]:
        found = analyze(plan(op)).diagnostics
        return [(d.node, d.pointer) for d in found if d.code == "PG171"]

    assert pg171("TrainOneStep") == [("t", "/nodes/t/inputs")]
    for learns in (True, False):
        register_op(
            "MyTrainTest",
            category="train",
            inputs=["SampleBatch"],
            output="TrainInfo",
            params=MyTrainParams,
            resources={"workers": ("WorkerSet", "write")},
            learns=learns,
        )
        try:
            assert pg171("MyTrainTest") == ([("t", "/nodes/t/inputs")] if learns else [])
        finally:
            unregister_op("MyTrainTest")


def test_checks_are_the_pipeline_modules_explicit_order() -> None:
    assert CHECKS == pipeline.BUILTIN_CHECKS == pipeline.checks()
    assert [c.name for c in CHECKS] == [
        "config",
        "operators",
        "params",
        "resources",
        "graph",
        "cycles",
        "arity",
        "fan-out",
        "types",
        "shards",
        "replay",
        "learner",
        "reachability",
        "output-type",
        "env-spaces",
        "capabilities",
        "all-reduce",
        "replay-use",
        "replay-ready",
        "batch-sizes",
        "aggregation",
        "gradient-sources",
        "policy-mapping",
        "policies",
        "trained-policies",
        "branches-produce",
        "branch-turns",
        "round-robin",
        "capacity",
        "replay-size",
    ]
    c = plangraph.compile(ROOT / "plans" / "a2c.json")
    assert c.passes == ("load", *(chk.name for chk in CHECKS))
    assert all(chk.doc for chk in CHECKS)


def _boom(ctx: Context) -> None:
    """Divide by the number of replay buffers (a bug: there may be none)."""
    raise ZeroDivisionError("division by zero")


def test_a_crashing_check_is_reported_by_name_and_the_rest_still_run() -> None:
    types_at = [c.name for c in CHECKS].index("types") + 1
    checks = (*CHECKS[:types_at], Check.of("boom", _boom), *CHECKS[types_at:])
    doc = _doc({"r": n("ParallelRollouts"), "t": n("TrainOneStep", "r")}, output="t")
    c = analyze(doc, checks=checks)
    assert [d.code for d in c.diagnostics] == ["PG199", "PG161"]  # output-type still ran
    crash = c.diagnostics[0]
    assert crash.severity == "error" and crash.name == "internal-check-error"
    assert crash.message == "check 'boom' crashed with ZeroDivisionError: division by zero"
    assert crash.hint is not None and "please report it" in crash.hint
    assert c.passes[types_at + 1] == "boom" and not c.ok
    assert c.pass_records[types_at + 1].diagnostics == 1
    assert c.nodes["t"].output_type is not None  # the analysis before it is kept


def test_register_check_inserts_after_a_named_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "_pipeline", pipeline.BUILTIN_CHECKS)
    seen: list[tuple[str, ...]] = []

    def order_seen(ctx: Context) -> None:
        """Record the topological order."""
        seen.append(ctx.topology.topological_order())

    new = register_check(Check.of("order-seen", order_seen), after="cycles")
    names = [c.name for c in new]
    assert names[names.index("cycles") + 1] == "order-seen"
    from plangraph import compiler

    assert compiler.CHECKS == new
    assert "order-seen" in plangraph.compile(DIAMOND).passes
    assert seen == [("r", "d", "b", "a", "u", "m")]
    with pytest.raises(ValueError, match="already in the pipeline"):
        register_check(Check.of("order-seen", order_seen), after="types")
    with pytest.raises(ValueError, match="no check named 'typez'"):
        register_check(Check.of("other", order_seen), after="typez")


def test_loader_takes_the_known_keys_from_the_ir_models() -> None:
    from plangraph.ir import Node, Plan, Resource

    doc = _doc({"r": {**n("ParallelRollouts"), "parms": {}}, "m": n("StandardMetricsReporting")})
    doc["resources"]["workers"]["kinds"] = "WorkerSet"
    doc["nodez"] = {}
    hints = {d.pointer: d.hint for d in analyze(doc).diagnostics if d.code == "PG101"}
    assert hints == {
        "/nodez": "known keys: " + ", ".join(Plan.model_fields),
        "/resources/workers/kinds": "known keys: " + ", ".join(Resource.model_fields),
        "/nodes/r/parms": "known keys: " + ", ".join(Node.model_fields),
    }
    # a broken node keeps what validated; the other nodes are untouched
    doc = _doc({"r": n("ParallelRollouts"), "m": {"op": 3, "inputs": ["r", 4]}})
    c = analyze(doc)
    assert [(d.code, d.pointer) for d in c.diagnostics][:2] == [
        ("PG102", "/nodes/m/op"),
        ("PG102", "/nodes/m/inputs/1"),
    ]
    assert c.plan.nodes["m"].inputs == ("r",) and c.plan.nodes["r"].op == "ParallelRollouts"
