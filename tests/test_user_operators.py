"""User operators get what a built-in gets (issue 35): the run seed, a per-node RNG, the
run's counters, checkpointed state, and the sources' counting call.

The operators are in ``tests/user_ops.py``, a module outside ``plangraph/``, as a user's
would be. A stateful one (``UserMixInReplay``: a buffer of batches and its own RNG) stopped
and resumed from a checkpoint continues exactly as a run never stopped; one that keeps
state without saving it gets a ``ResumeWarning`` when a checkpoint is written; a user
source counts env steps and episodes through ``op.record_batch``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import plangraph
import tests.user_ops  # noqa: F401  (registers the user operators)
from plangraph.errors import BuildError, RegistrationError
from plangraph.rl.worker_set import ResumeWarning
from plangraph.runtime.algorithm import Checkpoint
from plangraph.runtime.implementations import held_state, register_impl

ITERATIONS = 4
# Result keys that measure wall time; everything else must match bit for bit.
TIME_KEYS = {"time_this_iter_s", "time_total_s", "timestamp", "env_steps_per_s"}
TIME_KEYS |= {"env_steps_per_s_total", "timers"}


def _plan(op: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": f"user_{op.lower()}",
        "resources": {
            "workers": {
                "kind": "WorkerSet",
                "params": {
                    "num_workers": 1,
                    "num_envs_per_worker": 2,
                    "rollout_fragment_length": 16,
                    "policy": {"algo": "a2c"},
                },
            }
        },
        "nodes": {
            "rollouts": {"op": "ParallelRollouts"},
            "mix": {"op": op, "inputs": ["rollouts"], "params": params or {}},
            "train": {"op": "TrainOneStep", "inputs": ["mix"]},
            "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"]},
        },
        "output": "metrics",
    }


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in TIME_KEYS}


def _learner_weights(algo: Any) -> dict[str, bytes]:
    weights = algo.ctx.worker_sets["workers"].local_policy.get_state()["weights"]
    return {name: np.asarray(w).tobytes() for name, w in sorted(weights.items())}


def test_a_stateful_user_operator_resumes_exactly(ray_session: None, tmp_path: Path) -> None:
    compiled = plangraph.compile(_plan("UserMixInReplay", {"capacity": 3, "replay_ratio": 2}))
    with plangraph.build(compiled, seed=7) as algo:
        straight = [_comparable(algo.train()) for _ in range(ITERATIONS)]
        want_weights = _learner_weights(algo)
        want_mix = algo.ctx.operator_states["mix"].get_state()
    ckpt = tmp_path / "ckpt"
    with plangraph.build(compiled, seed=7) as algo:
        for _ in range(ITERATIONS // 2):
            algo.train()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResumeWarning)  # everything it keeps is saved
            algo.save(ckpt)
    # The checkpoint holds the operator's buffer and RNG as data (state.json + arrays.npz).
    saved = Checkpoint.load(ckpt).state["operators"]["mix"]
    assert sorted(saved) == ["buffer", "rng"] and len(saved["buffer"]) == 2
    with plangraph.build(compiled, seed=7) as algo:
        algo.restore(ckpt)
        resumed = [_comparable(algo.train()) for _ in range(ITERATIONS - ITERATIONS // 2)]
        got_weights = _learner_weights(algo)
        got_mix = algo.ctx.operator_states["mix"].get_state()
    assert resumed == straight[ITERATIONS // 2 :]
    assert got_weights == want_weights
    assert got_mix["rng"] == want_mix["rng"]
    assert len(got_mix["buffer"]) == len(want_mix["buffer"]) == 3


def test_the_replayed_batches_change_the_run(ray_session: None) -> None:
    """The resume test above is not vacuous: without its RNG state the run differs (the
    replayed batches the learner trains on depend on the operator's draws)."""
    compiled = plangraph.compile(_plan("UserMixInReplay", {"capacity": 3, "replay_ratio": 2}))
    runs = []
    for reseed in (False, True):
        with plangraph.build(compiled, seed=7) as algo:
            algo.train()
            if reseed:  # what a resume that lost the RNG would do
                state = algo.ctx.operator_states["mix"].get_state()
                state["rng"] = np.random.default_rng(123).bit_generator.state
                algo.ctx.operator_states["mix"].set_state(state)
            algo.train()
            algo.train()
            runs.append(_learner_weights(algo))
    assert runs[0] != runs[1]


def test_a_user_operator_with_unsaved_state_warns_at_checkpoint(
    ray_session: None, tmp_path: Path
) -> None:
    compiled = plangraph.compile(_plan("MixInReplayUnsaved"))
    with plangraph.build(compiled, seed=0) as algo:
        algo.train()
        with pytest.warns(ResumeWarning, match=r"node 'mix': its item function holds buffer"):
            algo.save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "state.json").is_file()  # still written


