"""``plangraph ops``, ``plangraph schema`` and ``plangraph explain``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from plangraph import cli
from plangraph.ops import schema as schema_mod
from plangraph.ops.registry import all_ops

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_ops_lists_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "ops")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["ParallelRollouts", "source", "workers", "()", "->"]
    i = next(i for i, line in enumerate(lines) if line.startswith("ConcatBatches "))
    assert lines[i].split()[1] == "combine"
    assert lines[i + 1].split() == [
        "params:",
        "min_batch_size=<required>,",
        'count_steps_by="env_steps",',
        "policies=[]",
    ]


def test_ops_describes_one_operator(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "ops", "ConcatBatches")
    assert rc == 0
    assert out.startswith(
        "ConcatBatches  [combine]  MultiAgentBatch | SampleBatch -> SampleBatch\n"
    )
    assert "  python: stream.combine(ConcatBatches(...))\n" in out
    assert "    min_batch_size: int (required, >= 1, <= 100000000)\n" in out
    assert "        Env steps (or agent steps) per emitted batch (at least).\n" in out
    rc, out, _ = _run(capsys, "ops", "UpdateTarget", "--format", "json")
    data = json.loads(out)
    assert data["apply"] == "for_each"
    assert {p["name"]: p["default"] for p in data["params"]}["unit"] == "sampled"


def test_ops_describes_a_resource_kind(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "ops", "LearnerThread")
    assert rc == 0
    assert out.startswith('LearnerThread  [resource, declared once and referenced as "@id"]\n')
    assert "    inqueue_size: int (default 16, >= 1, <= 1000000)\n" in out
    assert "        Train batches waiting for the learner, at most (back-pressure).\n" in out
    rc, out, _ = _run(capsys, "ops", "ReplayBuffer", "--format", "json")
    data = json.loads(out)
    assert data["kind"] == "resource"
    assert {p["name"]: p["default"] for p in data["params"]}["learning_starts"] == 1000


def test_ops_describes_policies_and_the_set_paths(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "ops", "ppo")
    assert rc == 0
    assert out.startswith('ppo  [policy PPOConfig: a WorkerSet\'s "policy" with "algo": "ppo"]\n')
    assert "    clip_param: number (default 0.2, > 0.0)\n" in out
    assert "--set resources.ID.policy.PARAM=VALUE" in out
    rc, out, _ = _run(capsys, "ops", "WorkerSet")
    assert "`plangraph ops a2c` lists a policy's params" in out
    assert "--set workers.num_envs_per_worker=4" in out
    rc, out, _ = _run(capsys, "ops", "DQNConfig", "--format", "json")
    data = json.loads(out)
    assert data["kind"] == "policy" and data["name"] == "dqn"
    assert {p["name"]: p["default"] for p in data["params"]}["n_step"] == 1
    rc, out, _ = _run(capsys, "ops")
    assert (
        "policies (a WorkerSet's policy.algo): a2c, appo, bc, cql, ddpg, ddppo, dqn, impala, maml, "
        "marwil, pg, ppo, r2d2, sac, td3" in out
    )


def test_ops_unknown_name_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(capsys, "ops", "ConcatBatch")
    assert rc == 2
    assert "did you mean ConcatBatches" in err


def test_schema_prints_a_valid_schema(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "schema")
    assert rc == 0
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    node = schema["properties"]["nodes"]["additionalProperties"]
    assert node["discriminator"]["propertyName"] == "op"
    assert "ConcatBatches" in node["discriminator"]["mapping"]
    v = jsonschema.Draft202012Validator(schema)
    doc = json.loads((ROOT / "plans" / "a2c.json").read_text())
    assert not list(v.iter_errors(doc))
    doc["nodes"]["concat"]["params"]["min_batch_size"] = -1
    assert list(v.iter_errors(doc))
    doc["nodes"]["concat"]["params"]["min_batch_size"] = "${anything}"
    assert not list(v.iter_errors(doc))
    doc["nodes"]["concat"]["op"] = "ConcatBatchez"
    assert list(v.iter_errors(doc))


def test_schema_check_detects_drift(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rc, out, _ = _run(capsys, "schema", "--check")
    assert rc == 0 and "up to date" in out
    stale = json.loads(schema_mod.SCHEMA_PATH.read_text())
    del stale["$defs"]["ConcatBatchesParams"]["properties"]["count_steps_by"]
    fake = tmp_path / "plan.schema.json"
    fake.write_text(json.dumps(stale))
    monkeypatch.setattr(schema_mod, "SCHEMA_PATH", fake)
    rc, _, err = _run(capsys, "schema", "--check")
    assert rc == 1 and "out of date" in err
    rc, _, _ = _run(capsys, "schema", "--write")
    assert rc == 0
    rc, _, _ = _run(capsys, "schema", "--check")
    assert rc == 0


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "explain", "plans/a2c_microbatch.json")
    assert rc == 0
    assert out.startswith("plan 'a2c_microbatch': 7 nodes, 1 resource, output 'metrics'")
    assert "params: n=2\n" in out
    rc, out, _ = _run(capsys, "explain", "--format", "json", "plans/dqn.py")
    data = json.loads(out)
    assert data["passes"][0] == "load" and data["diagnostics"] == []
    assert data["nodes"]["concurrently"]["output_type"] == "TrainInfo"
    rc, out, _ = _run(capsys, "explain", "tests/fixtures/bad_plans/PG130_type_mismatch.json")
    assert rc == 1
    assert "error PG130 [type-mismatch]" in out
    rc, _, err = _run(capsys, "explain", "missing.json")
    assert rc == 2 and "no such file" in err


def test_ops_catalog_is_plain_text_with_whole_sentences(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = _run(capsys, "ops")
    assert rc == 0
    assert "``" not in out and "**" not in out
    line = next(ln for ln in out.splitlines() if ln.startswith("AverageGradients "))
    assert line.endswith(
        "Combine a list of `GradInfo` into one: the mean of the gradients weighted by "
        "env steps, and the sum of their env steps."
    )
    line = next(ln for ln in out.splitlines() if ln.startswith("Concurrently "))
    assert line.endswith("e.g. DQN's store and replay/train branches.")  # not cut at "e.g."
    rc, out, _ = _run(capsys, "ops", "AverageGradients")
    assert "``" not in out and "**" not in out
    assert "the mean of the gradients weighted by\n" in out
    rc, out, _ = _run(capsys, "ops", "AverageGradients", "--format", "json")
    data = json.loads(out)
    assert data["summary"].startswith("Combine a list of `GradInfo` into one:")
    assert "**mean**" in data["doc"]  # the JSON keeps the docstring as written


def test_explain_shows_resolved_resource_params_with_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = _run(capsys, "explain", "plans/ppo.json")
    assert rc == 0
    res = out[out.index("resources (params resolved, defaults included):") :]
    flat = " ".join(res.split())
    for item in (
        'env="CartPole-v1",',
        "num_workers=2,",
        "num_envs_per_worker=8,",
        "rollout_fragment_length=64",
        'policy: algo="ppo",',
        "hiddens=[64, 64],",  # a default the plan does not set
        "clip_param=0.2,",
        "normalize_advantages=true",
    ):
        assert item in flat, item
    assert "defaults used: policy.hiddens, policy.activation," in flat
    assert max(len(line) for line in res.splitlines()) <= 92
    # --set (the spelling `plangraph run` uses) resolves into the shown params
    rc, out, _ = _run(capsys, "explain", "--set", "num_workers=5", "plans/ppo.json")
    assert rc == 0 and "num_workers=5," in out
    rc, out, _ = _run(capsys, "explain", "plans/dqn.json")
    assert "replay: ReplayBuffer; writers: store; readers: replay_batches" in out
    assert "defaults used: alpha, beta, beta_final, beta_annealing_steps, eps" in out


def test_explain_says_where_the_learners_run(capsys: pytest.CaptureFixture[str]) -> None:
    """From the ops that learn (``learns=True``) and their placement: DD-PPO's rollout
    workers are its learners (no driver learner); MAML adapts on the workers and
    meta-updates in the driver; PPO learns in the driver."""

    def workers_line(plan: str) -> str:
        rc, out, _ = _run(capsys, "explain", plan)
        assert rc == 0
        return next(ln for ln in out.splitlines() if ln.startswith("  workers: "))

    line = workers_line("plans/ddppo.json")
    assert line.endswith(
        "learners: each rollout worker (train, per-shard); no learner in the driver"
    )
    assert "(in the driver)" not in line
    line = workers_line("plans/maml.json")
    assert line.endswith(
        "learners: each rollout worker (adapt, per-shard) and the driver (meta_update; device auto)"
    )
    assert workers_line("plans/ppo.json").endswith("learner: device auto (in the driver)")
    assert workers_line("plans/impala.json").endswith("learner: device auto (in the driver)")


def test_explain_shows_each_check_description_whole(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "explain", "plans/ppo.json")
    assert rc == 0
    checks = out[out.index("checks run:") : out.index("optimisation passes")]
    flat = " ".join(checks.split())
    for whole in (
        "1. load Parse the plan and check its shape.",
        "then resolve ${...} in them.",  # config: its docstring's first line ends in "and"
        "has at most one aggregation actor per rollout worker.",
        "reserve fits its resources and, on known nodes, its placement.",
        "before Ray starts).",
    ):
        assert whole in flat, whole
    # every description ends a sentence (a diagnostics count may follow)
    for entry in re.split(r"\s+\d+\. ", flat)[1:]:
        assert entry.rstrip().endswith((".", "found]")), entry


def test_ops_shows_mode_dependent_outputs_and_per_shard_ops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``ParallelRollouts(mode="raw")`` emits ``Shard[SampleBatch]``, and per-shard ops
    (``placement="shard"``) are marked, in the catalog, one op's page and the JSON."""
    rc, out, _ = _run(capsys, "ops")
    assert rc == 0
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln and not ln[0].isspace()}
    assert " ".join(rows["ParallelRollouts"][2:8]) == (
        'workers () -> SampleBatch; mode="raw": Shard[SampleBatch]'
    )
    assert " ".join(rows["GatherShards"][2:8]) == 'driver Shard[T] -> T; mode="batch": list[T]'
    shard = {name for name, row in rows.items() if len(row) > 2 and row[2] == "per-shard"}
    # other tests of this process may have registered per-shard user operators (TagWorker)
    registered = {name for name, sig in all_ops().items() if sig.placement == "shard"}
    assert shard == registered and {"DDPPOTrainOnShard", "MAMLInnerAdaptation"} <= shard
    assert rows["TrainOneStep"][2] == "driver"
    rc, out, _ = _run(capsys, "ops", "ParallelRollouts")
    assert out.startswith('ParallelRollouts  [source]  () -> SampleBatch; mode="raw": Shard[')
    assert (
        "  output by mode: bulk_sync: SampleBatch; async: SampleBatch; raw: Shard[SampleBatch]\n"
        in out
    )
    rc, out, _ = _run(capsys, "ops", "DDPPOTrainOnShard")
    assert "  runs: per-shard: inside each rollout worker, on its own Shard[...] stream\n" in out
    rc, out, _ = _run(capsys, "ops", "ParallelRollouts", "--format", "json")
    data = json.loads(out)
    assert data["outputs"] == {
        "mode": {"bulk_sync": "SampleBatch", "async": "SampleBatch", "raw": "Shard[SampleBatch]"}
    }
    assert data["placement"] == "actors" and not data["learns"]
    rc, out, _ = _run(capsys, "ops", "MAMLInnerAdaptation", "--format", "json")
    data = json.loads(out)
    assert data["placement"] == "shard" and data["learns"] and data["outputs"] == {}
