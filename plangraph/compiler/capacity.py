"""What the machine (or Ray cluster) a plan will run on has: CPUs, memory, GPUs.

The "capacity" check (``resource_checks``) compares a plan's rollout workers with it.
:meth:`Capacity.local` reads this machine (its CPU affinity mask, as Ray counts CPUs when
started here, and ``MemTotal``); ``plangraph validate --cpus N --memory SIZE`` describes a
target machine instead, and ``--address`` asks a Ray cluster
(``plangraph.runtime.ray_session.cluster_capacity``; the only path that imports Ray).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["MAX_WORKERS_PER_CPU", "Capacity", "NodeCapacity", "local_gpus", "parse_size"]

MAX_WORKERS_PER_CPU = 4
"""The most remote rollout workers per CPU a run may start: each is a process with its
own envs and policy copy, so beyond this a run only thrashes (or waits for minutes).
``plangraph run`` refuses more (``plangraph.runtime.ray_session``)."""

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(text: str) -> int:
    """``"8GiB"``, ``"512M"``, ``"1.5g"``, ``"1073741824"`` -> bytes (binary units).

    Raises:
        ValueError: not a size.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if m is None:
        raise ValueError(
            f"{text!r} is not a memory size; write e.g. 8GiB, 512MiB or a number of bytes"
        )
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def _local_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _local_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                m = re.match(r"MemTotal:\s+(\d+)\s+kB", line)
                if m:
                    return int(m.group(1)) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def local_gpus() -> float | None:
    """NVIDIA GPUs of this machine as Ray would count them (``/proc/driver/nvidia/gpus``,
    limited by ``CUDA_VISIBLE_DEVICES``); ``None`` where that cannot be read (not Linux)."""
    if not os.path.isdir("/proc"):
        return None
    root = "/proc/driver/nvidia/gpus"
    found = len(os.listdir(root)) if os.path.isdir(root) else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        found = min(found, len([d for d in visible.split(",") if d.strip()]))
    return float(found)


@dataclass(frozen=True)
class NodeCapacity:
    """One node of a Ray cluster: ``node_id`` (hex), ``address`` (its IP), and the
    ``resources`` it offers as Ray names them (``CPU``, ``GPU``, ``memory`` in bytes,
    custom ones), as ``(name, amount)`` pairs sorted by name."""

    node_id: str
    address: str
    resources: tuple[tuple[str, float], ...]

    @classmethod
    def of(cls, node_id: str, address: str, resources: dict[str, float]) -> NodeCapacity:
        """From a resource dict; Ray's bookkeeping entries (``node:IP``,
        ``object_store_memory``) are left out."""
        kept = {
            k: float(v)
            for k, v in resources.items()
            if not k.startswith("node:") and k != "object_store_memory"
        }
        return cls(node_id, address, tuple(sorted(kept.items())))

    @property
    def amounts(self) -> dict[str, float]:
        return dict(self.resources)

    def label(self) -> str:
        """``"node 6f9fb34d10e9 (10.0.0.5)"``; a node without an address (``--node``): its
        id."""
        if not self.address:
            return self.node_id
        return f"node {self.node_id[:12]} ({self.address})"


@dataclass(frozen=True)
class Capacity:
    """What a plan may use. ``where``: how messages name it ("this machine", "the Ray
    cluster at 10.0.0.5:6379"); ``cpus`` (may be fractional on a cluster),
    ``memory_bytes`` (bytes) and ``gpus``: ``None`` when unknown (that part is not
    checked); ``nodes``: the cluster's nodes when known (``--address``, ``--node``), for
    the placement check and ``explain``; their custom resources count as known too."""

    where: str
    cpus: float | None = None
    memory_bytes: int | None = None
    gpus: float | None = None
    nodes: tuple[NodeCapacity, ...] | None = None

    @classmethod
    def local(cls) -> Capacity:
        """This machine: CPUs this process may use, total physical memory, GPUs."""
        return cls("this machine", float(_local_cpus()), _local_memory(), local_gpus())

    @classmethod
    def of_nodes(cls, where: str, nodes: tuple[NodeCapacity, ...]) -> Capacity:
        """A cluster of ``nodes``: CPUs, memory and GPUs are their sums."""
        total: dict[str, float] = {}
        for n in nodes:
            for k, v in n.resources:
                total[k] = total.get(k, 0.0) + v
        memory = total.get("memory")
        return cls(
            where,
            total.get("CPU", 0.0),
            int(memory) if memory is not None else None,
            total.get("GPU", 0.0),
            nodes,
        )

    def total(self, resource: str) -> float | None:
        """How much of ``resource`` (Ray's name: ``CPU``, ``GPU``, ``memory``, a custom
        one) there is in all; ``None`` when unknown."""
        if resource == "CPU":
            return self.cpus
        if resource == "GPU":
            return self.gpus
        if resource == "memory":
            return float(self.memory_bytes) if self.memory_bytes is not None else None
        if self.nodes is None:
            return None
        return sum(n.amounts.get(resource, 0.0) for n in self.nodes)

    @classmethod
    def unknown(cls) -> Capacity:
        """Nothing known: the capacity check reports nothing (e.g. ``plangraph run
        --address``, which checks the cluster once joined)."""
        return cls("an unknown machine")
