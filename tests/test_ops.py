"""The operator catalog, the Python builder, and user operators."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from pydantic import Field, ValidationError

import plangraph
from plangraph.ir import Plan
from plangraph.ops import (
    AverageGradients,
    ComputeGradients,
    ConcatBatches,
    Concurrently,
    OpParams,
    ParallelRollouts,
    PlanBuildError,
    StandardMetricsReporting,
    TrainOneStep,
    all_ops,
    get_op,
    register_op,
    unregister_op,
    worker_set,
)
from plangraph.ops.builtin.merge import ConcurrentlyParams
from plangraph.ops.describe import describe_op

DESIGN_OPS = {
    "ParallelRollouts": ("source", "() -> SampleBatch"),
    # Multi-agent plans feed these MultiAgentBatch too (one SampleBatch per policy).
    "ConcatBatches": ("combine", "MultiAgentBatch | SampleBatch -> SampleBatch"),
    "TrainOneStep": ("train", "MultiAgentBatch | SampleBatch -> TrainInfo"),
    "ComputeGradients": ("train", "SampleBatch -> GradInfo"),
    "Batch": ("combine", "T -> list[T]"),
    "AverageGradients": ("train", "list[GradInfo] -> GradInfo"),
    "ApplyGradients": ("train", "GradInfo -> TrainInfo"),
    "StoreToReplay": ("replay", "MultiAgentBatch | SampleBatch -> SampleBatch"),
    "SelectExperiences": ("combine", "MultiAgentBatch -> MultiAgentBatch"),
    "LocalReplay": ("replay", "() -> SampleBatch"),
    "UpdateTarget": ("train", "TrainInfo -> TrainInfo"),
    "Concurrently": ("merge", "Any, Any, ... -> Any"),
    "StandardMetricsReporting": ("sink", "Any -> Result"),
    "Flatten": ("combine", "list[T] -> T"),
    "Union": ("merge", "T, T, ... -> T"),
    "Duplicate": ("merge", "T -> T"),
}
WORKERS = {"workers": worker_set(policy={"algo": "a2c"})}


def test_catalog_has_every_design_op() -> None:
    for name, (category, types) in DESIGN_OPS.items():
        sig = get_op(name)
        assert (sig.category, sig.type_text()) == (category, types), name
        assert sig.doc and sig.builtin


def test_params_models_are_strict_and_documented() -> None:
    for sig in all_ops().values():
        model = sig.params_model
        assert model.model_config.get("frozen") and model.model_config.get("extra") == "forbid"
        for name, field in model.model_fields.items():
            assert field.description, f"{sig.name}.{name} has no description"
    workers_ops = {
        n for n, s in all_ops().items() if any(r.kind == "WorkerSet" for r in s.resources)
    }
    assert workers_ops == {
        "ParallelRollouts",
        "AsyncGradients",
        "DDPPOTrainOnShard",
        "DDPPOReport",
        "TrainOneStep",
        "ComputeGradients",
        "ApplyGradients",
        "UpdateTarget",
        "UpdateKL",
        "UpdateWorkerWeights",
        "AggregateBatches",  # its aggregators sync the weights of the workers they own
        "StandardMetricsReporting",
        "ReadExperiences",  # the learner whose env the dataset must fit
        "WriteExperiences",  # the env and spaces metadata.json records
        "MetaUpdate",  # MAML's: meta-updates the learner, sets the workers' tasks
    }
    for name in workers_ops:
        assert get_op(name).params_model.model_fields["workers"].default == "@workers"
    for name in ("StoreToReplay", "LocalReplay"):
        assert get_op(name).params_model.model_fields["buffer"].is_required()


def test_concurrently_param_rules() -> None:
    with pytest.raises(ValidationError, match="only allowed with mode 'round_robin'"):
        ConcurrentlyParams(mode="async", weights=(1, 1))
    with pytest.raises(ValidationError, match="at least one weight"):
        ConcurrentlyParams(weights=("*", "*"))
    with pytest.raises(ValidationError):
        ConcurrentlyParams(weights=(1, -2))
    with pytest.raises(ValidationError, match="repeat"):
        ConcurrentlyParams(output_indexes=(1, 1))
    assert ConcurrentlyParams(weights=(1, "*", 2.5)).weights == (1, "*", 2.5)


def test_get_op_suggests_close_names() -> None:
    with pytest.raises(KeyError, match="did you mean TrainOneStep"):
        get_op("TrainOnestep")


def test_builder_records_nodes_ids_and_call_sites() -> None:
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    rollouts = ParallelRollouts(mode="bulk_sync")
    train = rollouts.combine(ConcatBatches(min_batch_size=100)).for_each(TrainOneStep())
    other = ParallelRollouts(mode="async")
    out = StandardMetricsReporting(Concurrently([train, other], output_indexes=[0]))
    plan = Plan.from_builder(out, name="b", resources=WORKERS)
    assert list(plan.nodes) == [
        "parallel_rollouts",
        "concat_batches",
        "train_one_step",
        "parallel_rollouts_2",
        "concurrently",
        "standard_metrics_reporting",
    ]
    assert plan.nodes["concurrently"].inputs == ("train_one_step", "parallel_rollouts_2")
    assert plan.nodes["concurrently"].params == {"output_indexes": (0,)}
    assert plan.source is not None
    loc = plan.source.locate("/nodes/parallel_rollouts")
    assert loc is not None and loc.file == "tests/test_ops.py" and loc.line == line
    assert plan.source.locate("/nodes/concat_batches").line == line + 1  # type: ignore[union-attr]
    compiled = plangraph.compile(plan)
    assert str(compiled.nodes["concat_batches"].location) == f"tests/test_ops.py:{line + 1}"
    assert str(compiled.output_type) == "Result"
    assert Plan.from_json(plan.to_json()) == plan


def test_builder_rejects_wrong_combinator_at_authoring_time() -> None:
    rollouts = ParallelRollouts()
    line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
    with pytest.raises(PlanBuildError) as exc:
        rollouts.for_each(ConcatBatches(min_batch_size=10))
    assert exc.value.location is not None and exc.value.location.line == line
    assert "write stream.combine(ConcatBatches(...))" in str(exc.value)
    with pytest.raises(PlanBuildError, match=r"write stream.for_each\(TrainOneStep"):
        rollouts.combine(TrainOneStep())
    with pytest.raises(PlanBuildError, match="call it first"):
        rollouts.for_each(TrainOneStep)  # type: ignore[arg-type]
    with pytest.raises(PlanBuildError, match="source and takes no input"):
        ParallelRollouts(rollouts)
    with pytest.raises(PlanBuildError, match="node id"):
        ParallelRollouts(id="has/slash")
    with pytest.raises(PlanBuildError, match="not a JSON value"):
        ConcatBatches(min_batch_size={1, 2})


def test_duplicate_ids_and_fan_out() -> None:
    a = ParallelRollouts(id="x")
    b = a.for_each(TrainOneStep(id="x"))
    with pytest.raises(PlanBuildError, match="duplicate node id 'x'"):
        Plan.from_builder(b, name="d")
    # a stream used twice without duplicate() compiles to a fan-out error; with it, clean
    src = ParallelRollouts()
    both = Concurrently([src.for_each(TrainOneStep()), src.for_each(TrainOneStep())])
    bad = plangraph.analyze(
        Plan.from_builder(StandardMetricsReporting(both), name="f", resources=WORKERS)
    )
    assert [d.code for d in bad.diagnostics] == ["PG153"]
    left, right = ParallelRollouts().duplicate(2)
    both = Concurrently([left.for_each(TrainOneStep()), right.for_each(TrainOneStep())])
    good = plangraph.analyze(
        Plan.from_builder(StandardMetricsReporting(both), name="g", resources=WORKERS)
    )
    assert good.diagnostics == ()
    assert good.nodes["duplicate"].consumers == ("train_one_step", "train_one_step_2")


def test_generic_combinators_build_typed_nodes() -> None:
    grads = ParallelRollouts().for_each(ComputeGradients())
    flat = grads.batch(4).flatten()
    merged = flat.union(ParallelRollouts().for_each(ComputeGradients()))
    out = StandardMetricsReporting(merged.batch(2).for_each(AverageGradients()))
    compiled = plangraph.compile(Plan.from_builder(out, name="g", resources=WORKERS))
    types = {n.id: str(n.output_type) for n in compiled.nodes.values()}
    assert types["batch"] == "list[GradInfo]"
    assert types["flatten"] == "GradInfo"
    assert types["union"] == "GradInfo"
    assert types["batch_2"] == "list[GradInfo]"


def test_register_op_both_forms() -> None:
    @register_op(category="combine", apply="filter", inputs=["SampleBatch"], output="SampleBatch")
    class MinEpisodeReturn(OpParams):
        """Keep batches whose mean episode return is at least ``threshold``."""

        threshold: float = Field(0.0, description="Episode return (undiscounted).")

    class TopKParams(OpParams):
        """Keep the k rows with the largest advantages."""

        k: int = Field(8, ge=1, description="Rows kept per batch.")

    top_k = register_op(
        "TopK", category="combine", inputs=["SampleBatch"], output="SampleBatch", params=TopKParams
    )
    try:
        assert get_op("MinEpisodeReturn").doc.startswith("Keep batches")
        with pytest.raises(ValueError, match="already registered"):
            register_op("TopK", category="combine", inputs=["SampleBatch"], output="SampleBatch")
        with pytest.raises(ValueError, match="exactly one input"):
            register_op("Bad", category="train", inputs=["A", "B"], output="A")
        stream = ParallelRollouts().filter(MinEpisodeReturn(threshold=10.0)).for_each(top_k(k=4))
        with pytest.raises(PlanBuildError, match="is a filter"):
            ParallelRollouts().for_each(MinEpisodeReturn())
        plan = Plan.from_builder(
            StandardMetricsReporting(stream.for_each(TrainOneStep())), name="u", resources=WORKERS
        )
        compiled = plangraph.compile(plan)
        assert compiled.nodes["top_k"].params.k == 4  # type: ignore[union-attr]
        assert plangraph.compile(plan.to_json()).to_json() == compiled.to_json()
        assert describe_op(get_op("TopK"))["params"][0]["constraints"] == [">= 1"]
    finally:
        unregister_op("TopK")
        unregister_op("MinEpisodeReturn")
    with pytest.raises(ValueError, match="built-in"):
        unregister_op("TrainOneStep")
    # once unregistered, a plan naming it reports an unknown op instead of crashing
    assert [d.code for d in plangraph.analyze(plan).errors] == ["PG110", "PG110"]


def test_describe_gives_defaults_ranges_units() -> None:
    d = describe_op(get_op("StandardMetricsReporting"))
    rows = {p["name"]: p for p in d["params"]}
    assert rows["min_iter_time_s"]["default"] == 0.0
    assert rows["min_iter_time_s"]["constraints"] == [">= 0"]
    assert "Seconds" in rows["min_iter_time_s"]["description"]
    assert "Env steps" in rows["min_env_steps_per_iter"]["description"]
    assert d["resources"] == [{"param": "workers", "kind": "WorkerSet", "access": "read"}]
    c = describe_op(get_op("ConcatBatches"))
    assert c["params"][0] == {
        "name": "min_batch_size",
        "type": "int",
        "required": True,
        "default": None,
        "constraints": [">= 1", "<= 100000000"],
        "description": "Env steps (or agent steps) per emitted batch (at least).",
    }


def test_python_plan_with_user_op_loads_twice(tmp_path: Path) -> None:
    plan_file = tmp_path / "custom.py"
    plan_file.write_text(
        """
