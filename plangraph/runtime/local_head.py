"""A local Ray instance in a process of its own, started before the driver needs it.

``ray.init()`` on one machine starts Ray's processes from the driver and waits for each of
them in turn (about 2.5 s on 2 cores), and the driver's interpreter is busy for part of that
time, so its own start-up (compiling, importing torch, reading env spaces) cannot overlap
with it. ``LocalHead.spawn()`` starts a child process that imports Ray at once, and
``start()`` has it start the same head node as soon as ``plangraph run`` knows that the run
is local and that its plan compiles; ``ensure_ray``
joins it (``ray.init(address=...)``) when the build first needs Ray, by which time it is
mostly up (``tools/bench_startup.py``: the row "Ray head node up in its own process").

The head node is what ``ray.init(include_dashboard=False)`` starts (GCS, raylet with its
object store, dashboard and runtime-env agents, log monitor, Ray's reaper) with the same
token authentication, less two processes that have nothing to do on one machine: the
autoscaler monitor (no nodes to add or remove; about 0.5 s of CPU at start-up and a slow
exit, see ``ray_session._stop_autoscaler_monitor``) and the dashboard's API server (with
the dashboard off it serves only usage statistics, which ``ray.init()`` turns off, yet
``ray.init()`` waits about 0.5 s for it before it starts the raylet).

Lifetime: the head lives exactly as long as the pipe to its standard input. ``stop()``
closes it and waits while the head stops every Ray process it started; a driver that dies,
even by SIGKILL, closes the pipe as well. If the head process itself dies, Ray's reaper
kills the processes it started. The head runs in a session of its own, so that a Ctrl-C in
the terminal reaches the driver (which stops training and writes its checkpoint) and not
Ray's processes.

This reaches into Ray's private ``Node`` (as ``ray.init`` does internally). On a Ray where
that fails, the head says so and ``ensure_ray`` starts Ray in-process instead.

Run as ``python -m plangraph.runtime.local_head``: it prints one JSON line on stdout,
``{"address": "IP:PORT", "auth_mode": "token" | null, "pids": {kind: [pid, ...]}}`` once
the node is up (or ``{"error": "..."}``), then waits for end of input.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 120.0
"""How long (s) the head may take to come up before ``ready()`` gives up on it."""

STOP_TIMEOUT_S = 15.0
"""How long (s) ``stop()`` waits for the head to stop Ray's processes before killing it."""


SYSTEM_CONFIG = {
    # Ray's clients retry a socket that is not listening yet every 1,000 ms, 10 times. The
    # raylet's own first connection to its object store, made while the store's thread
    # starts, misses about one start in three and then waits that whole second; 100
    # retries 100 ms apart keep the same 10 s budget.
    "raylet_client_connect_timeout_milliseconds": 100,
    "raylet_client_num_connect_attempts": 100,
    # Task events feed the dashboard and the state API (``ray list tasks``), neither of
    # which this head serves (no API server); reporting them costs every task a message
    # to the GCS, and flushing them makes a driver's disconnect wait about 0.25 s.
    "task_events_report_interval_ms": 0,
    # Ray starts one Python worker per CPU for the first driver either way. By default it
    # does so when the driver registers, and ray.init() then waits until they are up
    # (about 1.3 s of a start here, with the driver idle). With this, the raylet starts
    # them as soon as it is up, while the driver still builds, and binds them to the job
    # later (Ray's own switch for cold starts, ray-project/ray#33623): the same number of
    # workers, the rollout worker actors then start in them.
    "enable_worker_prestart": True,
    # Those prestarted workers then wait, idle, for the driver to join and create the
    # rollout worker actors, whose creation imports the rollout worker's modules (numpy,
    # gymnasium, the policy configs: about 0.4 s of CPU each) while the driver waits for
    # the first sample. Ray's own switch has every Python worker import them before it
    # accepts work (with numpy's BLAS on one thread: see worker_preload); a worker that
    # cannot import them logs why and works as before.
    "preload_python_modules": ["plangraph.rl.worker_preload"],
}
"""Ray system config of the head node (``_system_config``; the whole cluster reads it)."""


