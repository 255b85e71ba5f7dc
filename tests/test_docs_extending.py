"""``docs/extending.md`` works: its examples are extracted from the page and run for real.

The page's examples are marked as every example on the site is (``tests/docs_pages.py``
says how: ``<!-- example: NAME file=FILENAME -->`` before a fenced block; a marker not
followed by a fence is an error). The examples:

* ``own_network`` (``my_net.py``, ``plan.json``): run as the page says, ``python -m
  plangraph run plan.json --import my_net.py``, for 3 iterations (``--max-iterations 3``
  instead of the page's stop criterion); the run must record and train the user's model.
* ``own_algorithm`` (``my_algo.py``, ``check_returns.py``, ``train_reinforce.py``):
  ``check_returns.py`` runs as it is (it asserts the returns to go); the ``plan`` of
  ``train_reinforce.py`` is built with 2 remote rollout workers (the session's real Ray,
  ``ray_session``) and trained for 2 iterations. The script's ``__main__`` block, which
  trains to a mean return of 150 with the same calls, is not run.
* ``snippets`` (``my_ops.py``, ``my_checks.py``, ``my_wrappers.py``): the reference section's
  operator, compiler check and env, imported in a fresh interpreter (a registered check
  would otherwise run on every later test's plans) and exercised there.
"""

from __future__ import annotations

import ast
import json
import os
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import plangraph
from tests.docs_pages import blocks, examples

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "extending.md"

EXAMPLES = examples([PAGE])


def write_example(name: str, directory: Path) -> dict[str, Path]:
    """The files of example ``name`` written into ``directory``, by file name."""
    paths = {}
    for file, source in EXAMPLES[name].items():
        paths[file] = directory / file
        paths[file].write_text(source, encoding="utf-8")
    return paths


