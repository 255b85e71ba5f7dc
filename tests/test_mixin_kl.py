"""The built-in ``MixInReplay`` and ``UpdateKL`` operators (issue 36) and their plans.

``MixInReplay`` (RLlib 1.x ``rllib/execution/replay_ops.py``): each incoming batch is stored
in a ring of ``num_slots`` batches and emitted with ``k`` batches replayed uniformly from it,
``k`` drawn as RLlib's ``while random() < f: f -= 1`` (mean ``replay_proportion``); the draws
come from the node's own generator (run seed and node id) and are checkpointed with the
ring. ``UpdateKL`` (RLlib's PPO ``UpdateKL`` / ``update_kl``) adapts the PPO learner's
``kl_coeff`` after each training step; the PPO loss gains ``kl_coeff * KL(pi_old || pi)``,
checked here against an independent torch computation. ``plans/impala_mixin`` and
``plans/ppo_kl`` run end to end; their learning runs (seed 0) are ``slow``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import plangraph
import plangraph.runtime.ops  # registers the built-in lowerings (LOWERINGS)
from plangraph.flow.local import LocalIterator
from plangraph.ops.builtin.replay import MixInReplayParams
from plangraph.rl import SampleBatch
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.implementations import LOWERINGS
from plangraph.runtime.run_state import RunState

PLANS = Path(__file__).resolve().parent.parent / "plans"
TIME_KEYS = {"time_this_iter_s", "time_total_s", "timestamp", "env_steps_per_s"}
TIME_KEYS |= {"env_steps_per_s_total", "timers"}


# -- MixInReplay, the operator alone ---------------------------------------------------------


def _batch(i: int, rows: int = 4) -> SampleBatch:
    """Batch number ``i``: every ``obs`` row holds ``i`` (float32 ``[rows, 2]``), one episode."""
    return SampleBatch(
        {"obs": np.full((rows, 2), i, np.float32), "rewards": np.ones(rows, np.float32)},
        episode_returns=[float(i)],
        episode_lengths=[rows],
    )


def _mixer(
    seed: int = 0,
    node_id: str = "mixin",
    num_slots: int = 3,
    proportion: float = 1.0,
    inputs: range = range(10_000),
) -> tuple[Any, BuildContext]:
    """The MixInReplay lowering over the stream ``_batch(i) for i in inputs``."""
    ctx = BuildContext(compiled=None, seed=seed, worker_sets={}, buffers={}, run_state=RunState())  # type: ignore[arg-type]
    node = SimpleNamespace(
        id=node_id,
        params=MixInReplayParams(num_slots=num_slots, replay_proportion=proportion),
    )
    source = LocalIterator.from_iterable(lambda: (_batch(i) for i in inputs), name="source")
    return LOWERINGS["MixInReplay"](node, [source], ctx), ctx


def _groups(items: list[SampleBatch]) -> list[list[int]]:
    """Outputs grouped per input: ``[[i, replayed ids...], ...]`` (a fresh batch has an
    episode, a replayed one none)."""
    groups: list[list[int]] = []
    for b in items:
        i = int(b["obs"][0, 0])
        if b.episode_returns.size:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def test_mixin_with_proportion_one_replays_exactly_one_stored_batch_per_input() -> None:
    it, ctx = _mixer(num_slots=3, proportion=1.0, inputs=range(50))
    items = list(it)
    groups = _groups(items)
    assert [g[0] for g in groups] == list(range(50))  # every input once, in order
    assert all(len(g) == 2 for g in groups)  # with it, exactly one replay
    for i, replayed in groups:
        # From the ring: the last num_slots inputs, this one included (stored first, as RLlib).
        assert max(0, i - 2) <= replayed <= i
    # Replays are whole batches without episode statistics; they are counted.
    assert all(b.count == 4 for b in items)
    assert it.shared_metrics.get().counters["num_env_steps_replayed"] == 50 * 4
    # The ring holds num_slots batches, no more.
    state = ctx.operator_states["mixin"].get_state()
    assert len(state["slots"]) == 3
    assert sorted(int(s["columns"]["obs"][0, 0]) for s in state["slots"]) == [47, 48, 49]


@pytest.mark.parametrize("proportion", [0.0, 0.3, 2.5])
def test_mixin_replays_replay_proportion_batches_per_input_on_average(proportion: float) -> None:
    it, _ = _mixer(num_slots=5, proportion=proportion, inputs=range(2000))
    counts = np.array([len(g) - 1 for g in _groups(list(it))])
    assert counts.size == 2000
    # RLlib's draw: floor(f) replays and one more with probability f - floor(f).
    lo = int(np.floor(proportion))
    assert set(counts.tolist()) <= {lo, lo + 1}
    assert counts.mean() == pytest.approx(proportion, abs=0.05)


def test_mixin_draws_depend_only_on_the_seed_and_the_node_id() -> None:
    def picks(seed: int, node_id: str) -> list[list[int]]:
        it, _ = _mixer(seed=seed, node_id=node_id, num_slots=8, proportion=1.5, inputs=range(100))
        return _groups(list(it))

    first = picks(0, "mixin")
    assert picks(0, "mixin") == first  # the same run seed and node: the same draws
    assert picks(1, "mixin") != first  # another run seed
    assert picks(0, "other") != first  # another node of the same run


def test_mixin_state_round_trip_continues_exactly() -> None:
    straight, _ = _mixer(seed=3, num_slots=4, proportion=1.5, inputs=range(150))
    want = _groups(list(straight))
    head_it, head_ctx = _mixer(seed=3, num_slots=4, proportion=1.5, inputs=range(60))
    head = _groups(list(head_it))
    saved = copy.deepcopy(head_ctx.operator_states["mixin"].get_state())
    assert len(saved["slots"]) == 4
    json.dumps({k: v for k, v in saved.items() if k != "slots"})  # the rest is plain data
    # Another run seed: everything the continuation draws comes from the restored state.
    tail_it, tail_ctx = _mixer(seed=99, num_slots=4, proportion=1.5, inputs=range(60, 150))
    tail_ctx.operator_states["mixin"].set_state(saved)
    assert head + _groups(list(tail_it)) == want
    # Not vacuous: without the state the continuation differs.
    fresh_it, _ = _mixer(seed=3, num_slots=4, proportion=1.5, inputs=range(60, 150))
    assert head + _groups(list(fresh_it)) != want


def test_mixin_refuses_bad_params_with_located_diagnostics() -> None:
    plan = json.loads((PLANS / "impala_mixin.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    plan["nodes"]["mixin"]["params"] = {"num_slots": 0, "replay_proportion": -0.5}
    compiled = plangraph.analyze(plan)
    errors = {(d.code, d.node, d.pointer) for d in compiled.diagnostics if d.is_error}
    assert ("PG140", "mixin", "/nodes/mixin/params/num_slots") in errors
    assert ("PG140", "mixin", "/nodes/mixin/params/replay_proportion") in errors
    plan["nodes"]["mixin"]["params"] = {"num_slots": 4, "replay_proportion": float("nan")}
    compiled = plangraph.analyze(plan)
    assert any(
        d.pointer == "/nodes/mixin/params/replay_proportion"
        for d in compiled.diagnostics
        if d.is_error
    )


def test_mixin_feeding_a_learner_without_v_trace_is_refused() -> None:
    """Replayed batches are old: only a loss that corrects for that (V-trace) may train on
    them; A2C's stale GAE advantages would train silently on stale data (PG171)."""
    plan = _vtrace_mixin_plan()
    plan["resources"]["workers"]["params"]["policy"] = {"algo": "a2c"}
    found = [d for d in plangraph.analyze(plan).diagnostics if d.code == "PG171"]
    assert [(d.node, d.pointer) for d in found] == [("train", "/nodes/train/inputs")]
    assert "MixInReplay 'mixin'" in found[0].message and "appo, impala" in found[0].hint
    assert not [d for d in plangraph.analyze(_vtrace_mixin_plan()).diagnostics if d.is_error]