START = b"start "
"""How the driver's line to the head's standard input begins that has it start Ray's
processes; the rest of the line is the driver's environment (JSON), which Ray's processes
(and through them the rollout workers) then inherit, as from ``ray.init()``."""


class _Stop(Exception):
    """SIGTERM to the head process: stop Ray's processes as at end of input."""


def _raise_stop(*_: Any) -> None:
    raise _Stop


class HeadStartError(RuntimeError):
    """The head process did not come up (its message says why)."""


class LocalHead:
    """The driver's handle on a head-node process (``LocalHead.spawn()``)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._ready: dict[str, Any] | None = None
        self._buffer = b""
        self._started = False
        self.joined = False
        """Set by the driver once it has joined this head (a head is joined once)."""

    @classmethod
    def spawn(cls) -> LocalHead:
        """Start the head process, which imports Ray and then waits for ``start()``
        (or for ``stop()``: it then exits having started nothing); returns at once.

        Raises:
            OSError: the interpreter could not be started.
        """
        # The head imports this module from where the driver has it (plangraph/runtime/).
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        process = subprocess.Popen(
            [sys.executable, "-m", "plangraph.runtime.local_head"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Ray's own messages (the token-authentication notice, warnings) reach the
            # user as they do from ray.init().
            stderr=None,
            start_new_session=True,
        )
        return cls(process)

    def start(self) -> None:
        """Have the head start Ray's processes now; returns at once (``ready()`` waits).
        Does nothing when already asked, or when the head has exited (``ready()`` then
        says why)."""
        if self._started or self._process.poll() is not None:
            return
        self._started = True
        assert self._process.stdin is not None
        line = START + json.dumps(dict(os.environ), sort_keys=True).encode() + b"\n"
        try:
            self._process.stdin.write(line)
            self._process.stdin.flush()
        except OSError:  # the head died; ready() reports it
            pass

    @property
    def pid(self) -> int:
        return self._process.pid

    def ready(self, timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
        """Wait for the head's ready line: ``{"address", "auth_mode", "pids"}``.

        Raises:
            HeadStartError: the head reported an error, exited, or said nothing for
                ``timeout_s`` seconds (it is stopped then).
        """
        if self._ready is not None:
            return self._ready
        self.start()
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            line, newline, rest = self._buffer.partition(b"\n")
            if newline:
                self._buffer = rest
                message = _message(line)
                if message is None:
                    continue  # not the head's line (a library printing to stdout)
                if "error" in message:
                    self.stop()
                    raise HeadStartError(str(message["error"]))
                break
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.stop()
                raise HeadStartError(f"no answer within {timeout_s:g} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                code = self._process.wait()
                raise HeadStartError(f"the head process exited ({code}) before Ray was up")
            self._buffer += chunk
        self._ready = message
        return message

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Have the head stop every Ray process it started, and wait for it (killing it
        after ``timeout_s`` seconds; Ray's reaper then kills what is left). A head never
        asked to ``start()`` has started nothing and is killed at once."""
        if self._process.poll() is not None:
            return
        assert self._process.stdin is not None
        try:
            self._process.stdin.close()
        except OSError:
            pass
        if not self._started:
            # It has started nothing of Ray's yet: no need to let it finish importing Ray.
            self._process.kill()
            self._process.wait()
            return
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    @property
    def running(self) -> bool:
        return self._process.poll() is None


