"""Ray's head node in a process of its own (``plangraph.runtime.local_head``): it comes up,
the driver joins it, and no Ray process outlives the run, however the driver ends.

Each test runs a fresh interpreter: the session's shared Ray instance (conftest) must stay.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids: list[int], timeout_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` now (Ray's agents are the raylet's children)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError):
                pass
    out, frontier = [], [pid]
    while frontier:
        kids = [p for p, parent in parents.items() if parent in frontier]
        out += kids
        frontier = kids
    return sorted(out)


DRIVER = """
import json, os, sys
import ray
from plangraph.runtime import ray_session

ray_session.spawn_local_head()  # as plangraph run does before it compiles the plan
os.environ["PLANGRAPH_TEST_SET_AFTER_SPAWN"] = "seen"  # as a --import module may
ray_session.ensure_ray()
head = ray_session._head
ready = head.ready()

@ray.remote
def where():
    return ray.get_runtime_context().get_node_id(), os.environ.get("PLANGRAPH_TEST_SET_AFTER_SPAWN")

node, marker = ray.get(where.remote())
print(json.dumps({
    "marker": marker,
    "head_pid": head.pid,
    "own_session": os.getsid(head.pid) != os.getsid(0),
    "pids": ready["pids"],
    "one_node": [n["NodeID"] for n in ray.nodes()] == [node],
    "cpus": ray.cluster_resources().get("CPU"),
}), flush=True)
sys.stdin.readline()  # the test has looked at the processes
ray_session.shutdown_ray()
print(json.dumps({"initialized": ray.is_initialized()}), flush=True)
"""


def _driver() -> tuple[subprocess.Popen[str], dict, list[int]]:
    """A driver that joined its head: (process, what it reported, the head's process
    tree: the head and everything below it)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the driver exited before Ray was up"
    out = json.loads(line)
    return proc, out, [out["head_pid"], *_descendants(out["head_pid"])]


def test_the_driver_joins_its_own_head_node_and_shutdown_stops_every_ray_process() -> None:
    proc, out, tree = _driver()
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    after = json.loads(proc.stdout.readline())
    assert proc.wait(timeout=60) == 0
    assert after["initialized"] is False and out["one_node"]
    # Workers see the driver's environment as it was when Ray started, not when the head
    # process was spawned.
    assert out["marker"] == "seen"
    assert out["cpus"] == len(os.sched_getaffinity(0))  # as ray.init() counts them
    # A Ctrl-C in the terminal reaches the driver only.
    assert out["own_session"]
    kinds = set(out["pids"])
    assert {"gcs_server", "raylet"} <= kinds
    assert "monitor" not in kinds and "dashboard" not in kinds  # nothing to do on one machine
    assert "log_monitor" not in kinds  # a thread of the head process
    # Ray's agents and the rollout workers' processes are the raylet's children.
    assert len(tree) > 1 + sum(len(ps) for ps in out["pids"].values())
    # shutdown_ray() waited for the head, which waited for every process it started.
    assert _wait_gone(tree, timeout_s=5.0) == []


def test_a_driver_killed_by_sigkill_leaves_no_ray_process_behind() -> None:
    proc, _, tree = _driver()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _wait_gone(tree) == []


WORKER_OUTPUT = """
import sys, time
import ray
from plangraph.runtime import ray_session

class Tee:  # what Ray's log listener prints to the driver's stderr, kept
    def __init__(self, stream):
        self.stream, self.text = stream, ""
    def write(self, data):
        self.text += data
        return self.stream.write(data)
    def flush(self):
        self.stream.flush()
    def fileno(self):
        return self.stream.fileno()

ray_session.spawn_local_head()
ray_session.ensure_ray()
sys.stderr = tee = Tee(sys.stderr)  # Ray's listener looks it up at each print

@ray.remote
def speak():
    print("plangraph-worker-output-marker", file=sys.stderr, flush=True)

ray.get(speak.remote())
deadline = time.monotonic() + 60
while "plangraph-worker-output-marker" not in tee.text and time.monotonic() < deadline:
    time.sleep(0.05)
ray_session.shutdown_ray()
print("seen" if "plangraph-worker-output-marker" in tee.text else "missing")
"""


