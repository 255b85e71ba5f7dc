"""The compiler: best-effort analysis, typing rules, CompiledPlan API."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

import plangraph
from plangraph.compiler import CHECKS, CompiledPlan, PlanValidationError, analyze
from plangraph.ir import Plan

ROOT = Path(__file__).resolve().parent.parent


def _plan(nodes: dict[str, Any], output: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "resources": {"workers": {"kind": "WorkerSet", "params": {"policy": {"algo": "ppo"}}}},
        "nodes": nodes,
        "output": output,
        **extra,
    }


def n(op: str, *inputs: str, **params: Any) -> dict[str, Any]:
    return {"op": op, "inputs": list(inputs), "params": params}


def test_accepts_plan_path_text_and_dict() -> None:
    path = ROOT / "plans" / "a2c.json"
    text = path.read_text()
    results = [
        analyze(path),
        analyze(str(path)),
        analyze(text),
        analyze(json.loads(text)),
        analyze(Plan.from_json(text)),
    ]
    assert len({r.to_json() for r in results}) == 1
    assert all(r.ok and r.diagnostics == () for r in results)
    with pytest.raises(TypeError):
        analyze(42)


def test_compile_raises_with_all_diagnostics() -> None:
    bad = _plan(
        {
            "r": n("ParallelRollouts", mode="sideways"),
            "c": n("ConcatBatches", "r", min_batch_size=0),
            "t": n("TrainOneStp", "c"),
            "m": n("StandardMetricsReporting", "t"),
        },
        "m",
    )
    with pytest.raises(PlanValidationError) as exc:
        plangraph.compile(bad)
    codes = [d.code for d in exc.value.diagnostics]
    assert codes == ["PG110", "PG140", "PG140"]
    assert "plan has 3 errors" in str(exc.value)
    assert isinstance(exc.value.compiled, CompiledPlan)


def test_broken_plans_still_give_a_best_effort_graph() -> None:
    bad = _plan(
        {
            "r": n("ParallelRollouts"),
            "c": n("ConcatBatches", "r", min_batch_size=-1),
            "t": n("Mystery", "c"),
            "u": n("UpdateTarget", "t", "ghost"),
            "m": n("StandardMetricsReporting", "u"),
        },
        "m",
    )
    c = analyze(bad)
    assert not c.ok
    assert list(c.nodes) == ["r", "c", "t", "u", "m"]
    assert c.nodes["c"].params is None and c.nodes["c"].raw_params == {"min_batch_size": -1}
    assert c.nodes["t"].signature is None and c.nodes["t"].output_type is None
    assert str(c.nodes["r"].output_type) == "SampleBatch"
    assert {d.node for d in c.diagnostics} == {"c", "t", "u"}
    # and the checks after them still report what they can (ppo has no target network)
    assert [d.code for d in c.diagnostics_for("u")] == ["PG111", "PG131", "PG170"]
    assert set(c.graph.edges) == {("r", "c"), ("c", "t"), ("t", "u"), ("u", "m")}


def test_loader_salvages_structural_errors() -> None:
    doc = _plan({"r": n("ParallelRollouts"), "m": n("StandardMetricsReporting", "r")}, "m")
    doc["nodes"]["m"]["input"] = doc["nodes"]["m"].pop("inputs")
    doc["nodez"] = {}
    c = analyze(doc)
    assert [(d.code, d.pointer) for d in c.diagnostics] == [
        ("PG101", "/nodez"),
        ("PG101", "/nodes/m/input"),
        ("PG131", "/nodes/m/inputs"),
        ("PG160", "/nodes/r"),
    ]
    assert c.diagnostics[0].suggestions == ("nodes",)
    assert c.diagnostics[1].suggestions == ("inputs",)


def test_diamond_is_fine_and_order_is_topological() -> None:
    doc = _plan(
        {
            "m": n("StandardMetricsReporting", "u"),
            "u": n("Union", "a", "b"),
            "b": n("TrainOneStep", "d"),
            "a": n("TrainOneStep", "d"),
            "d": n("Duplicate", "r"),
            "r": n("ParallelRollouts"),
        },
        "m",
    )
    c = plangraph.compile(doc)
    assert list(c.nodes) == ["r", "d", "b", "a", "u", "m"]
    assert next(iter(nx.topological_sort(c.graph))) == "r"
    assert str(c.nodes["u"].output_type) == "TrainInfo"


def test_every_cycle_is_reported() -> None:
    doc = _plan(
        {
            "r": n("ParallelRollouts"),
            "u1": n("Union", "r", "t1"),
            "t1": n("ConcatBatches", "u1", min_batch_size=1),
            "u2": n("Union", "r", "u2"),
            "m": n("StandardMetricsReporting", "t1"),
        },
        "m",
    )
    c = analyze(doc)
    cycles = [d.message for d in c.diagnostics if d.code == "PG120"]
    assert cycles == ["cycle: u1 -> t1 -> u1", "cycle: u2 -> u2"]
    # nodes on or after a cycle come last, in declaration order
    assert list(c.nodes) == ["r", "u1", "t1", "u2", "m"]


def test_concurrently_output_type_follows_output_indexes() -> None:
    def conc(**params: Any) -> CompiledPlan:
        doc = _plan(
            {
                "r1": n("ParallelRollouts"),
                "r2": n("ParallelRollouts"),
                "t": n("TrainOneStep", "r2"),
                "c": n("Concurrently", "r1", "t", **params),
                "m": n("StandardMetricsReporting", "c"),
            },
            "m",
        )
        return plangraph.compile(doc)

    assert str(conc().nodes["c"].output_type) == "SampleBatch | TrainInfo"
    assert str(conc(output_indexes=[1]).nodes["c"].output_type) == "TrainInfo"
    assert str(conc(output_indexes=[0]).nodes["c"].output_type) == "SampleBatch"


def test_type_mismatch_names_both_nodes_and_types() -> None:
    doc = _plan(
        {
            "r1": n("ParallelRollouts"),
            "r2": n("ParallelRollouts"),
            "t": n("TrainOneStep", "r2"),
            "c": n("Concurrently", "r1", "t"),
            "t2": n("TrainOneStep", "c"),
            "m": n("StandardMetricsReporting", "t2"),
        },
        "m",
    )
    (d,) = analyze(doc).diagnostics
    assert d.code == "PG130"
    assert d.message == (
        "type mismatch on edge 'c' -> 't2': Concurrently 'c' emits SampleBatch | TrainInfo, "
        "but TrainOneStep 't2' input expects MultiAgentBatch | SampleBatch"
    )
    # a list where an item is expected suggests Flatten; the reverse suggests Batch
    doc = _plan(
        {
            "r": n("ParallelRollouts"),
            "g": n("ComputeGradients", "r"),
            "a": n("ApplyGradients", "g"),
            "b": n("Batch", "a", n=2),
            "u": n("UpdateTarget", "b"),
            "m": n("StandardMetricsReporting", "u"),
        },
        "m",
    )
    (d,) = [d for d in analyze(doc).diagnostics if d.code == "PG130"]
    assert d.hint == "insert a Flatten node between 'b' and 'u'"
    doc["nodes"]["a"] = n("AverageGradients", "g")
    doc["nodes"]["b"] = n("ApplyGradients", "a")
    diags = analyze(doc).diagnostics
    assert diags[0].hint == "group items first: insert a Batch(n) node between 'g' and 'a'"


def test_config_overrides() -> None:
    c = plangraph.compile(ROOT / "plans" / "ppo.json", config={"train_batch_size": 4000})
    assert c.nodes["concat"].params.min_batch_size == 4000  # type: ignore[union-attr]
    assert c.config["train_batch_size"] == 4000
    bad = analyze(ROOT / "plans" / "ppo.json", config={"num_sgd_iters": 3})
    assert [(d.code, d.suggestions) for d in bad.diagnostics] == [("PG117", ("num_sgd_iter",))]


def test_warnings_do_not_block() -> None:
    doc = _plan({"r": n("ParallelRollouts"), "t": n("TrainOneStep", "r")}, "t")
    c = plangraph.compile(doc)
    assert c.ok and [d.code for d in c.warnings] == ["PG161"]
    assert c.warnings[0].severity == "warning"


def test_explain_lists_the_checks_run() -> None:
    c = plangraph.compile(ROOT / "plans" / "dqn.py")
    assert c.passes == ("load", *(chk.name for chk in CHECKS))
    text = c.explain()
    for name in c.passes:
        assert name in text
    assert re.search(
        r"\n  concurrently +Concurrently +\(SampleBatch, TrainInfo\) -> TrainInfo +\[driver\]\n",
        text,
    )
    assert "replay: ReplayBuffer; writers: store; readers: replay_batches" in text
    assert text.rstrip().endswith("diagnostics: none")


def test_to_json_has_no_locations_and_resolved_params() -> None:
    c = plangraph.compile(ROOT / "plans" / "a2c_microbatch.py")
    data = json.loads(c.to_json())
    assert data["nodes"]["batch"]["params"] == {"n": 2}
    assert data["nodes"]["apply"]["input_types"] == ["GradInfo"]
    assert "a2c_microbatch.py" not in c.to_json()
    assert data["resources"]["workers"]["writers"] == ["apply"]
    assert data["resources"]["workers"]["readers"] == ["rollouts", "grads", "metrics"]


def test_graph_carries_types() -> None:
    c = plangraph.compile(ROOT / "plans" / "a2c.json")
    assert {(u, v, str(t)) for u, v, t in c.graph.edges(data="type")} == {
        ("rollouts", "concat", "SampleBatch"),
        ("concat", "train", "SampleBatch"),
        ("train", "metrics", "TrainInfo"),
    }
    assert c.graph.nodes["metrics"]["op"] == "StandardMetricsReporting"


def _chain(first_input: str) -> dict[str, Any]:
    """rollouts -> concat -> train -> metrics, with train reading ``first_input``."""
    return {
        "r": n("ParallelRollouts"),
        # one bulk-sync round of the default worker set (2 x 8 x 64): no PG174
        "c": n("ConcatBatches", "r", min_batch_size=1024),
        "t": n("TrainOneStep", first_input),
        "m": n("StandardMetricsReporting", "t"),
    }


def _unreachable(c: CompiledPlan) -> list[str]:
    return [d.node for d in c.diagnostics if d.code == "PG160"]  # type: ignore[misc]


def test_a_misspelt_input_is_one_error_not_a_cascade() -> None:
    c = analyze(_plan(_chain("cc"), "m"))
    assert [(d.code, d.node) for d in c.diagnostics] == [("PG111", "t")]
    assert c.diagnostics[0].suggestions == ("c",)
    # the did-you-mean decides which branch was cut: another dead branch is still reported
    nodes = _chain("cc") | {
        "x": n("ParallelRollouts"),
        "xc": n("ConcatBatches", "x", min_batch_size=1024),
    }
    assert _unreachable(analyze(_plan(nodes, "m"))) == ["x", "xc"]
    # without a close match any unconsumed stream may be the one meant: none is reported
    nodes = _chain("zzz") | {"x": n("ParallelRollouts")}
    c = analyze(_plan(nodes, "m"))
    assert [d.code for d in c.diagnostics] == ["PG111"] and c.diagnostics[0].suggestions == ()
    # the real graph is unchanged: the repair is for reachability only
    assert ("c", "t") not in c.graph.edges


def test_unreachable_is_kept_when_the_unknown_input_is_itself_cut_off() -> None:
    nodes = {
        "r": n("ParallelRollouts"),
        "c": n("ConcatBatches", "r", min_batch_size=8),
        "t": n("TrainOneStep", "cat"),  # typo, but t itself feeds nothing
        "r2": n("ParallelRollouts"),
        "t2": n("TrainOneStep", "r2"),
        "m": n("StandardMetricsReporting", "t2"),
    }
    c = analyze(_plan(nodes, "m"))
    assert _unreachable(c) == ["r", "c", "t"]
    # a node downstream of the one with the typo is never the fix (that would be a cycle)
    nodes = {
        "r": n("ParallelRollouts"),
        "t": n("TrainOneStep", "zzz"),
        "dup": n("Duplicate", "t"),
        "m": n("StandardMetricsReporting", "dup"),
        "d": n("UpdateTarget", "dup"),
    }
    assert _unreachable(analyze(_plan(nodes, "m"))) == ["d"]


def test_a_bad_value_from_config_says_where_to_fix_it() -> None:
    doc = _plan(_chain("c"), "m", config={"bs": 0, "mb": 4})
    doc["nodes"]["c"]["params"]["min_batch_size"] = "${bs}"
    (d,) = analyze(doc).diagnostics
    assert d.pointer == "/nodes/c/params/min_batch_size"
    assert d.hint is not None and d.hint.startswith(
        "set config.bs to a value >= 1 (at /config/bs), or pass config={'bs': VALUE}; "
        "min_batch_size:"
    )
    (d,) = analyze(doc, config={"bs": -3}).diagnostics
    assert d.hint is not None and d.hint.startswith(
        "the value comes from config={'bs': -3}: pass a value >= 1 instead "
        "(the plan's default 0 is at /config/bs)"
    )
    # The commands spell the same override as their --set.
    (d,) = analyze(doc, config={"bs": -3}, override_syntax="cli").diagnostics
    assert d.hint is not None and d.hint.startswith("the value comes from --set bs=-3: ")
    doc["nodes"]["c"]["params"]["min_batch_size"] = "${bs // mb}"
    (d,) = analyze(doc, config={"bs": 2}).diagnostics
    assert d.hint is not None and d.hint.startswith(
        "the value is computed by ${bs // mb} from config.bs (overridden by config={'bs': 2}), "
        "config.mb (at /config/mb): change them so that it is >= 1"
    )
    # resource params name the config key too, and a literal value gets no config hint
    doc = _plan(_chain("c"), "m", config={"g": 2.0})
    doc["resources"]["workers"]["params"]["policy"]["gamma"] = "${g}"
    (d,) = analyze(doc).diagnostics
    assert d.code == "PG141" and d.pointer == "/resources/workers/params/policy/gamma"
    assert d.hint is not None and d.hint.startswith("set config.g to a value <= 1.0 (at /config/g)")
    doc["resources"]["workers"]["params"]["policy"]["gamma"] = 2.0
    (d,) = analyze(doc).diagnostics
    assert d.hint == "gamma: Discount factor."
