"""A real 3-node Ray cluster on this machine, and ``plangraph run --address`` on it.

Run by ``tests/test_cluster.py`` in a process (and session) of its own, because the test
session already holds a local Ray instance (``tests/conftest.py``). Usage::

    python tests/cluster_harness.py OUT_DIR

Starts a head node that offers no CPUs and two worker nodes of 4 (logical) CPUs each
(``ray.cluster_utils.Cluster``: separate raylets and object stores, one GCS); asks
``plangraph explain --address`` where the workers of ``tests/fixtures/cluster/
cluster_plan.py`` would go; checks that a request of 3 GPUs per worker is refused before
anything starts; then runs the plan with ``--address`` (4 rollout workers, one CPU each,
``SPREAD``; its user operator runs on the workers and logs where), removes one worker node
after the second result, lets the run go on for 3 results after its workers were
replaced, stops it with SIGINT (Ctrl-C) and shuts the cluster down. Writes what it saw to
``OUT_DIR/cluster.json``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "cluster"
PLAN = FIXTURES / "cluster_plan.py"
HELPERS = FIXTURES / "cluster_helpers.py"
WAIT_S = 240.0
# Node deaths are noticed within ~2 s instead of Ray's default ~30 s.
SYSTEM_CONFIG = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 4,
    "health_check_initial_delay_ms": 0,
}


def _plangraph(*argv: str) -> list[str]:
    return [sys.executable, "-m", "plangraph", *argv]


def _results(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            break
    return out


def _wait_for(what: str, cond: Any, proc: subprocess.Popen[bytes], err: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():
        if proc.poll() is not None:
            raise RuntimeError(f"run exited ({proc.returncode}) before {what}: {err.read_text()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {WAIT_S:g} s: {err.read_text()[-3000:]}")
        time.sleep(0.2)


def main(out_dir: Path) -> None:
    from ray.cluster_utils import Cluster

    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "_system_config": SYSTEM_CONFIG,
        },
    )
    proc: subprocess.Popen[bytes] | None = None
    try:
        nodes = [cluster.add_node(num_cpus=4) for _ in range(2)]
        cluster.wait_for_nodes()
        address = cluster.address
        report["head_node_id"] = cluster.head_node.node_id
        report["worker_node_ids"] = [n.node_id for n in nodes]
        log = out_dir / "ran.jsonl"
        common = ["--import", str(HELPERS), "--set", f"record_log={log}"]
        explain = subprocess.run(
            _plangraph("explain", str(PLAN), *common, "--address", address),
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )
        report["explain"] = {"rc": explain.returncode, "out": explain.stdout, "err": explain.stderr}
        refused = subprocess.run(
            _plangraph(
                "run",
                str(PLAN),
                *common,
                "--set",
                "workers.worker_resources.num_gpus=3",
                "--address",
                address,
                "--max-iterations",
                "1",
                "--out",
                str(out_dir / "refused"),
            ),
            capture_output=True,
            text=True,
            timeout=WAIT_S,
        )
        report["refused"] = {
            "rc": refused.returncode,
            "err": refused.stderr,
            "run_dir_exists": (out_dir / "refused").exists(),
            "ran": log.is_file(),
        }
        run_dir = out_dir / "run"
        out, err = out_dir / "run.out", out_dir / "run.err"
        with out.open("wb") as fo, err.open("wb") as fe:
            proc = subprocess.Popen(
                _plangraph(
                    "run",
                    str(PLAN),
                    *common,
                    "--address",
                    address,
                    "--stop",
                    "num_env_steps_sampled=100000000",
                    "--out",
                    str(run_dir),
                    "--no-progress",
                    "--no-tensorboard",
                    "--checkpoint-every",
                    "0",
                ),
                stdout=fo,
                stderr=fe,
            )
        results = run_dir / "result.jsonl"
        _wait_for("2 results", lambda: len(_results(results)) >= 2, proc, err)
        before = len(_results(results))
        removed = nodes[1]
        report["removed_node_id"] = removed.node_id
        cluster.remove_node(removed)
        report["removed_after_results"] = before

        def replaced() -> bool:
            rs = _results(results)
            done = [i for i, r in enumerate(rs) if r.get("num_worker_restarts", 0) >= 2]
            return bool(done) and len(rs) >= done[0] + 4

        _wait_for("3 results after the replacements", replaced, proc, err)
        proc.send_signal(signal.SIGINT)
        report["run_rc"] = proc.wait(timeout=WAIT_S)
        report["results"] = _results(results)
        report["run_out"] = out.read_text(errors="replace")
        report["run_err"] = err.read_text(errors="replace")
        report["records"] = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        cluster.shutdown()
    (out_dir / "cluster.json").write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    main(Path(sys.argv[1]))