from pydantic import Field

from plangraph import Plan
from plangraph.ops import OpParams, ParallelRollouts, StandardMetricsReporting, register_op
from plangraph.ops import TrainOneStep, worker_set


@register_op(category="combine", apply="filter", inputs=["SampleBatch"], output="SampleBatch")
class KeepLongBatches(OpParams):
    '''Keep batches of at least ``min_rows`` rows.'''

    min_rows: int = Field(1, ge=1, description="Rows (env steps).")


train = ParallelRollouts().filter(KeepLongBatches(min_rows=8)).for_each(TrainOneStep())
plan = Plan.from_builder(
    StandardMetricsReporting(train),
    name="custom",
    resources={"workers": worker_set(policy={"algo": "a2c"})},
)
"""
    )
    try:
        for _ in range(2):
            c = plangraph.analyze(plan_file)
            assert c.diagnostics == ()
            assert c.nodes["keep_long_batches"].params.min_rows == 8  # type: ignore[union-attr]
    finally:
        unregister_op("KeepLongBatches")


def test_plain_text_and_summary_of_rst_docstrings() -> None:
    from plangraph.ops.describe import plain_text, summary

    assert plain_text("``n`` items, **mean**, *not* :class:`GradInfo`") == (
        "`n` items, mean, not `GradInfo`"
    )
    assert plain_text('positive numbers or "*"; 2*3*4') == 'positive numbers or "*"; 2*3*4'
    assert summary("Drive streams, e.g. a\nand ``b``. More.\n\nDetails.") == (
        "Drive streams, e.g. a and `b`."
    )
    assert summary("No full stop\nacross lines\n\nDetails.") == "No full stop across lines"
    # citations are not sentence ends
    assert summary("Targets (Sutton & Barto 2018, sec. 7.1; Horgan et al. 2018). More.") == (
        "Targets (Sutton & Barto 2018, sec. 7.1; Horgan et al. 2018)."
    )
    assert summary("") == ""


def test_a_dict_of_tagged_configs_reads_as_a_type_not_typings_repr() -> None:
    from plangraph.ops.describe import describe_params
    from plangraph.ops.resources import WorkerSetParams

    types = {row["name"]: row["type"] for row in describe_params(WorkerSetParams)}
    assert types["policies"] == 'dict[string, policy {"algo": ...}] | null'
    assert not any("typing" in t or "FieldInfo" in t for t in types.values())
