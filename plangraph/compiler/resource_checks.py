"""What a plan asks of the machine it runs on: rollout worker processes against CPUs and
memory (``Capacity``: this machine, a target machine, or a Ray cluster).

What a plan can request today is rollout workers (``WorkerSet.num_workers``; each one a
Ray actor process with its sub-envs and a policy copy, reserving no Ray CPUs so that a
small machine can still schedule them). No plan param requests GPUs. Replay buffers are
sized against the memory actually available before Ray starts, from the env's spaces
(``plangraph.runtime.memory_check``), which the compiler cannot know.
"""

from __future__ import annotations

from plangraph.compiler.capacity import MAX_WORKERS_PER_CPU, Capacity
from plangraph.compiler.context import Context, join_hints
from plangraph.ops.resources import WorkerSetParams
from plangraph.text import brief

__all__ = ["DRIVER_BYTES", "WORKER_BYTES", "check_capacity"]

WORKER_BYTES = 370 * 2**20
"""Resident memory of one rollout worker process (bytes): measured 368 MiB (VmRSS) for a
CartPole-v1 worker with 8 sub-envs, torch 2.13 CPU and a Ray 2 worker, after its first
sample; bigger envs and policies need more, so this is a lower bound."""

DRIVER_BYTES = 400 * 2**20
"""Resident memory of the driver (learner policy, Ray's core worker; bytes), measured
like :data:`WORKER_BYTES` (391 MiB); replay buffers come on top."""


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _cpus(c: float) -> str:
    return f"{c:g} CPU{'s' * (c != 1)}"


def _worker_sets(ctx: Context) -> list[tuple[str, WorkerSetParams]]:
    """The valid worker sets some node uses (an unused one is PG162's to report)."""
    return [
        (rid, p)
        for rid, p in ctx.res_params.items()
        if isinstance(p, WorkerSetParams) and (ctx.readers.get(rid) or ctx.writers.get(rid))
    ]


def _num_workers_hint(ctx: Context, rid: str, wanted: str, advice: str) -> str:
    """``advice``, and where a ``${key}`` num_workers comes from (config, --set)."""
    raw = ctx.plan.resources[rid].params
    return join_hints(advice, ctx.config_hint(raw, ["num_workers"], wanted)) or advice


def check_capacity(ctx: Context) -> None:
    """Rollout workers fit the CPUs and memory of the machine or Ray cluster."""
    cap: Capacity = ctx.capacity
    sets = _worker_sets(ctx)
    if not sets:
        return
    where = cap.where
    too_many = False
    if cap.cpus is not None:
        bound = int(MAX_WORKERS_PER_CPU * max(1.0, cap.cpus))
        for rid, ws in sets:
            if ws.num_workers <= bound:
                continue
            too_many = True
            ctx.report(
                "PG179",
                f"WorkerSet {brief(rid)} asks for num_workers={ws.num_workers} rollout "
                f"workers, more than {where} can run: at most {bound} ({MAX_WORKERS_PER_CPU} "
                f"per CPU x {_cpus(cap.cpus)}); `plangraph run` would refuse to start it",
                pointer=f"/resources/{rid}/params/num_workers",
                hint=_num_workers_hint(
                    ctx,
                    rid,
                    f"a value <= {bound}",
                    f"lower num_workers to at most {bound} (--num-workers on plangraph run), "
                    "or run on a Ray cluster with more CPUs (--address)",
                ),
            )
    total = sum(ws.num_workers for _, ws in sets)
    # The largest worker set is where a fix most likely goes.
    rid, _ = max(sets, key=lambda s: s[1].num_workers)
    per_set = ", ".join(f"{brief(r)}: {ws.num_workers}" for r, ws in sets)
    count = f"{total} rollout worker{'s' * (total != 1)} ({per_set})"
    if cap.cpus is not None and cap.cpus < total <= MAX_WORKERS_PER_CPU * max(1.0, cap.cpus):
        fit = max(1, int(cap.cpus))
        ctx.report(
            "PG180",
            f"the plan's {count} are more than the {_cpus(cap.cpus)} of {where}: each worker "
            "is a busy process, so they share the cores with each other and with the learner "
            f"in the driver, and sampling gets no faster than with {fit} (unless the env "
            "mostly waits, e.g. on a simulator or the network)",
            pointer=f"/resources/{rid}/params/num_workers",
            hint=_num_workers_hint(
                ctx,
                rid,
                f"a value <= {fit}",
                f"use at most {fit} rollout worker{'s' * (fit != 1)} here, or a Ray cluster "
                "with more CPUs (--address)",
            ),
        )
    if cap.memory_bytes is not None and total > 0 and not too_many:
        need = total * WORKER_BYTES + DRIVER_BYTES
        if need > cap.memory_bytes:
            fit = max(0, (cap.memory_bytes - DRIVER_BYTES) // WORKER_BYTES)
            ctx.report(
                "PG181",
                f"the plan's {count} need about {_fmt_bytes(need)} of memory (at least "
                f"{_fmt_bytes(WORKER_BYTES)} per worker process, plus "
                f"{_fmt_bytes(DRIVER_BYTES)} for the driver), more than the "
                f"{_fmt_bytes(cap.memory_bytes)} of {where}: workers would swap or be "
                "killed by the OS or Ray's memory monitor",
                pointer=f"/resources/{rid}/params/num_workers",
                hint=_num_workers_hint(
                    ctx,
                    rid,
                    f"a value <= {fit}",
                    f"use at most {fit} rollout worker{'s' * (fit != 1)} (about "
                    f"{_fmt_bytes(fit * WORKER_BYTES + DRIVER_BYTES)}), or a machine or "
                    "cluster with more memory",
                ),
            )