def subprocess_env() -> dict[str, str]:
    """This checkout first on the path of a child interpreter (whatever its cwd)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def test_the_page_marks_both_examples_and_each_file_parses() -> None:
    assert {name: sorted(files) for name, files in EXAMPLES.items()} == {
        "own_network": ["my_net.py", "plan.json"],
        "own_algorithm": ["check_returns.py", "my_algo.py", "train_reinforce.py"],
        "snippets": ["my_checks.py", "my_ops.py", "my_wrappers.py"],
    }
    for files in EXAMPLES.values():
        for file, source in files.items():
            if file.endswith(".py"):
                ast.parse(source, filename=file)
            else:
                json.loads(source)
    with pytest.raises(ValueError, match="marker without a fenced block"):
        blocks(PAGE, "<!-- example: x file=a.py -->\ntext\n")


def test_own_network_example_trains_ppo_from_the_json_plan_on_the_cli(tmp_path: Path) -> None:
    files = write_example("own_network", tmp_path)
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "plangraph", "run", "plan.json", "--import", "my_net.py",
         "--max-iterations", "3", "--out", str(run_dir), "--no-progress", "--no-tensorboard"],
        cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = [json.loads(x) for x in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in results] == [1, 2, 3]
    # 2 workers x 8 sub-envs x 64 env steps = one train batch of 1,024 per iteration
    assert [r["num_env_steps_trained"] for r in results] == [1024, 2048, 3072]
    assert results[-1]["learner"]["num_grad_steps"] == 24  # 6 epochs x 4 minibatches
    saved = json.loads((run_dir / "plan.json").read_text(encoding="utf-8"))
    policy = saved["resources"]["workers"]["params"]["policy"]
    assert policy["algo"] == "ppo"
    assert policy["model"] == {"type": "ln_mlp", "hiddens": [64, 64], "vf_share_layers": False}

    # The checkpoint holds the user's network: it restores into it (and only into it).
    from plangraph.ops.models import unregister_model

    namespace = runpy.run_path(str(files["my_net.py"]), run_name="docs_extending_my_net")
    try:
        agent = plangraph.load_policy(run_dir)
        encoders = (agent.policy.model.pi_encoder, agent.policy.model.vf_encoder)
        assert all(isinstance(e, namespace["LayerNormMLP"]) for e in encoders)
        actions = agent.compute_actions(np.zeros((3, 4), dtype=np.float32))
        assert actions.shape == (3,) and actions.dtype == np.int64
    finally:
        unregister_model("ln_mlp")


@pytest.fixture
def own_algorithm_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The own_algorithm files in ``tmp_path``, importable as top-level modules; afterwards
    the ``reinforce`` registration and ``my_algo`` module as they were before."""
    from plangraph.ops.algorithms import algorithms, register_algorithm, unregister_algorithm

    write_example("own_algorithm", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = algorithms().get("reinforce")
    module = sys.modules.pop("my_algo", None)
    try:
        yield tmp_path
    finally:
        sys.modules.pop("my_algo", None)
        if module is not None:
            sys.modules["my_algo"] = module
        if before is None:
            unregister_algorithm("reinforce")
        else:
            register_algorithm(
                before.name, config=before.config, policy=before.policy, doc=before.doc
            )


@pytest.mark.usefixtures("ray_session")
def test_own_algorithm_example_checks_its_returns_and_trains_on_two_remote_workers(
    own_algorithm_files: Path,
) -> None:
    runpy.run_path(str(own_algorithm_files / "check_returns.py"), run_name="check_returns")
    script = runpy.run_path(str(own_algorithm_files / "train_reinforce.py"), run_name="example")
    compiled = plangraph.compile(script["plan"])
    with plangraph.build(compiled, num_workers=2, seed=0) as algo:
        ws = algo.ctx.worker_sets["workers"]
        assert len(ws.remote_workers) == 2
        assert type(algo.policy).__name__ == "ReinforcePolicy"
        before = algo.policy.get_weights()
        results = [algo.train() for _ in range(2)]
        after = algo.policy.get_weights()
    assert [r["num_env_steps_sampled"] for r in results] == [1024, 2048]
    assert [r["num_env_steps_trained"] for r in results] == [1024, 2048]
    learner = results[-1]["learner"]
    assert learner["num_grad_steps"] == 1  # TrainOneStep(): one optimizer step per batch
    assert all(np.isfinite(learner[k]) for k in ("policy_loss", "vf_loss", "entropy"))
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    assert results[-1]["episodes_total"] > 0


def test_reference_snippets_register_an_operator_a_check_and_a_wrapper(tmp_path: Path) -> None:
    write_example("snippets", tmp_path)
    plan = json.loads((ROOT / "plans" / "ppo.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    plan["nodes"]["clip"] = {"op": "ClipRewards", "inputs": ["rollouts"], "params": {"limit": 1}}
    plan["nodes"]["concat"]["inputs"] = ["clip"]
    (tmp_path / "clip_plan.json").write_text(json.dumps(plan), encoding="utf-8")
    probe = """
import json, types
import gymnasium as gym
import numpy as np
import my_checks, my_ops, my_wrappers
import plangraph
from plangraph.ops.wrappers import WrapperSpec, wrapped_env

out = {}
for batch_size in (256, 1024):
    c = plangraph.analyze("clip_plan.json", config={"train_batch_size": batch_size})
    out[batch_size] = [[d.code, d.node, d.pointer] for d in c.diagnostics if d.is_error]
clip = my_ops.clip_rewards(types.SimpleNamespace(limit=0.5))
out["clipped"] = clip({"rewards": np.array([-2.0, 0.25, 3.0], np.float32)})["rewards"].tolist()
from plangraph.rl import SampleBatch
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.implementations import OperatorContext
from plangraph.runtime.run_state import RunState
ctx = BuildContext(compiled=None, seed=0, worker_sets={}, buffers={}, run_state=RunState())
mix = my_ops.mix_in_recent(types.SimpleNamespace(capacity=2), OperatorContext("mix", ctx))
batch = SampleBatch({"rewards": np.ones(4, np.float32)})
out["mixed"] = [mix(batch).count for _ in range(4)]
saved = ctx.operator_states["mix"].get_state()
out["saved"] = [sorted(saved), len(saved["buffer"])]
tag = my_ops.tag_worker(types.SimpleNamespace())
worker = types.SimpleNamespace(index=2, shard_state={})
tagged = [tag(worker, SampleBatch({"rewards": np.ones(3, np.float32)})) for _ in range(2)]
out["tagged"] = [tagged[-1]["worker_index"].tolist(), worker.shard_state]
raw = json.loads(open("clip_plan.json").read())
raw["nodes"]["rollouts"]["params"]["mode"] = "raw"
raw["nodes"]["clip"] = {"op": "TagWorker", "inputs": ["rollouts"]}
raw["nodes"]["gather"] = {"op": "GatherShards", "inputs": ["clip"], "params": {"mode": "sync"}}
raw["nodes"]["concat"]["inputs"] = ["gather"]
c = plangraph.analyze(raw)
out["tag_plan"] = [[d.code for d in c.diagnostics if d.is_error], c.placement("clip")]
env = wrapped_env(gym.make("CartPole-v1"), [WrapperSpec(name="scale_by", params={"factor": 0.01})])
env.reset(seed=0)
out["reward"] = env.step(0)[1]
print(json.dumps(out))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=subprocess_env(),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["256"] == [["LAB001", "concat", "/nodes/concat/params/min_batch_size"]]
    assert out["1024"] == []  # ClipRewards is a known operator, the check is quiet
    assert out["clipped"] == [-0.5, 0.25, 0.5]
    assert out["mixed"] == [4, 8, 8, 8]  # nothing to replay at first, then one batch
    # the per-shard operator: tags with the worker's index, keeps its count on the worker
    assert out["tagged"] == [[2, 2, 2], {"tag": 2}]
    assert out["tag_plan"] == [
        [],
        "rollout workers (actors), per-shard on each worker of @workers, after rollouts",
    ]
    assert out["saved"] == [["buffer", "rng"], 2]  # the last `capacity` batches and the RNG
    assert out["reward"] == pytest.approx(0.01)
