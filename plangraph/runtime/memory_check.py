"""Refuse, before Ray starts, replay buffers that cannot fit in the machine's memory.

A replay buffer lives in the driver process and holds ``capacity`` rows of the batches its
writer's worker set samples. The bytes per row follow from one env's observation and
action spaces and the policy config (``plangraph.rl.rollout_worker.sample_row_layout``);
``plangraph.rl.replay_buffer.replay_nbytes`` turns that into the bytes of a full buffer.
The sum over the plan's buffers is compared with the memory available now (Linux
``MemAvailable``), so a plan whose buffers can never fill is rejected with the estimate
instead of failing an allocation after workers have started (buffers grow as data
arrives, so the failure would come much later).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plangraph.errors import BuildError

if TYPE_CHECKING:
    from plangraph.compiler import CompiledPlan

_GIB = 1024**3


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"`` (binary units, one decimal)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def available_memory_bytes() -> int | None:
    """Memory available to new allocations without swapping, in bytes; ``None`` if unknown.

    Linux ``/proc/meminfo`` ``MemAvailable`` (the kernel's estimate, counting reclaimable
    page cache), else free physical pages from ``sysconf``.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                m = re.match(r"MemAvailable:\s+(\d+)\s+kB", line)
                if m:
                    return int(m.group(1)) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


@dataclass(frozen=True)
class ReplayEstimate:
    """Memory of one full replay buffer: ``nbytes`` in total, ``row_bytes`` per env step."""

    resource: str
    capacity: int
    row_bytes: int
    nbytes: int
    capacity_key: str | None  # the config key that sets capacity, if it is a ${ref}
    prioritized: bool = False


def estimate_replay_memory(
    compiled: CompiledPlan,
    params: Mapping[str, Any],
    envs: Mapping[str, Any] | None = None,
) -> list[ReplayEstimate]:
    """One estimate per ``ReplayBuffer`` resource that some worker set writes to.

    Creates (and closes) one env per distinct env of those worker sets, in-process.

    Args:
        compiled: the plan.
        params: validated resource params by resource id (overrides applied).
        envs: env creators by worker set id (``resolve_worker_env``); default: each
            worker set's ``env`` id.
    """
    from plangraph.rl.replay_buffer import replay_nbytes
    from plangraph.rl.rollout_worker import env_creator, sample_row_layout

    spaces: dict[Any, tuple[Any, Any]] = {}
    out = []
    for rid, res in sorted(compiled.resources.items()):
        if res.kind != "ReplayBuffer":
            continue
        feeders = sorted(
            {ws for w in res.writers for ws in compiled.nodes[w].fed_by.get("WorkerSet", ())}
        )
        if not feeders:
            continue
        ws_params = params[feeders[0]]
        env_spec = (envs or {}).get(feeders[0])
        if env_spec is None:
            env_spec = ws_params.env
            if ws_params.wrappers:  # the replay rows hold what the wrappers return
                from plangraph.rl.wrappers import WrappedEnvCreator

                env_spec = WrappedEnvCreator(ws_params.env, ws_params.wrappers)
        key = id(env_spec) if callable(env_spec) else env_spec
        if key not in spaces:
            env = env_creator(env_spec)()
            try:
                spaces[key] = (env.observation_space, env.action_space)
            finally:
                env.close()
        layout = sample_row_layout(*spaces[key], ws_params.policy)
        p = params[rid]
        row = replay_nbytes(1, layout)
        raw = compiled.plan.resources[rid].params.get("capacity")
        ref = re.fullmatch(r"\$\{(\w+)\}", raw) if isinstance(raw, str) else None
        out.append(
            ReplayEstimate(
                resource=rid,
                capacity=p.capacity,
                row_bytes=row,
                nbytes=replay_nbytes(p.capacity, layout, p.prioritized),
                capacity_key=ref.group(1) if ref else None,
                prioritized=p.prioritized,
            )
        )
    return out


def check_replay_memory(
    compiled: CompiledPlan,
    params: Mapping[str, Any],
    available: int | None = None,
    *,
    envs: Mapping[str, Any] | None = None,
) -> list[ReplayEstimate]:
    """Raise unless the plan's full replay buffers fit in ``available`` bytes (default:
    ``available_memory_bytes()``; unknown memory skips the check).

    Returns:
        the estimates (for a caller that reports them).

    Raises:
        BuildError: the buffers together need more than the available memory; the message
            gives each estimate in binary units and the largest capacity that would fit.
    """
    estimates = estimate_replay_memory(compiled, params, envs)
    if available is None:
        available = available_memory_bytes()
    total = sum(e.nbytes for e in estimates)
    if available is None or total <= available:
        return estimates
    needs = "; ".join(
        f"replay buffer {e.resource!r} of capacity {e.capacity:,} env steps needs about "
        f"{format_bytes(e.nbytes)} ({e.row_bytes} bytes per env step)"
        for e in estimates
    )
    hints = []
    for e in estimates:
        how = f"--set {e.capacity_key}=N" if e.capacity_key else f"resource {e.resource!r}"
        hint = f"lower the capacity ({how})"
        if len(estimates) == 1:
            # PER trees: 32 bytes per leaf, up to 64 per env step with power-of-two leaves.
            per_step = e.row_bytes + (64 if e.prioritized else 0)
            hint += f"; about {available // per_step:,} env steps fit"
        hints.append(hint)
    raise BuildError(
        f"{needs}, but only {format_bytes(available)} of memory is available: {'; '.join(hints)}"
    )
