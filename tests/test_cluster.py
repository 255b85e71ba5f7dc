"""Scaling out: worker resources, placement groups, shipped code, node failure, GPU learner.

``test_three_node_cluster`` starts a real Ray cluster of 3 nodes on this machine (a head
with no CPUs, two worker nodes with raylets of their own) in a process and session of its
own (``tests/cluster_harness.py``; this session's own Ray instance is the ``ray_session``
fixture), runs ``tests/fixtures/cluster/cluster_plan.py`` on it with ``plangraph run
--address``, removes a worker node mid-run and checks that nothing it started is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from plangraph.compiler import Capacity, analyze
from plangraph.compiler.capacity import NodeCapacity
from plangraph.compiler.placement import place_bundles
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"


# -- the cluster itself ------------------------------------------------------------------


def _session_processes(sid: int) -> list[str]:
    """Command lines of the live processes in session ``sid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                out.append((entry / "cmdline").read_text().replace("\0", " ")[:200])
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="process check reads /proc")
def test_three_node_cluster(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    harness = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "cluster_harness.py"), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # everything it starts (raylets, workers) is in its session
    )
    try:
        log, _ = harness.communicate(timeout=600)
    finally:
        if harness.poll() is None:
            os.killpg(harness.pid, 9)
            harness.wait(timeout=60)
    assert harness.returncode == 0, log.decode(errors="replace")[-5000:]
    # Nothing the cluster started outlives it (raylets, GCS, rollout workers, the run).
    wait_until(
        lambda: not _session_processes(harness.pid),
        "every process of the cluster's session (raylets, GCS, workers) to exit",
        timeout_s=30,
        interval_s=0.5,
        describe=lambda: str(_session_processes(harness.pid)),
    )

    r = json.loads((tmp_path / "cluster.json").read_text())
    head, (node_a, node_b) = r["head_node_id"], r["worker_node_ids"]
    # explain --address: each worker's expected node, two on each worker node, none on the
    # head (it offers no CPUs), and the totals.
    assert r["explain"]["rc"] == 0, r["explain"]["err"]
    text = r["explain"]["out"]
    for i in range(1, 5):
        assert f"worker {i} -> node " in text
    assert text.count(f"-> node {node_a[:12]}") == 2 and text.count(f"-> node {node_b[:12]}") == 2
    assert "reserved in all: CPU 4" in text and "available: CPU 8, GPU 0" in text
    # 3 GPUs per worker: a located diagnostic, before any actor starts or anything is written
    refused = r["refused"]
    assert refused["rc"] == 1
    assert "error PG186 [resources-unavailable]" in refused["err"]
    assert "cluster_plan.py:" in refused["err"]
    assert "at /resources/workers/params/worker_resources/num_gpus" in refused["err"]
    assert not refused["run_dir_exists"] and not refused["ran"]
    # the user's module was shipped (runtime_env py_modules), not imported from its file
    assert "shipping to the cluster (runtime_env py_modules)" in r["run_err"]
    records = r["records"]
    assert records and all("runtime_resources" in x["helper_file"] for x in records)
    assert {x["node_id"] for x in records} == {node_a, node_b}
    assert head not in {x["node_id"] for x in records}
    # where each rollout worker started: 2 on each worker node
    (placed,) = [ln for ln in r["run_err"].splitlines() if ln.startswith("workers: worker 1")]
    assert placed.count(f"on node {node_a[:12]}") == 2
    assert placed.count(f"on node {node_b[:12]}") == 2
    # the node's 2 workers were replaced, on the remaining node, and the run went on
    removed = r["removed_node_id"]
    kept = node_a if removed == node_b else node_b
    results = r["results"]
    assert results[-1]["num_worker_restarts"] == 2
    assert sum(1 for x in results if x["num_worker_restarts"] == 2) >= 4
    steps = [x["num_env_steps_sampled"] for x in results]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert [x["iteration"] for x in results] == list(range(1, len(results) + 1))
    dead_lines = [ln for ln in r["run_err"].splitlines() if "died (its node" in ln]
    assert len(dead_lines) == 2 and all(removed[:12] in ln for ln in dead_lines)
    after = records[-8:]  # the last fragments: all four workers, all on the kept node
    assert {x["node_id"] for x in after} == {kept}
    assert len({x["pid"] for x in after}) == 4
    assert r["run_rc"] == 130  # stopped by Ctrl-C, as asked


# -- placement, checked before anything starts ------------------------------------------


def _nodes(*cpus: float) -> tuple[NodeCapacity, ...]:
    return tuple(NodeCapacity.of(f"n{i}", f"10.0.0.{i}", {"CPU": c}) for i, c in enumerate(cpus))


