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
        "WaitTimeoutError": (TimeoutError,),
    }
    for name, bases in phases.items():
        cls = getattr(plangraph, name)
        assert issubclass(cls, plangraph.PlangraphError), name
        for base in bases:
            assert issubclass(cls, base), (name, base)


def test_a_plan_node_s_timeout_is_an_operator_error_and_a_wait_timeout() -> None:
    """``OperatorTimeoutError`` names the node like every ``OperatorError``, and is caught
    by ``except WaitTimeoutError`` and ``except TimeoutError`` alike; it survives pickling
    (it crosses from shard actors to the driver)."""
    import pickle

    from plangraph.flow.errors import OperatorTimeoutError

    err = OperatorTimeoutError("rollouts", "OperatorTimeoutError: shard 1 ...", actor="a")
    assert isinstance(err, plangraph.OperatorError) and isinstance(err, plangraph.WaitTimeoutError)
    assert isinstance(err, TimeoutError) and isinstance(err, RuntimeError)
    assert str(err) == "plan node 'rollouts' failed on actor a: OperatorTimeoutError: shard 1 ..."
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is OperatorTimeoutError and str(back) == str(err)


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
        plangraph.build(compiled, env="CartPol-v1")
    assert ray.is_initialized() == was_running


@pytest.mark.parametrize("prioritized", [False, True])
def test_build_refuses_a_replay_buffer_that_cannot_fit_before_ray_starts(
    prioritized: bool,
) -> None:
    """1e10 env steps of CartPole DQN transitions (n_step 3): 78 bytes each (obs and
    next_obs 2 x 16, actions, eps_id, t, n_steps 4 x 8, rewards 4, two flags, the int64
    insertion id), about 726 GiB, plus 2 x 256 GiB of PER trees."""
    import ray

    compiled = plangraph.compile(
        ROOT / "plans" / "dqn.json",
        config={"buffer_size": 10**10, "prioritized_replay": prioritized},
    )
    was_running = ray.is_initialized()
    with pytest.raises(plangraph.BuildError) as info:
        plangraph.build(compiled)
    assert ray.is_initialized() == was_running
    message = str(info.value)
    gib = "1.2 TiB" if prioritized else "726.4 GiB"
    assert f"replay buffer 'replay' of capacity 10,000,000,000 env steps needs about {gib}" in (
        message
    )
    assert "(78 bytes per env step)" in message
    assert "--set buffer_size=N" in message and "env steps fit" in message
    assert "config={'buffer_size': N} from Python" in message


def test_replay_memory_estimate_is_compared_with_the_given_memory() -> None:
    from plangraph.runtime.memory_check import check_replay_memory

    compiled = plangraph.compile(ROOT / "plans" / "dqn.json", config={"buffer_size": 1000})
    params = {rid: res.params for rid, res in compiled.resources.items()}
    (estimate,) = check_replay_memory(compiled, params, available=78_000)
    assert (estimate.row_bytes, estimate.nbytes) == (78, 78_000)
    with pytest.raises(plangraph.BuildError, match="about 999 env steps fit"):
        check_replay_memory(compiled, params, available=77_999)


def test_render_phase_raises_render_error(tmp_path: Path) -> None:
    compiled = plangraph.analyze(ROOT / "plans" / "ppo.json")
    with pytest.raises(plangraph.RenderError):
        plangraph.render(compiled, tmp_path / "plan.xyz")


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


def test_registry_errors_are_in_the_tree() -> None:
    from plangraph.ops import get_op, register_op

    with pytest.raises(plangraph.UnknownOperatorError, match="did you mean ConcatBatches") as info:
        get_op("ConcatBatchs")
    assert isinstance(info.value, KeyError)  # callers that catch KeyError keep working
    with pytest.raises(plangraph.RegistrationError, match="built-in"):
        register_op("Batch", category="combine", inputs=["T"], output="T")


def test_missing_implementation_is_refused_before_any_actor_starts() -> None:
    import ray

    from plangraph.ops import register_op, unregister_op

    register_op(
        "NoImplOp", category="combine", inputs=["SampleBatch"], output="SampleBatch", replace=True
    )
    try:
        plan = {
            "name": "noimpl",
            "resources": {"workers": {"kind": "WorkerSet", "params": {"policy": {"algo": "a2c"}}}},
            "nodes": {
                "rollouts": {"op": "ParallelRollouts"},
                "noimpl": {"op": "NoImplOp", "inputs": ["rollouts"]},
                "train": {"op": "TrainOneStep", "inputs": ["noimpl"]},
                "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"]},
            },
            "output": "metrics",
        }
        was_running = ray.is_initialized()
        with pytest.raises(plangraph.BuildError, match=r"'noimpl'.*register_impl"):
            plangraph.build(plangraph.compile(plan))
        assert ray.is_initialized() == was_running
    finally:
        unregister_op("NoImplOp")


def test_nested_stop_keys_need_a_sub_key() -> None:
    from plangraph.runtime.stopping import StopCriteria

    with pytest.raises(plangraph.StopCriterionError, match="learner/kl"):
        StopCriteria.parse({"learner": 1})
    assert StopCriteria.parse({"learner/kl": 0.1}).thresholds == {"learner/kl": 0.1}


def test_mixin_replay_ring_is_counted_by_the_replay_memory_check() -> None:
    from plangraph.rl.rollout_worker import RolloutWorker
    from plangraph.rl.wrappers import WrappedEnvCreator
    from plangraph.runtime.memory_check import check_replay_memory, replay_memory_diagnostics

    compiled = plangraph.compile(
        ROOT / "plans" / "impala_mixin.json", config={"replay_buffer_num_slots": 4}
    )
    params = {rid: res.params for rid, res in compiled.resources.items()}
    (estimate,) = check_replay_memory(compiled, params, available=10**9)
    assert (estimate.kind, estimate.resource, estimate.slots) == ("MixInReplay", "mixin", 4)
    # Each slot is one async fragment: 8 sub-envs x 32 steps.
    assert estimate.capacity == 4 * 256
    # The bytes per env step are those of a fragment the plan's rollout worker samples.
    ws = params["workers"]
    worker = RolloutWorker(WrappedEnvCreator(ws.env, ws.wrappers), 2, 16, ws.policy)
    fragment = worker.sample()
    assert estimate.row_bytes == fragment.size_bytes() // fragment.count
    assert estimate.nbytes == 4 * 256 * estimate.row_bytes
    with pytest.raises(plangraph.BuildError, match=r"MixInReplay 'mixin' .* about 3 slots fit"):
        check_replay_memory(compiled, params, available=estimate.nbytes - 1)
    (diag,) = replay_memory_diagnostics(compiled, [estimate], estimate.nbytes - 1, "it has")
    assert (diag.code, diag.node, diag.pointer) == (
        "PG185",
        "mixin",
        "/nodes/mixin/params/num_slots",
    )
