"""Open algorithms: a user's model type and a user's algorithm (``tests/fixtures/own_algo``,
written on plangraph's public API only) validate, train on remote rollout workers, save,
resume and evaluate like the built-ins; unknown names are refused before launch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import plangraph
from plangraph.commands.user_modules import import_user_modules

ROOT = Path(__file__).resolve().parent.parent
MY_ALGOS = ROOT / "tests" / "fixtures" / "own_algo" / "my_algos.py"


def plangraph_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plangraph", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _plan(policy: dict[str, Any], **config: Any) -> dict[str, Any]:
    """plans/ppo.json with ``policy`` as the worker set's policy and ``config`` merged."""
    plan = json.loads((ROOT / "plans" / "ppo.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    plan["config"].update(config)
    plan["resources"]["workers"]["params"]["policy"] = policy
    return plan


def _write(tmp_path: Path, plan: dict[str, Any]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan, indent=2), encoding="utf-8")
    return path


def test_ppo_with_a_user_model_trains_resumes_and_evaluates_from_a_json_plan(
    tmp_path: Path,
) -> None:
    ppo = _plan(
        {
            "algo": "ppo",
            "lr": "${lr}",
            "gamma": "${gamma}",
            "gae_lambda": "${gae_lambda}",
            "model": {"type": "gated_mlp", "width": 32, "depth": 2},
        }
    )
    plan = _write(tmp_path, ppo)
    run_dir = tmp_path / "run"
    trained = plangraph_cli(
        "run", str(plan), "--import", str(MY_ALGOS), "--out", str(run_dir),
        "--stop", "episode_return_mean=150", "--max-iterations", "60",
        "--checkpoint-every", "1", "--seed", "0", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    lines = [json.loads(x) for x in (run_dir / "result.jsonl").read_text().splitlines()]
    assert lines[-1]["episode_return_mean"] >= 150, lines[-1]["episode_return_mean"]
    saved = json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))
    model = saved["resources"]["workers"]["params"]["policy"]["model"]
    assert model == {"type": "gated_mlp", "width": 32, "depth": 2}
    # Two remote rollout workers acted with the user's network (its weights reach them).
    assert ppo["config"]["num_workers"] == 2

    resumed = plangraph_cli(
        "run", "--import", str(MY_ALGOS), "--resume", str(run_dir),
        "--stop", f"iteration={len(lines) + 1}", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = [json.loads(x) for x in (run_dir / "result.jsonl").read_text().splitlines()]
    assert after[-1]["iteration"] == len(lines) + 1

    played = plangraph_cli(
        "eval", str(run_dir), "--import", str(MY_ALGOS), "--episodes", "3", cwd=tmp_path
    )
    assert played.returncode == 0, played.stderr[-3000:]
    assert "return" in played.stdout


@pytest.mark.usefixtures("ray_session")
def test_a_user_algorithm_learns_on_two_remote_workers() -> None:
    import_user_modules([str(MY_ALGOS)])
    plan = _plan({"algo": "reinforce", "gamma": "${gamma}"}, num_sgd_iter=1, sgd_minibatch_size=0)
    compiled = plangraph.compile(plangraph.Plan.model_validate(plan))
    with plangraph.build(compiled, seed=0) as algo:
        ws = algo.ctx.worker_sets["workers"]
        assert len(ws.remote_workers) == 2
        assert type(ws.local_policy).__name__ == "ReinforcePolicy"
        best = 0.0
        for _ in range(80):
            result = algo.train()
            best = max(best, result["episode_return_mean"] or 0.0)
            if best >= 100:
                break
    assert best >= 100, best


def test_unknown_algorithms_and_settings_are_refused_with_a_did_you_mean(tmp_path: Path) -> None:
    plan = _write(tmp_path, _plan({"algo": "reinforse"}))
    refused = plangraph_cli("validate", str(plan), "--import", str(MY_ALGOS), cwd=tmp_path)
    assert refused.returncode != 0
    assert "unknown algorithm 'reinforse' (did you mean 'reinforce'?)" in refused.stdout
    assert "/resources/workers/params/policy/algo" in refused.stdout

    plan = _write(tmp_path, _plan({"algo": "reinforce", "gama": 0.9}))
    refused = plangraph_cli("validate", str(plan), "--import", str(MY_ALGOS), cwd=tmp_path)
    assert refused.returncode != 0
    assert "gama" in refused.stdout and "gamma" in refused.stdout

    plan = _write(tmp_path, _plan({"algo": "ppo", "model": {"type": "gated_mpl"}}))
    refused = plangraph_cli("validate", str(plan), "--import", str(MY_ALGOS), cwd=tmp_path)
    assert "unknown model type 'gated_mpl' (did you mean 'gated_mlp'?)" in refused.stdout

    # Without the module, the name is unknown: a JSON plan never imports code itself.
    plan = _write(tmp_path, _plan({"algo": "reinforce"}))
    refused = plangraph_cli("validate", str(plan), cwd=tmp_path)
    assert refused.returncode != 0
    assert "unknown algorithm 'reinforce'" in refused.stdout


def test_diff_takes_import_and_shows_a_user_algorithms_settings(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    a.write_text(json.dumps(_plan({"algo": "reinforce", "lr": 0.002})), encoding="utf-8")
    b.write_text(json.dumps(_plan({"algo": "reinforce", "lr": 0.001})), encoding="utf-8")
    out = plangraph_cli("diff", str(a), str(b), "--import", str(MY_ALGOS), cwd=tmp_path)
    assert out.returncode == 1, out.stderr  # 1: the plans differ
    assert "policy.lr" in out.stdout and "0.002" in out.stdout and "0.001" in out.stdout
    missing = plangraph_cli("diff", str(a), str(b), "--import", "no_such_module", cwd=tmp_path)
    assert missing.returncode == 2 and "no_such_module" in missing.stderr


def test_eval_of_a_user_algorithms_run_says_what_to_import(tmp_path: Path) -> None:
    plan = _plan({"algo": "reinforce"}, num_workers=0, train_batch_size=512)
    path = _write(tmp_path, plan)
    run = plangraph_cli(
        "run", str(path), "--import", str(MY_ALGOS), "--max-iterations", "1",
        "--out", str(tmp_path / "run"), "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    refused = plangraph_cli("eval", str(tmp_path / "run"), "--episodes", "1", cwd=tmp_path)
    assert refused.returncode == 2
    assert "unknown algorithm 'reinforce'" in refused.stderr
    assert f"pass --import {MY_ALGOS}" in refused.stderr


def test_a_user_algorithms_declared_rows_are_what_it_samples() -> None:
    from plangraph.rl.rollout_worker import RolloutWorker
    from plangraph.rl.row_layout import sample_row_layout

    import_user_modules([str(MY_ALGOS)])
    config = {"algo": "reinforce", "model": {"type": "gated_mlp"}}
    worker = RolloutWorker("CartPole-v1", 2, 8, config, seed=0)
    batch = worker.sample()
    layout = sample_row_layout(worker.observation_space, worker.action_space, config)
    assert {k: (tuple(batch[k].shape[1:]), batch[k].dtype) for k in batch.keys()} == layout


@pytest.mark.usefixtures("ray_session")
def test_a_user_wrapper_wraps_the_envs_of_remote_workers() -> None:
    import_user_modules([str(MY_ALGOS)])
    plan = _plan({"algo": "ppo"}, train_batch_size=512, sgd_minibatch_size=128)
    params = plan["resources"]["workers"]["params"]
    params["wrappers"] = [{"name": "halve_reward", "params": {"factor": 0.5}}]
    params["rollout_fragment_length"] = 32
    compiled = plangraph.compile(plangraph.Plan.model_validate(plan))
    with plangraph.build(compiled, seed=0) as algo:
        assert len(algo.ctx.worker_sets["workers"].remote_workers) == 2
        results = [algo.train() for _ in range(3)]
    # CartPole pays 1 per env step: halved, episodes return half their length.
    last = results[-1]
    assert last["episodes_total"] > 0
    assert last["episode_return_mean"] == pytest.approx(last["episode_len_mean"] / 2)


def test_ops_describes_a_user_algorithm_and_model_type(tmp_path: Path) -> None:
    algo = plangraph_cli("ops", "reinforce", "--import", str(MY_ALGOS), cwd=tmp_path)
    assert algo.returncode == 0, algo.stderr
    assert "reinforce  [policy ReinforceConfig" in algo.stdout
    assert (
        "can: gradients" in algo.stdout and "acts in: Box, Discrete, MultiDiscrete" in algo.stdout
    )
    model = plangraph_cli(
        "ops", "gated_mlp", "--import", str(MY_ALGOS), "--format", "json", cwd=tmp_path
    )
    assert model.returncode == 0, model.stderr
    described = json.loads(model.stdout)
    assert described["kind"] == "model" and not described["builtin"]
    assert {p["name"] for p in described["params"]} >= {"width", "depth"}
    listing = plangraph_cli("ops", "--import", str(MY_ALGOS), cwd=tmp_path)
    assert "reinforce" in listing.stdout and "gated_mlp" in listing.stdout
