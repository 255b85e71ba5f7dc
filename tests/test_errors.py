"""One error tree: each phase raises its own subclass of ``plangraph.PlangraphError``."""

from __future__ import annotations

from pathlib import Path

import pytest

import plangraph
from plangraph.compiler.diagnostics import CODES, Diagnostic

ROOT = Path(__file__).resolve().parent.parent


def test_every_exported_error_is_in_the_tree() -> None:
    phases = {
        "PlanError": (ValueError,),
        "PlanValidationError": (plangraph.PlanError,),
        "PlanBuildError": (plangraph.PlanError,),
        "BuildError": (ValueError,),
        "RenderError": (),
        "OperatorError": (RuntimeError,),
        "StopCriterionError": (ValueError,),
        "CheckpointError": (ValueError,),
    }
    for name, bases in phases.items():
        cls = getattr(plangraph, name)
        assert issubclass(cls, plangraph.PlangraphError), name
        for base in bases:
            assert issubclass(cls, base), (name, base)


def test_validation_phase_raises_a_plan_error() -> None:
    with pytest.raises(plangraph.PlanError) as info:
        plangraph.compile({"name": "x", "nodes": {"a": {"op": "NoSuchOp"}}, "output": "a"})
    assert isinstance(info.value, plangraph.PlanValidationError)
    assert {d.code for d in info.value.diagnostics} >= {"PG110"}


def test_python_builder_misuse_raises_a_plan_error() -> None:
    from plangraph.ops import ConcatBatches, ParallelRollouts

    with pytest.raises(plangraph.PlanError):
        ParallelRollouts().for_each(ConcatBatches(min_batch_size=8))


def test_build_phase_raises_build_error_before_ray_starts() -> None:
    import ray

    compiled = plangraph.compile(ROOT / "plans" / "ppo.json")
    was_running = ray.is_initialized()
    with pytest.raises(plangraph.BuildError, match="CartPol-v1"):
        compiled.build(env="CartPol-v1")
    assert ray.is_initialized() == was_running


def test_render_phase_raises_render_error(tmp_path: Path) -> None:
    compiled = plangraph.analyze(ROOT / "plans" / "ppo.json")
    with pytest.raises(plangraph.RenderError):
        compiled.render(tmp_path / "plan.xyz")


def test_runtime_phase_raises_operator_error_naming_the_node() -> None:
    from plangraph.flow.local import LocalIterator

    def boom(x: int) -> int:
        raise ZeroDivisionError("no")

    it = LocalIterator.from_iterable([1]).for_each(boom, name="train")
    with pytest.raises(plangraph.OperatorError) as info:
        next(iter(it))
    assert info.value.node_id == "train"


def test_stop_phase_raises_stop_criterion_error() -> None:
    from plangraph.runtime.stopping import StopCriteria

    with pytest.raises(plangraph.StopCriterionError, match="did you mean"):
        StopCriteria.parse({"episode_return_maen": 475})


def test_severity_is_always_the_code_table_s() -> None:
    for code, (_name, severity, _doc) in CODES.items():
        assert Diagnostic(code, "message").severity == severity
    assert Diagnostic("PG161", "x").severity == "warning"
    assert not Diagnostic("PG161", "x").is_error
