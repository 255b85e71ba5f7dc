"""The shipped plans: clean, Python and JSON twins equal, JSON valid against the schema."""

from __future__ import annotations

import json
import math
import runpy
from pathlib import Path

import jsonschema
import pytest

import plangraph
from plangraph.ir import Plan
from plangraph.ops.schema import SCHEMA_PATH, SCHEMA_REF_FROM_PLANS

PLANS = Path(__file__).resolve().parent.parent / "plans"
NAMES = (
    "a2c",
    "a2c_microbatch",
    "a3c",
    "apex",
    "apex_ddpg",
    "appo",
    "bc",
    "cql",
    "ddpg",
    "ddppo",
    "dqn",
    "impala",
    "impala_agg",
    "impala_mixin",
    "impala_pong",
    "maml",
    "marwil",
    "pg",
    "ppo",
    "ppo_halfcheetah",
    "ppo_kl",
    "ppo_lstm",
    "ppo_multiagent",
    "ppo_pendulum",
    "r2d2",
    "r2d2_apex",
    "sac_pendulum",
    "td3",
    "two_trainer",
)


def _py_plan(name: str) -> Plan:
    return runpy.run_path(str(PLANS / f"{name}.py"))["plan"]


def test_every_plan_file_has_a_twin() -> None:
    stems = {p.stem for p in PLANS.glob("*.py")} | {p.stem for p in PLANS.glob("*.json")}
    assert stems == set(NAMES)
    for name in NAMES:
        assert (PLANS / f"{name}.py").exists() and (PLANS / f"{name}.json").exists()


@pytest.mark.parametrize("name", NAMES)
def test_json_twin_is_the_python_plan(name: str) -> None:
    plan = _py_plan(name)
    text = (PLANS / f"{name}.json").read_text(encoding="utf-8")
    assert text == plan.to_json(schema_ref=SCHEMA_REF_FROM_PLANS), (
        "stale JSON twin: run tools/export_plans.py"
    )
    assert Plan.from_json(text) == plan


@pytest.mark.parametrize("name", NAMES)
def test_python_and_json_compile_to_equal_graphs(name: str) -> None:
    a = plangraph.compile(PLANS / f"{name}.py")
    b = plangraph.compile(PLANS / f"{name}.json")
    assert a.diagnostics == () and b.diagnostics == ()
    assert a.to_json() == b.to_json()
    assert list(a.graph.edges(data=True)) == list(b.graph.edges(data=True))
    assert str(a.output_type) == "Result"


@pytest.mark.parametrize("name", NAMES)
def test_json_plans_validate_against_committed_schema(name: str) -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    data = json.loads((PLANS / f"{name}.json").read_text(encoding="utf-8"))
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]
    assert errors == []


def test_seed_structures() -> None:
    a2c = plangraph.compile(PLANS / "a2c.py")
    assert [n.op for n in a2c.nodes.values()] == [
        "ParallelRollouts",
        "ConcatBatches",
        "TrainOneStep",
        "StandardMetricsReporting",
    ]
    assert a2c.nodes["train"].params.num_sgd_iter == 1
    assert a2c.nodes["train"].params.sgd_minibatch_size == 0

    micro = plangraph.compile(PLANS / "a2c_microbatch.py")
    cfg = micro.config
    n = micro.nodes["batch"].params.n
    assert n == math.ceil(cfg["train_batch_size"] / cfg["microbatch_size"])
    assert micro.nodes["concat"].params.min_batch_size == cfg["microbatch_size"]
    assert [str(n.output_type) for n in micro.nodes.values()] == [
        "SampleBatch",
        "SampleBatch",
        "GradInfo",
        "list[GradInfo]",
        "GradInfo",
        "TrainInfo",
        "Result",
    ]
    # n stays derived when the sizes are overridden
    over = plangraph.compile(PLANS / "a2c_microbatch.json", config={"microbatch_size": 100})
    assert over.nodes["batch"].params.n == math.ceil(cfg["train_batch_size"] / 100)

    dqn = plangraph.compile(PLANS / "dqn.json")
    conc = dqn.nodes["concurrently"]
    assert conc.params.mode == "round_robin" and conc.params.output_indexes == (1,)
    assert str(conc.output_type) == "TrainInfo"
    assert dqn.resources["replay"].writers == ("store",)
    assert dqn.resources["replay"].readers == ("replay_batches",)

    ppo = plangraph.compile(PLANS / "ppo.json")
    assert ppo.nodes["train"].params.num_sgd_iter > 1
    assert ppo.nodes["train"].params.sgd_minibatch_size > 0


def test_apex_structure() -> None:
    """RLlib 1.x's Ape-X plan: three branches under Concurrently(async), the learner's."""
    apex = plangraph.compile(PLANS / "apex.json")
    conc = apex.nodes["concurrently"]
    assert conc.params.mode == "async" and conc.params.output_indexes == (2,)
    assert conc.inputs == ("sync", "enqueue", "target")
    assert [apex.nodes[n].op for n in apex.upstream("sync")] == [
        "ParallelRollouts",
        "StoreToReplay",
    ]
    assert [apex.nodes[n].op for n in apex.upstream("enqueue")] == ["ParallelReplay"]
    assert [apex.nodes[n].op for n in apex.upstream("target")] == ["Dequeue", "UpdatePriorities"]
    replay = apex.resources["replay"]
    assert replay.kind == "ReplayActors" and replay.params.prioritized
    assert replay.writers == ("store", "priorities") and replay.readers == ("replay_batches",)
    assert apex.nodes["target"].params.unit == "trained"
    assert apex.resources["workers"].params.policy.per_worker_epsilon_alpha == 7.0


def test_td3_and_ddpg_structures() -> None:
    """sac_pendulum's shape; TD3's targets move once per actor update (Fujimoto et al.
    2018, Algorithm 1), DDPG's after every update."""
    sac = plangraph.compile(PLANS / "sac_pendulum.json")
    for name in ("td3", "ddpg"):
        plan = plangraph.compile(PLANS / f"{name}.json")
        assert [(n.id, n.op, n.inputs) for n in plan.nodes.values()] == [
            (n.id, n.op, n.inputs) for n in sac.nodes.values()
        ]
        assert plan.resources["workers"].params.policy.algo == name
    td3 = plangraph.compile(PLANS / "td3.json")
    policy = td3.resources["workers"].params.policy
    batch = td3.nodes["replay_batches"].params.batch_size
    assert td3.nodes["target"].params.freq == batch * policy.policy_delay
    assert td3.nodes["target"].params.unit == "trained"
    assert plangraph.compile(PLANS / "ddpg.json").nodes["target"].params.freq == 0


def test_apex_ddpg_is_the_apex_plan_with_ddpg() -> None:
    apex = plangraph.compile(PLANS / "apex.json")
    ddpg = plangraph.compile(PLANS / "apex_ddpg.json")
    assert [(n.id, n.op, n.inputs) for n in ddpg.nodes.values()] == [
        (n.id, n.op, n.inputs) for n in apex.nodes.values()
    ]
    policy = ddpg.resources["workers"].params.policy
    assert policy.algo == "ddpg" and policy.per_worker_noise_alpha == 7.0
    assert ddpg.nodes["target"].params.tau < 1.0