# -- MixInReplay in a run ----------------------------------------------------------------------


def _vtrace_mixin_plan(proportion: float = 1.0) -> dict[str, Any]:
    """A small bulk-sync IMPALA plan with MixInReplay (deterministic: resumable bit for bit)."""
    return {
        "name": "impala_mixin_sync",
        "resources": {
            "workers": {
                "kind": "WorkerSet",
                "params": {
                    "num_workers": 1,
                    "num_envs_per_worker": 2,
                    "rollout_fragment_length": 16,
                    "policy": {"algo": "impala"},
                },
            }
        },
        "nodes": {
            "rollouts": {"op": "ParallelRollouts", "params": {"mode": "bulk_sync"}},
            "mixin": {
                "op": "MixInReplay",
                "inputs": ["rollouts"],
                "params": {"num_slots": 3, "replay_proportion": proportion},
            },
            "concat": {
                "op": "ConcatBatches",
                "inputs": ["mixin"],
                "params": {"min_batch_size": 64},
            },
            "train": {"op": "TrainOneStep", "inputs": ["concat"]},
            "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"]},
        },
        "output": "metrics",
    }


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in TIME_KEYS}


def _learner_weights(algo: Any) -> dict[str, bytes]:
    weights = algo.ctx.worker_sets["workers"].local_policy.get_state()["weights"]
    return {name: np.asarray(w).tobytes() for name, w in sorted(weights.items())}