def test_place_bundles_follows_each_strategy() -> None:
    nodes = _nodes(0, 4, 4)
    assert place_bundles({"CPU": 1}, 4, "SPREAD", nodes).nodes == (1, 2, 1, 2)
    assert place_bundles({"CPU": 1}, 4, "PACK", nodes).nodes == (1, 1, 1, 1)
    assert place_bundles({"CPU": 1}, 5, "PACK", nodes).nodes == (1, 1, 1, 1, 2)
    assert place_bundles({"CPU": 1}, 2, "STRICT_SPREAD", nodes).nodes == (1, 2)
    three = place_bundles({"CPU": 1}, 3, "STRICT_SPREAD", nodes)
    assert three.nodes == (1, 2, None) and "only 2 nodes can hold one" in (three.problem or "")
    big = place_bundles({"CPU": 8}, 1, None, nodes)
    assert big.nodes == (None,) and big.problem == "no node can hold one"
    full = place_bundles({"CPU": 3}, 3, "SPREAD", nodes)
    assert full.nodes == (1, 2, None) and full.problem == "1 of them find no node with room left"


def _ppo(**ws: Any) -> dict[str, Any]:
    plan = json.loads((PLANS / "ppo.json").read_text())
    plan["resources"]["workers"]["params"].update(ws)
    return plan


MINE = ("PG186", "PG187", "PG188", "PG189")


def _codes(plan: dict[str, Any], cap: Capacity) -> list[str]:
    """The reservation and placement codes (4 workers also make PPO's batch uneven)."""
    return [d.code for d in analyze(plan, capacity=cap).diagnostics if d.code in MINE]


def test_reservations_are_checked_against_the_cluster() -> None:
    cluster = Capacity.of_nodes("the test cluster", _nodes(0, 4, 4))
    ok = {"num_workers": 4, "worker_resources": {"num_cpus": 1}, "placement_strategy": "SPREAD"}
    assert _codes(_ppo(**ok), cluster) == []
    # 4 workers x 3 CPUs: 12 > 8 in all (so their placement is not reported too)
    assert _codes(_ppo(**{**ok, "worker_resources": {"num_cpus": 3}}), cluster) == ["PG186"]
    # 8 in all, but no node holds more than one worker of 3 CPUs
    three = {**ok, "num_workers": 2, "worker_resources": {"num_cpus": 3}}
    assert _codes(_ppo(**three), cluster) == []
    assert _codes(_ppo(**{**three, "num_workers": 3}), cluster) == ["PG186"]
    two_each = {**ok, "worker_resources": {"num_cpus": 2.5}, "num_workers": 3}
    assert _codes(_ppo(**two_each), cluster) == ["PG187"]
    # fits in all (8 CPUs) but not STRICT_SPREAD: 4 workers, 2 nodes that can hold one
    assert _codes(_ppo(**{**ok, "placement_strategy": "STRICT_SPREAD"}), cluster) == ["PG187"]
    # a custom resource no node offers, and GPUs for the learner
    custom = {**ok, "worker_resources": {"num_cpus": 1, "resources": {"sim": 1}}}
    (d,) = [d for d in analyze(_ppo(**custom), capacity=cluster).diagnostics if d.code in MINE]
    assert d.code == "PG186" and d.pointer.endswith("/worker_resources/resources/sim")
    (d,) = analyze(_ppo(learner={"num_gpus": 1}), capacity=cluster).diagnostics
    assert d.code == "PG186" and d.pointer == "/resources/workers/params/learner/num_gpus"
    # an empty bundle cannot go in a placement group
    assert _codes(_ppo(placement_strategy="PACK"), cluster) == ["PG188"]


def test_resources_are_overridable_with_set() -> None:
    cluster = Capacity.of_nodes("the test cluster", _nodes(0, 4, 4))
    compiled = analyze(
        PLANS / "ppo.json",
        config={
            "workers.worker_resources.num_gpus": 3,
            "workers.placement_strategy": "SPREAD",
        },
        capacity=cluster,
    )
    assert [d.code for d in compiled.diagnostics] == ["PG186"]
    ws = compiled.resources["workers"].params
    assert ws.worker_resources.num_gpus == 3 and ws.placement_strategy == "SPREAD"


# -- on the session's Ray instance -------------------------------------------------------


