"""Starting or joining Ray for a run (the one place plangraph calls ``ray.init``)."""

from __future__ import annotations

import os
import socket
import sys
from typing import TYPE_CHECKING

from plangraph.errors import BuildError

if TYPE_CHECKING:
    from plangraph.compiler.capacity import Capacity

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
    """Start Ray on this machine (``ray.init(address="local")``), or join the cluster at
    ``address``; no dashboard. Does nothing when Ray is already initialised.

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
    if not address:
        # "local": a new Ray instance of this process's own, never one found running.
        ray.init(address="local", include_dashboard=False, configure_logging=False)
        return []
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


def shutdown_ray() -> None:
    """``ray.shutdown()`` if Ray is initialised in this process: stops the Ray instance
    this process started, or only disconnects from a cluster it joined."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