def test_a_user_source_counts_env_steps_and_episodes(ray_session: None, tmp_path: Path) -> None:
    plan = {
        "name": "user_source",
        "resources": {
            "workers": {
                "kind": "WorkerSet",
                "params": {"num_workers": 0, "policy": {"algo": "a2c"}},
            }
        },
        "nodes": {
            "random": {"op": "RandomCartPole", "params": {"fragment": 100}},
            "metrics": {"op": "StandardMetricsReporting", "inputs": ["random"]},
        },
        "output": "metrics",
    }
    with plangraph.build(plangraph.compile(plan), seed=3) as algo:
        results = [algo.train() for _ in range(3)]
        window = algo.run_state.episodes
        assert results[-1]["num_env_steps_sampled"] == 100 * results[-1]["iteration"] > 0
        # Random CartPole episodes last about 22 steps: several ended, all counted.
        assert results[-1]["episodes_total"] == window.total > 0
        assert results[-1]["episode_len_mean"] == pytest.approx(np.mean(window.lengths))
        # It keeps state (its RNG among it) and saves nothing: the checkpoint says so.
        with pytest.warns(ResumeWarning, match=r"node 'random': .*rng \(Generator\)"):
            algo.save(tmp_path / "ckpt")


def test_the_per_node_rng_is_seeded_by_the_run_seed_and_the_node(ray_session: None) -> None:
    from plangraph.runtime.build_context import BuildContext

    def draws(seed: int, node: str) -> list[int]:
        ctx = BuildContext(
            compiled=None,  # type: ignore[arg-type]
            seed=seed,
            worker_sets={},
            buffers={},
            run_state=None,  # type: ignore[arg-type]
        )
        return [int(x) for x in ctx.node_rng(node).integers(2**31, size=4)]

    assert draws(0, "mix") == draws(0, "mix")
    assert draws(0, "mix") != draws(1, "mix")
    assert draws(0, "mix") != draws(0, "mix2")


def test_a_node_that_took_its_rng_without_saving_it_warns(ray_session: None) -> None:
    """A whole-stream lowering (``register_lowering``) cannot be looked into: taking
    ``ctx.node_rng`` without ``register_operator_state`` is what marks it stateful."""
    from plangraph.runtime.build_context import BuildContext
    from plangraph.runtime.run_state import RunState

    ctx = BuildContext(
        compiled=None,  # type: ignore[arg-type]
        seed=0,
        worker_sets={},
        buffers={},
        run_state=RunState(),
    )
    ctx.node_rng("shuffle")
    ctx.node_rng("saved")
    ctx.register_operator_state("saved", dict, lambda state: None)
    with pytest.warns(ResumeWarning) as caught:
        ctx.get_state()
    assert [str(w.message).split(":")[0] for w in caught] == ["node 'shuffle'"]
    assert "it draws from its per-node RNG" in str(caught[0].message)


def test_record_sampled_refuses_what_is_not_a_count(ray_session: None) -> None:
    from plangraph.runtime.build_context import BuildContext
    from plangraph.runtime.run_state import RunState

    ctx = BuildContext(
        compiled=None,  # type: ignore[arg-type]
        seed=0,
        worker_sets={},
        buffers={},
        run_state=RunState(),
    )
    ctx.record_sampled(5, [1.0, 2.0], [3, 4])
    assert ctx.run_state.counters["num_env_steps_sampled"] == 5
    assert ctx.run_state.episodes.total == 2
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="env_steps"):
            ctx.record_sampled(bad)
    with pytest.raises(ValueError, match="same size"):
        ctx.record_sampled(1, [1.0], [])


def test_held_state_sees_closures_and_objects() -> None:
    buf: list[int] = []
    limit = 3

    def keeps(item: Any) -> Any:
        buf.append(item)
        return item

    def pure(item: Any) -> Any:
        return min(item, limit)

    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def __call__(self, item: Any) -> Any:
            self.n += 1
            return item

    assert held_state(keeps) == "its item function holds buf (list)"
    assert held_state(pure) is None
    assert held_state(Counter()) == "its Counter object keeps attributes n"
    assert held_state(Counter().__call__) == "its Counter object keeps attributes n"


def test_a_factory_of_another_shape_is_refused() -> None:
    with pytest.raises(RegistrationError, match=r"\(params\) or \(params, op\)"):

        @register_impl("NoSuchOp")
        def factory(a: Any, b: Any, c: Any) -> Any:
            return a


def test_a_pure_operator_on_the_workers_may_not_keep_state() -> None:
    from plangraph.runtime.implementations import OperatorContext

    class Build:
        seed = 0

    op = OperatorContext("clip", Build(), on_workers=True)  # type: ignore[arg-type]
    with pytest.raises(BuildError, match=r"pure=True.*rollout workers"):
        op.save_state(dict, lambda state: None)
    with pytest.raises(BuildError, match="cannot keep an RNG"):
        _ = op.rng
