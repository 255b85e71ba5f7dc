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

__all__ = ["MAX_WORKERS_PER_CPU", "Capacity", "parse_size"]

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


@dataclass(frozen=True)
class Capacity:
    """What a plan may use. ``where``: how messages name it ("this machine", "the Ray
    cluster at 10.0.0.5:6379"); ``cpus`` (may be fractional on a cluster),
    ``memory_bytes`` (bytes) and ``gpus``: ``None`` when unknown (that part is not
    checked)."""

    where: str
    cpus: float | None = None
    memory_bytes: int | None = None
    gpus: float | None = None

    @classmethod
    def local(cls) -> Capacity:
        """This machine: CPUs this process may use, total physical memory."""
        return cls("this machine", float(_local_cpus()), _local_memory())

    @classmethod
    def unknown(cls) -> Capacity:
        """Nothing known: the capacity check reports nothing (e.g. ``plangraph run
        --address``, which checks the cluster once joined)."""
        return cls("an unknown machine")