def test_worker_set_places_workers_through_a_placement_group(ray_session: None) -> None:
    import ray
    from ray.util import placement_group_table

    from plangraph.algorithms.ppo import PPOConfig
    from plangraph.ops.resources import WorkerResources
    from plangraph.rl import WorkerSet

    ws = WorkerSet(
        "CartPole-v1",
        2,
        1,
        8,
        PPOConfig(),
        seed=3,
        worker_resources=WorkerResources(num_cpus=0.5),
        placement_strategy="PACK",
    )
    try:
        pg = ws.placement_group
        table = placement_group_table(pg)
        assert table["strategy"] == "PACK" and table["state"] == "CREATED"
        assert list(table["bundles"].values()) == [{"CPU": 0.5}, {"CPU": 0.5}]
        where = ws.worker_locations()
        node = ray.get_runtime_context().get_node_id()
        assert [w["worker_index"] for w in where] == [1, 2]
        assert {w["node_id"] for w in where} == {node}
        assert ws.sample().env_steps() == 16
        # a replacement goes into the same bundle
        ws.recreate_worker(1)
        assert ws.worker_locations()[1]["worker_index"] == 2
    finally:
        ws.stop()
    assert placement_group_table(pg)["state"] == "REMOVED"


class _NeedsDriverOnlyPackage(gym.Env[np.ndarray, np.int64]):
    """Imports a package that only the driver has (as a node that lacks it would)."""

    def __init__(self) -> None:
        import plangraph_test_driver_only  # noqa: F401

        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(2, np.float32), 0.0, False, False, {}


def test_a_node_without_a_dependency_is_a_clear_error(
    ray_session: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plangraph.algorithms.ppo import PPOConfig
    from plangraph.rl import WorkerSet
    from plangraph.rl.restarts import WorkerRestartError

    # In the driver's sys.modules only: no worker process can import it.
    monkeypatch.setitem(
        sys.modules, "plangraph_test_driver_only", types.ModuleType("plangraph_test_driver_only")
    )
    space = (gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32), gym.spaces.Discrete(2))
    ws = WorkerSet(_NeedsDriverOnlyPackage, 1, 1, 8, PPOConfig(), spaces=space)
    try:
        with pytest.raises(Exception) as died:
            ws.sample()
        with pytest.raises(WorkerRestartError) as info:
            ws.replace_dead_worker(0, died.value, node_id="rollouts")
    finally:
        ws.stop()
    msg = str(info.value)
    assert "cannot import module 'plangraph_test_driver_only'" in msg
    assert "installed on every node" in msg and "--import" in msg
    assert ws.num_worker_restarts == 0  # not retried: a replacement would fail the same way


def test_shipped_modules_are_the_local_ones(tmp_path: Path) -> None:
    from plangraph.commands.user_modules import import_user_modules
    from plangraph.runtime.shipping import local_module_paths

    mod = tmp_path / "plangraph_test_shipped_mod.py"
    mod.write_text("VALUE = 1\n")
    assert import_user_modules([str(mod)]) is None
    try:
        paths = local_module_paths()
    finally:
        sys.modules.pop("plangraph_test_shipped_mod", None)
    assert str(mod.resolve()) in paths
    # never plangraph, the interpreter's or an installed package's own files
    assert not any(Path(p).name in ("plangraph", "numpy", "ray", "json") for p in paths)
    assert not any("site-packages" in p for p in paths)


# -- the learner's device ----------------------------------------------------------------


def test_learner_device_resolves_and_weights_stay_on_the_cpu() -> None:
    import torch

    from plangraph.rl.policies import make_policy
    from plangraph.rl.policy import resolve_device

    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    env = gym.make("CartPole-v1")
    policy = make_policy(env.observation_space, env.action_space, {"algo": "ppo"}, 0, "auto")
    assert policy.device.type == expected
    assert all(isinstance(w, np.ndarray) for w in policy.get_weights().values())
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA device"):
            resolve_device("cuda")


@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs a CUDA device (torch sees none)"
)
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_learner_trains_on_cuda_like_on_the_cpu(algo: str) -> None:
    from plangraph.rl import RolloutWorker
    from plangraph.rl.policies import make_policy

    env = gym.make("CartPole-v1")
    worker = RolloutWorker("CartPole-v1", 2, 32, {"algo": algo}, seed=1)
    batch = worker.sample()
    cpu = make_policy(env.observation_space, env.action_space, {"algo": algo}, 0, "cpu")
    gpu = make_policy(env.observation_space, env.action_space, {"algo": algo}, 0, "cuda")
    assert gpu.device.type == "cuda"
    for name, w in cpu.get_weights().items():  # same initial weights on both devices
        np.testing.assert_array_equal(w, gpu.get_weights()[name])
    a, b = cpu.train(batch, 2, 16), gpu.train(batch, 2, 16)
    assert a["num_env_steps_trained"] == b["num_env_steps_trained"] == batch.count
    for name, w in cpu.get_weights().items():
        assert gpu.get_weights()[name].dtype == w.dtype
        np.testing.assert_allclose(gpu.get_weights()[name], w, rtol=1e-3, atol=1e-4)
    actions, _ = gpu.compute_actions(batch["obs"][:4], explore=False)
    assert actions.shape == (4,)