def test_worker_output_reaches_the_driver_through_the_heads_log_monitor() -> None:
    proc = _python(WORKER_OUTPUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "seen", proc.stderr
    assert "(speak pid=" in proc.stderr  # Ray's prefix: which task printed it
    assert "log monitor stopped" not in proc.stderr


FALLBACK = """
import json, subprocess, sys
import ray
from plangraph.runtime import local_head, ray_session

# A head that cannot start (as on a Ray whose private Node differs): it says so and exits.
def broken_start():
    code = "import json; print(json.dumps({'error': 'TypeError: no such parameter'}))"
    return local_head.LocalHead(subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE))

local_head.LocalHead.spawn = staticmethod(broken_start)
ray_session.ensure_ray()
node = ray._private.worker._global_node
processes = {kind: [i.process for i in infos] for kind, infos in node.all_processes.items()}
in_process = node.is_head() and ray_session._head is None
ray_session.shutdown_ray()
# The reaper is left to exit by itself once the driver is gone (as with ray.shutdown).
alive = sorted(k for k, ps in processes.items() if k != "reaper" for p in ps
               if p.poll() is None)
print(json.dumps({"in_process": in_process, "alive": alive, "kinds": sorted(processes)}))
"""


def test_a_head_that_cannot_start_falls_back_to_ray_in_process_and_says_why() -> None:
    proc = _python(FALLBACK)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["in_process"] is True
    assert "did not start in its own process (TypeError: no such parameter)" in proc.stderr
    assert "starting Ray in this one" in proc.stderr
    # ray.init()'s own processes, the autoscaler monitor included, all stopped.
    assert "monitor" in out["kinds"] and "raylet" in out["kinds"]
    assert out["alive"] == []


def test_a_run_whose_plan_does_not_compile_starts_no_ray(tmp_path: Path) -> None:
    plan = json.loads((ROOT / "plans" / "ppo.json").read_text(encoding="utf-8"))
    plan["nodes"]["concat"]["op"] = "NoSuchOperator"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(plan), encoding="utf-8")
    code = (
        "import sys; from plangraph.cli import main; rc = main(sys.argv[1:]); "
        "from plangraph.runtime import ray_session as s; "
        "print('started', s._head is not None and s._head._started); sys.exit(rc)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", str(bad), "--max-iterations", "1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode != 0
    assert "NoSuchOperator" in proc.stderr
    assert "started False" in proc.stdout


FAILING_HEAD_SITE = """
import os, sys

def _fail_after_the_raylet_started():
    import ray._private.node as node

    start_raylet = node.Node.start_raylet

    def start_raylet_then_fail(self, *args, **kwargs):
        start_raylet(self, *args, **kwargs)
        if os.path.basename(sys.argv[0]) == "local_head.py":  # the head process only
            raise RuntimeError("injected failure after the raylet started")

    node.Node.start_raylet = start_raylet_then_fail

try:
    _fail_after_the_raylet_started()
except ImportError:
    pass
"""

FAILING_HEAD_DRIVER = """
import json
import ray
from plangraph.runtime import local_head, ray_session

spawned = []
spawn = local_head.LocalHead.spawn
local_head.LocalHead.spawn = classmethod(lambda cls: spawned.append(spawn()) or spawned[-1])
ray_session.ensure_ray()
in_process = ray._private.worker._global_node.is_head()
ray_session.shutdown_ray()
print(json.dumps({"heads": [h.pid for h in spawned], "in_process": in_process}))
"""


def _in_session(sid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    out.append(int(entry))
            except (ProcessLookupError, PermissionError):
                pass
    return out


def test_a_head_that_fails_midway_is_spawned_once_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(FAILING_HEAD_SITE, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-c", FAILING_HEAD_DRIVER],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert "injected failure after the raylet started" in proc.stderr
    assert out["in_process"] is True
    assert len(out["heads"]) == 1  # not spawned again after it failed
    # The raylet's agents, already running when the head failed, went with it.
    deadline = time.monotonic() + 10.0
    while _in_session(out["heads"][0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _in_session(out["heads"][0]) == []


REJOIN = """
import json, os
import ray
from plangraph.runtime import ray_session

ray_session.ensure_ray()
first = ray_session._head.pid
ray.shutdown()  # the user's own: only disconnects from the head
ray_session.ensure_ray()
second = ray_session._head.pid
works = ray.get(ray.remote(lambda: 1).remote()) == 1
ray_session.shutdown_ray()
print(json.dumps({"first": first, "second": second, "works": works}))
"""


def test_ensure_ray_after_the_users_ray_shutdown_starts_a_new_head() -> None:
    proc = _python(REJOIN)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["works"] and out["first"] != out["second"]
    assert not _alive(out["first"]) and not _alive(out["second"])


MINIMAL_AGENT_MODULES = """
import importlib, pkgutil, sys
import ray.dashboard.modules
from ray._private.utils import get_dashboard_dependency_error
from ray.dashboard.utils import DashboardAgentModule

for info in pkgutil.walk_packages(ray.dashboard.modules.__path__, "ray.dashboard.modules."):
    try:
        importlib.import_module(info.name)
    except ImportError:
        pass  # needs what a minimal Ray lacks: it cannot be minimal either

def below(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from below(sub)

print(get_dashboard_dependency_error() is not None)
print(sorted(m.__name__ for m in below(DashboardAgentModule) if m.is_minimal_module()))
"""


def test_a_minimal_ray_has_no_dashboard_agent_module_that_the_head_skips() -> None:
    # minimal_dashboard_agent skips the agent's search for its modules, whose only outcome
    # on a minimal Ray is the modules that declare themselves minimal: that must be none.
    proc = _python(MINIMAL_AGENT_MODULES)
    assert proc.returncode == 0, proc.stderr
    minimal, modules = proc.stdout.strip().splitlines()[-2:]
    if minimal == "True":
        assert modules == "[]"


def test_the_heads_dashboard_agent_skips_the_module_search_and_runs() -> None:
    code = """
import os
import ray
from plangraph.runtime import ray_session
ray_session.ensure_ray()
logs = ray._private.worker._global_node.get_logs_dir_path()
ray_session.shutdown_ray()
text = open(os.path.join(logs, "dashboard_agent.log")).read()
minimal = ray._private.utils.get_dashboard_dependency_error() is not None
print(minimal, "Loaded 0 modules" in text, "cannot be loaded" in text)
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    minimal, loaded_none, searched = proc.stdout.split()[-3:]
    if minimal == "True":  # with the dashboard's packages, Ray's agent runs unchanged
        assert (loaded_none, searched) == ("True", "False")


def test_preloaded_workers_run_numpys_blas_on_one_thread_as_ray_would() -> None:
    # The head's workers import numpy before Ray sets OMP_NUM_THREADS for their actor
    # (plangraph.rl.worker_preload); numpy's BLAS must still get the one thread that Ray
    # gives an actor without CPUs, not one per core.
    code = """
import ctypes, json
import ray
from plangraph.runtime import ray_session

ray_session.ensure_ray()

@ray.remote(num_cpus=0)
class Probe:
    def blas_threads(self):
        import os, sys
        preloaded = "plangraph.rl.rollout_worker" in sys.modules
        omp = os.environ.get("OMP_NUM_THREADS")
        libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "openblas" in l})
        get = None
        if libs:
            lib = ctypes.CDLL(libs[0])
            get = getattr(lib, "scipy_openblas_get_num_threads64_", None) or getattr(
                lib, "openblas_get_num_threads", None)
        return (get() if get else None), preloaded, omp

print(json.dumps(ray.get(Probe.remote().blas_threads.remote())))
ray_session.shutdown_ray()
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    threads, preloaded, omp = json.loads(proc.stdout.strip().splitlines()[-1])
    assert preloaded and omp == "1"  # preloaded; Ray set the variable for the actor
    if threads is not None:  # a numpy whose BLAS is OpenBLAS
        assert threads == 1