def _message(line: bytes) -> dict[str, Any] | None:
    """The head's JSON line (``address`` or ``error``), or None for any other line."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if isinstance(message, dict) and ("address" in message or "error" in message):
        return message
    return None


def adopt_auth_mode(mode: str | None) -> None:
    """Make this process present the head's authentication (``RAY_AUTH_MODE``) when it
    joins, as ``ray.init()`` does for the cluster it starts; an explicit ``RAY_AUTH_MODE``
    in the environment is left as it is (the head inherited it)."""
    if mode is None or os.environ.get("RAY_AUTH_MODE") is not None:
        return
    os.environ["RAY_AUTH_MODE"] = mode
    # Ray caches its config; ray.init() refreshes it the same way when it enables tokens.
    from ray._raylet import Config

    Config.initialize("")


def _head_node_class() -> type:
    """Ray's ``Node`` without the dashboard's API server, and with its log monitor run in a
    thread of the head process once the node is up (``start_log_monitor_thread``) rather
    than in a process of its own started before the raylet.

    Without the dashboard (``include_dashboard=False``), ``ray.init()`` still starts that
    server with only its usage-statistics module, which ``ray.init()`` turns off, and waits
    for it to come up before it starts the raylet: about 0.5 s of every start, for a process
    with nothing to do. The log monitor (it forwards the workers' output to the driver) is
    a Python process that imports Ray, about 1 s of CPU on 2 cores shared with the raylet's
    own start and the driver's imports; the head process has Ray imported already and waits
    on its pipe once the node is up. No worker exists before then, and the monitor reads
    every log file from its first byte, so starting it then loses no output.

    The raylet starts the dashboard agent through ``minimal_dashboard_agent`` (see there),
    which Ray's own command builder lets a memory profiler wrap the same way; with such a
    profiler configured, the agent starts as Ray starts it.
    """
    import ray._private.node
    from ray._private import ray_constants, services

    build_command = services._build_python_executable_command_memory_profileable

    def agent_command(component: str, session_dir: str, unbuffered: bool = True) -> list[str]:
        command = list(build_command(component, session_dir, unbuffered))
        if component == ray_constants.PROCESS_TYPE_DASHBOARD_AGENT and command == [
            sys.executable,
            "-u",
        ]:
            command.append(str(Path(__file__).with_name("minimal_dashboard_agent.py")))
        return command

    class HeadNode(ray._private.node.Node):  # type: ignore[misc]
        def start_api_server(self, *, include_dashboard: Any, raise_on_failure: Any) -> None:
            self._webui_url = None

        def start_raylet(self, *args: Any, **kwargs: Any) -> None:
            services._build_python_executable_command_memory_profileable = agent_command
            try:
                super().start_raylet(*args, **kwargs)
            finally:
                services._build_python_executable_command_memory_profileable = build_command

        def start_log_monitor(self) -> None:
            pass  # started by start_log_monitor_thread once the node is up

    return HeadNode


def start_log_monitor_thread(node: Any) -> threading.Event:
    """Run Ray's ``LogMonitor`` for ``node`` in a daemon thread of this process, logging to
    the node's ``log_monitor.log`` as Ray's own process does; returns the event to set
    before the node stops (an error after that is the node going away)."""
    import logging.handlers

    from ray._private import log_monitor, ray_constants
    from ray._raylet import GcsClient

    # Its own file only: the "ray" logger above it prints to the terminal.
    handler = logging.handlers.RotatingFileHandler(
        os.path.join(node.get_logs_dir_path(), ray_constants.LOG_MONITOR_LOG_FILE_NAME),
        maxBytes=node.max_bytes,
        backupCount=node.backup_count,
    )
    handler.setFormatter(logging.Formatter(ray_constants.LOGGER_FORMAT))
    log_monitor.logger.addHandler(handler)
    log_monitor.logger.setLevel(ray_constants.LOGGER_LEVEL.upper())
    log_monitor.logger.propagate = False
    monitor = log_monitor.LogMonitor(
        node.node_ip_address,
        node.get_logs_dir_path(),
        GcsClient(address=node.gcs_address),
        log_monitor.is_proc_alive,
        gcs_address=node.gcs_address,
    )
    stopping = threading.Event()

    def run() -> None:
        try:
            monitor.run()
        except Exception:
            if not stopping.is_set():
                log_monitor.logger.exception("the log monitor stopped")

    threading.Thread(target=run, name="ray-log-monitor", daemon=True).start()
    return stopping


def _serve() -> int:
    """The head process: import Ray, wait for the ``START`` line (end of input instead:
    exit), take the driver's environment, start the node, report, wait for end of input,
    stop the node."""
    import signal

    from plangraph.startup_trace import mark

    # Only the driver decides when Ray stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        import logging

        import ray._private.parameter
        from ray._common.usage import usage_lib
        from ray._private.authentication.authentication_token_setup import (
            enable_token_auth_by_default,
            ensure_token_if_auth_enabled,
        )

        head_node = _head_node_class()
    except Exception as exc:  # reported to the driver, which starts Ray in-process
        _report_error(exc)
        return 1
    mark("head_imported")
    try:
        line = sys.stdin.buffer.readline()
    except _Stop:
        return 0
    if not line.startswith(START):
        return 0  # the driver no longer needs Ray (a plan error, or it exited)
    try:
        # The driver's environment as it is now, not as it was when this process started
        # (a --import module may have set variables the workers need).
        environment = json.loads(line[len(START) :])
        os.environ.clear()
        os.environ.update(environment)
        # Ray's messages as ray.init(configure_logging=False) prints them: text only.
        for handler in logging.getLogger("ray").handlers:
            handler.setFormatter(logging.Formatter("%(message)s"))
        # What ray.init() does before it starts a local cluster.
        enable_token_auth_by_default()
        ensure_token_if_auth_enabled({}, create_token_if_missing=True)
        usage_lib.set_usage_stats_enabled_via_env_var(False)
        params = ray._private.parameter.RayParams(
            include_dashboard=False, no_monitor=True, _system_config=dict(SYSTEM_CONFIG)
        )
        node = head_node(
            params, head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True
        )
    except Exception as exc:  # reported to the driver, which starts Ray in-process
        _report_error(exc)
        # What had started before the failure (a raylet that aborted leaves its agents).
        _kill_own_process_group()
        return 1
    mark("head_ready")
    pids = {
        kind: sorted(info.process.pid for info in infos)
        for kind, infos in sorted(node.all_processes.items())
    }
    ready = {"address": node.address, "auth_mode": os.environ.get("RAY_AUTH_MODE"), "pids": pids}
    # The driver joins now; the log monitor starts after this line, since it takes about
    # 0.15 s (a GCS client) and no worker's output is lost meanwhile (it reads every log
    # file from its first byte).
    print(json.dumps(ready, sort_keys=True), flush=True)
    # Nobody reads stdout from here on: a stray print must not fill the pipe and block.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    try:
        log_monitor_stopping = start_log_monitor_thread(node)
    except Exception:  # a Ray whose LogMonitor differs: its own process, as ray.init()'s
        super(type(node), node).start_log_monitor()
        log_monitor_stopping = threading.Event()
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except _Stop:
        pass
    # What ray.shutdown() does for the cluster ray.init() started, waiting for the exits.
    log_monitor_stopping.set()
    node.destroy_external_storage()
    node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
    _kill_own_process_group()
    return 0


def _report_error(exc: Exception) -> None:
    """Tell the driver why the head did not come up (``ready()`` raises it)."""
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)


def _kill_own_process_group() -> None:
    """SIGKILL every other process of this process's group: whatever Ray started here and
    did not stop (this process leads its own session and group; rollout workers have
    groups of their own and exit when their raylet does)."""
    import signal

    me, group = os.getpid(), os.getpgrp()
    if group != me:
        return  # not started as LocalHead does: the group is someone else's
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.getpgid(int(entry)) == group:
                os.kill(int(entry), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    from plangraph.process_exit import exit_now

    # Without the interpreter's teardown of Ray's modules (about 0.1 s here), which the
    # driver's stop() would wait for: every Ray process is gone by now.
    exit_now(_serve())
