"""Starting or joining Ray for a run (the one place plangraph calls ``ray.init``)."""

from __future__ import annotations

import atexit
import os
import socket
import sys
from typing import TYPE_CHECKING

from plangraph.errors import BuildError

# The compiler (pydantic and the operator catalog: 0.3-0.5 s) only where used: `plangraph
# run` imports this module to spawn the head process, which must start importing Ray
# before the plan compiles.
if TYPE_CHECKING:
    from plangraph.compiler.capacity import Capacity
    from plangraph.runtime.local_head import LocalHead

ADDRESS_TIMEOUT_S = 5.0
"""How long (s) joining ``--address`` may take to reach the cluster before it is an error."""


def local_cpus() -> int:
    """CPUs this process may use (its affinity mask), as Ray counts them when started here."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cluster_cpus() -> int:
    """CPUs of the Ray cluster this process is connected to (Ray must be initialised)."""
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def cluster_capacity(address: str) -> Capacity:
    """What the Ray cluster at ``address`` reports: its alive nodes (``ray.nodes()``)
    with their resources (CPUs, memory for tasks and actors, GPUs, custom ones), and
    their totals; joins it for the call and leaves again, or reads the cluster this
    process is already connected to.

    Raises:
        BuildError: ``address`` is unreachable (see ``check_address``).
    """
    import ray

    from plangraph.compiler.capacity import Capacity, NodeCapacity

    joined_here = not ray.is_initialized()
    if joined_here:
        check_address(address)
        ray.init(
            address=address, include_dashboard=False, configure_logging=False, log_to_driver=False
        )
    try:
        nodes = sorted(
            (
                NodeCapacity.of(n["NodeID"], n.get("NodeManagerAddress", "?"), n["Resources"])
                for n in ray.nodes()
                if n.get("Alive")
            ),
            key=lambda n: n.node_id,
        )
    finally:
        if joined_here:
            ray.shutdown()
    return Capacity.of_nodes(f"the Ray cluster at {address}", tuple(nodes))


def max_workers(cpus: int) -> int:
    """The bound on remote rollout workers for ``cpus`` CPUs (``MAX_WORKERS_PER_CPU`` of
    ``plangraph.compiler.capacity`` each: one bound for the compiler's check and the
    build)."""
    from plangraph.compiler.capacity import MAX_WORKERS_PER_CPU

    return MAX_WORKERS_PER_CPU * max(1, cpus)


def _host_port(address: str) -> tuple[str, int] | None:
    """``"host:port"`` or ``"ray://host:port"`` -> ``(host, port)``; ``None`` for the
    addresses Ray resolves itself (``"auto"``, ``"local"``)."""
    rest = address.removeprefix("ray://")
    if rest in ("auto", "local"):
        return None
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BuildError(
            f"--address {address!r}: expected HOST:PORT of a Ray cluster's head node "
            "(e.g. 10.0.0.5:6379), ray://HOST:PORT, or auto"
        )
    return host.strip("[]"), int(port)


def check_address(address: str, *, timeout_s: float = ADDRESS_TIMEOUT_S) -> None:
    """Fail fast when nothing listens at ``address``: ``ray.init`` itself retries for
    minutes before giving up on an unreachable head node.

    Raises:
        BuildError: the address is malformed, the host is unknown, or no TCP connection
            opens within ``timeout_s`` seconds.
    """
    target = _host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout_s):
            pass
    except socket.gaierror as exc:
        raise BuildError(f"--address {address!r}: unknown host {target[0]!r} ({exc})") from None
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise BuildError(
            f"--address {address!r}: no Ray cluster reachable there ({reason} within "
            f"{timeout_s:g} s); is the head node up (`ray start --head`)?"
        ) from None


def ensure_ray(address: str | None = None) -> list[str]:
    """Start Ray on this machine, or join the cluster at ``address``; no dashboard. Does
    nothing when Ray is already initialised.

    On this machine, Ray's head node runs in a process of its own
    (``plangraph.runtime.local_head``): the one ``start_local_ray`` started ahead of time,
    or one started now; this process joins it. Where that head cannot start, Ray starts
    in-process (``ray.init()``), with a message saying why.

    Joining a cluster ships the user's own code with the job's ``runtime_env``
    (``py_modules``: ``plangraph.runtime.shipping.local_module_paths``), so that its
    nodes need only plangraph and the installed packages. Returns the paths shipped
    (``[]`` when nothing was, or Ray was already initialised).

    Raises:
        BuildError: ``address`` is unreachable (see ``check_address``).
    """
    import ray

    if ray.is_initialized():
        return []
    if address:
        from plangraph.runtime.shipping import local_module_paths

        check_address(address)
        shipped = local_module_paths()
        ray.init(
            address=address,
            include_dashboard=False,
            configure_logging=False,
            runtime_env={"py_modules": shipped} if shipped else None,
        )
        return shipped
    _join_local_head()
    return []


_head: LocalHead | None = None
"""The head-node process this process started (``spawn_local_head``), if any."""

_atexit_registered = False


def spawn_local_head() -> None:
    """Start the process that will run this machine's Ray head node
    (``plangraph.runtime.local_head``): it imports Ray, then waits for
    ``start_local_ray()``; until then, and if that never comes, Ray's processes do not
    start. Does nothing when Ray is initialised, a head process exists, or this is not a
    POSIX system (``ensure_ray`` then starts Ray in-process)."""
    global _head, _atexit_registered
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return
    if _head is not None or os.name != "posix":
        return
    from plangraph.runtime.local_head import LocalHead

    try:
        _head = LocalHead.spawn()
    except OSError as exc:  # no interpreter to spawn: ensure_ray starts Ray in-process
        print(f"plangraph: cannot start Ray's head node process ({exc})", file=sys.stderr)
        return
    if not _atexit_registered:
        # A process that exits without shutdown_ray() still stops its head on the way out.
        atexit.register(shutdown_ray)
        _atexit_registered = True


def start_local_ray() -> None:
    """Have this machine's Ray head node start in its own process, in the background (the
    one ``spawn_local_head`` started, or a new one), for ``ensure_ray()`` to join later;
    the caller goes on with work that does not need Ray. Does nothing when Ray is
    initialised or this is not a POSIX system."""
    spawn_local_head()
    if _head is not None:
        _head.start()


def _join_local_head() -> None:
    """Join the head started by ``start_local_ray`` (starting one now if there is none);
    where it cannot come up, say why and start Ray in-process, as ``ray.init()`` does."""
    global _head
    import ray

    from plangraph.runtime.local_head import HeadStartError, adopt_auth_mode

    if _head is not None and _head.joined:
        # Joined before, and Ray was shut down since (ray.shutdown() only disconnects
        # from a head): a new run gets a new Ray, as ray.init() would start.
        _head.stop()
        _head = None
    start_local_ray()
    if _head is not None:
        try:
            ready = _head.ready()
        except HeadStartError as exc:
            _head = None
            print(
                f"plangraph: Ray's head node did not start in its own process ({exc}); "
                "starting Ray in this one",
                file=sys.stderr,
            )
        else:
            try:
                adopt_auth_mode(ready.get("auth_mode"))
                ray.init(address=ready["address"], include_dashboard=False, configure_logging=False)
                _head.joined = True
            except BaseException:
                _head.stop()
                _head = None
                raise
            return
    ray.init(address="local", include_dashboard=False, configure_logging=False)


def _stop_autoscaler_monitor() -> None:
    """SIGKILL the autoscaler monitor of a Ray instance this process started, if any.

    ``ray.shutdown()`` stops the GCS before the monitor, then sends the monitor SIGTERM and
    waits up to 1 s for it: its SIGTERM handler reports its own termination to the GCS that
    is already gone and blocks until Ray gives up and kills it. A local instance has no
    autoscaler to report to, so killing the monitor first makes ``ray.shutdown`` about 1 s
    shorter and prints nothing. Reaches into Ray's private node object: on a Ray without
    it, this does nothing and ``ray.shutdown`` behaves as before.
    """
    import ray

    node = getattr(getattr(ray, "_private", None), "worker", None)
    node = getattr(node, "_global_node", None)
    processes = getattr(node, "all_processes", None)
    if not isinstance(processes, dict):
        return
    for info in processes.get("monitor", []):
        process = getattr(info, "process", None)
        if process is None or process.poll() is not None:
            continue
        try:
            process.kill()
            process.wait(timeout=1.0)
        except Exception:  # ray.shutdown kills whatever is left
            pass


def shutdown_ray() -> None:
    """Disconnect from Ray and stop what this process started: the head-node process of
    ``start_local_ray`` (waiting until every Ray process it started has exited), or, for
    Ray started in-process, ``ray.shutdown()`` made about 1 s faster (see
    ``_stop_autoscaler_monitor``). A process that joined a cluster only disconnects, as
    with ``ray.shutdown()``. Does nothing when there is neither.

    ``ray.shutdown()`` alone only disconnects from the head: its Ray processes stay until
    this function, the next ``ensure_ray()`` (which replaces the head) or the end of the
    process."""
    global _head
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        if _head is None:
            _stop_autoscaler_monitor()
        ray.shutdown()
    if _head is not None:
        _head.stop()
        _head = None