@pytest.mark.usefixtures("ray_session")
def test_mixin_run_trains_twice_the_sampled_rows_and_resumes_exactly(tmp_path: Path) -> None:
    compiled = plangraph.compile(_vtrace_mixin_plan())
    iterations = 4
    with plangraph.build(compiled, seed=5) as algo:
        straight = [_comparable(algo.train()) for _ in range(iterations)]
        want_weights = _learner_weights(algo)
    last = straight[-1]
    # Each 32-row fragment is emitted with one replayed fragment: 64-row train batches of
    # one fresh and one replayed fragment, so twice the sampled rows are trained.
    assert last["num_env_steps_trained"] == 2 * last["num_env_steps_sampled"] > 0
    assert last["counters"]["num_env_steps_replayed"] == last["num_env_steps_sampled"]
    ckpt = tmp_path / "ckpt"
    with plangraph.build(compiled, seed=5) as algo:
        for _ in range(iterations // 2):
            algo.train()
        algo.save(ckpt)
    with plangraph.build(compiled, seed=5) as algo:
        algo.restore(ckpt)
        resumed = [_comparable(algo.train()) for _ in range(iterations - iterations // 2)]
        got_weights = _learner_weights(algo)
    assert resumed == straight[iterations // 2 :]
    assert got_weights == want_weights


@pytest.mark.usefixtures("ray_session")
def test_impala_mixin_plan_runs_and_counts_the_replayed_rows() -> None:
    compiled = plangraph.compile(
        PLANS / "impala_mixin.json", config={"min_env_steps_per_iter": 1024}
    )
    with plangraph.build(compiled, seed=0) as algo:
        result = algo.train()
        result = algo.train()
    sampled = result["num_env_steps_sampled"]
    assert result["counters"]["num_env_steps_replayed"] == sampled > 0
    # Asynchronous: the learner thread may still hold a few batches, never more than it got.
    assert sampled < result["num_env_steps_trained"] <= 2 * sampled
    assert "policy_lag" in result["learner"]


# -- UpdateKL and PPO's KL penalty ---------------------------------------------------------


def _ppo(**config: Any) -> Any:
    from plangraph.algorithms.ppo.config import PPOConfig
    from plangraph.algorithms.ppo.policy import PPOPolicy

    env = gym.make("CartPole-v1")
    return PPOPolicy(env.observation_space, env.action_space, PPOConfig(**config), seed=0)


@pytest.mark.parametrize(
    ("kl", "factor"),
    [(0.05, 1.5), (0.0201, 1.5), (0.02, 1.0), (0.01, 1.0), (0.005, 1.0), (0.0049, 0.5), (0.0, 0.5)],
)
def test_update_kl_moves_the_coefficient_by_rllibs_rule(kl: float, factor: float) -> None:
    policy = _ppo(kl_coeff=0.2, kl_target=0.01)
    assert policy.update_kl(kl) == pytest.approx(0.2 * factor)
    assert policy.kl_coeff == pytest.approx(0.2 * factor)
    # Kept in the policy state that checkpoints save, and restored from it.
    state = policy.get_state()
    other = _ppo(kl_coeff=0.2, kl_target=0.01)
    other.set_state(state)
    assert other.kl_coeff == policy.kl_coeff


def _loss_batch(policy: Any, rows: int = 64) -> SampleBatch:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(rows, 4)).astype(np.float32)
    # A behaviour distribution other than the policy's own, so that the KL is not 0.
    behaviour = rng.normal(size=(rows, 2)).astype(np.float32)
    actions = rng.integers(2, size=rows)
    logp = torch.log_softmax(torch.from_numpy(behaviour), -1)[torch.arange(rows), actions]
    return SampleBatch(
        {
            "obs": obs,
            "actions": actions.astype(np.int64),
            "action_logp": logp.numpy().astype(np.float32),
            "action_dist_inputs": behaviour,
            "vf_preds": rng.normal(size=rows).astype(np.float32),
            "advantages": rng.normal(size=rows).astype(np.float32),
            "value_targets": rng.normal(size=rows).astype(np.float32),
        }
    )


def test_ppo_loss_adds_kl_coeff_times_the_kl_to_the_behaviour_distribution() -> None:
    plain = _ppo(kl_coeff=0.0)
    penalised = _ppo(kl_coeff=0.3, kl_target=0.01)
    batch = _loss_batch(plain)
    t = plain.tensors(batch)
    base, base_stats = plain.compute_loss(t)
    with_kl, stats = penalised.compute_loss(penalised.tensors(batch))
    # The independent KL(pi_old || pi) of two categoricals, from the logits.
    with torch.no_grad():
        logits = plain.model.pi(t["obs"])
        logq = torch.log_softmax(logits, -1)
        logp_old = torch.log_softmax(torch.from_numpy(batch["action_dist_inputs"]), -1)
        kl = (logp_old.exp() * (logp_old - logq)).sum(-1).mean()
    assert kl.item() > 1e-3
    assert with_kl.item() - base.item() == pytest.approx(0.3 * kl.item(), rel=1e-4, abs=1e-6)
    assert stats["kl"] == pytest.approx(kl.item(), rel=1e-5)
    assert stats["kl_coeff"] == 0.3
    assert "kl_coeff" not in base_stats  # no penalty: the stats (and the loss) as before
    # The coefficient the loss uses is the policy's current one (UpdateKL moves it).
    penalised.kl_coeff = 0.45
    moved, _ = penalised.compute_loss(penalised.tensors(batch))
    assert moved.item() - base.item() == pytest.approx(0.45 * kl.item(), rel=1e-4, abs=1e-6)
    # Its gradient flows through the KL term too.
    penalised.kl_coeff = 0.3
    grads_kl, _ = penalised.compute_gradients(batch)
    grads_plain, _ = plain.compute_gradients(batch)
    assert any(not np.allclose(a, b) for a, b in zip(grads_kl, grads_plain, strict=True))


@pytest.mark.usefixtures("ray_session")
def test_ppo_kl_plan_adapts_the_coefficient_and_checkpoints_it(tmp_path: Path) -> None:
    compiled = plangraph.compile(
        PLANS / "ppo_kl.json", config={"num_workers": 1, "train_batch_size": 256}
    )
    coeff = 0.2
    with plangraph.build(compiled, seed=0) as algo:
        for _ in range(3):
            result = algo.train()
            kl = result["learner"]["kl"]
            coeff = coeff * 1.5 if kl > 0.02 else coeff * 0.5 if kl < 0.005 else coeff
            assert result["learner"]["kl_coeff"] == pytest.approx(coeff)
        policy = algo.ctx.worker_sets["workers"].local_policy
        assert policy.kl_coeff == pytest.approx(coeff)
        algo.save(tmp_path / "ckpt")
    with plangraph.build(compiled, seed=0) as algo:
        algo.restore(tmp_path / "ckpt")
        assert algo.ctx.worker_sets["workers"].local_policy.kl_coeff == pytest.approx(coeff)


@pytest.mark.usefixtures("ray_session")
def test_update_kl_adapts_each_policy_of_a_multi_agent_worker_set() -> None:
    plan = json.loads((PLANS / "ppo_multiagent.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    plan["config"].update(num_workers=1, train_batch_size=256, num_sgd_iter=2)
    plan["resources"]["workers"]["params"]["policies"]["ppo_policy"]["kl_coeff"] = 0.2
    plan["nodes"]["update_kl"] = {"op": "UpdateKL", "inputs": ["train"]}
    plan["nodes"]["metrics"]["inputs"] = ["update_kl"]
    with plangraph.build(plangraph.compile(plan), seed=0) as algo:
        result = algo.train()
        policy = algo.ctx.worker_sets["workers"].local_policy["ppo_policy"]
    learner = result["policies"]["ppo_policy"]["learner"]
    kl = learner["kl"]
    want = 0.2 * 1.5 if kl > 0.02 else 0.2 * 0.5 if kl < 0.005 else 0.2
    assert learner["kl_coeff"] == pytest.approx(want)
    assert policy.kl_coeff == pytest.approx(want)


def test_update_kl_needs_a_policy_with_a_kl_penalty() -> None:
    plan = json.loads((PLANS / "ppo_kl.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    plan["resources"]["workers"]["params"]["policy"] = {"algo": "a2c"}
    compiled = plangraph.analyze(plan)
    found = [d for d in compiled.diagnostics if d.is_error and d.node == "update_kl"]
    assert [d.code for d in found] == ["PG170"]
    assert "KL penalty" in found[0].message and "ppo" in found[0].hint


# -- learning (slow) ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize(("plan", "budget"), [("ppo_kl", 300_000), ("impala_mixin", 1_000_000)])
def test_plan_solves_cartpole(plan: str, budget: int) -> None:
    algo = plangraph.build(
        plangraph.compile(PLANS / f"{plan}.json"), env="CartPole-v1", num_workers=2, seed=0
    )
    try:
        result = algo.run(stop={"episode_return_mean": 475.0, "num_env_steps_sampled": budget})
    finally:
        algo.stop()
    ret, steps = result.get("episode_return_mean"), result["num_env_steps_sampled"]
    assert ret is not None and ret >= 475.0 and steps <= budget, (plan, ret, steps)
    if plan == "impala_mixin":  # replay_proportion 1.0: about twice the sampled rows trained
        assert 1.5 * steps <= result["num_env_steps_trained"] <= 2 * steps
