"""What a plan asks of the machine it runs on: rollout worker processes against CPUs and
memory (``Capacity``: this machine, a target machine, or a Ray cluster).

What a plan requests: rollout workers (``WorkerSet.num_workers``; each one a Ray actor
process with its sub-envs and a policy copy), what Ray reserves for each
(``worker_resources``: CPUs, GPUs, memory, custom resources; by default nothing, so that
a small machine can still schedule them), how they are placed (``placement_strategy``)
and the learner's GPUs (``learner.num_gpus``). The totals are checked against the
machine or cluster (PG186); with the cluster's nodes known (``--address``, ``--node``)
the placement is replayed over them (``plangraph.compiler.placement``, PG187). Replay
buffers are sized against the memory actually available before Ray starts, from the
env's spaces (``plangraph.runtime.memory_check``), which the compiler cannot know.
"""

from __future__ import annotations

from typing import Any

from plangraph.compiler.capacity import MAX_WORKERS_PER_CPU, Capacity
from plangraph.compiler.context import Context, join_hints
from plangraph.compiler.placement import place_bundles
from plangraph.ops.resources import WorkerSetParams
from plangraph.text import brief

__all__ = [
    "DRIVER_BYTES",
    "WORKER_BYTES",
    "check_capacity",
    "check_replay_size",
    "replay_row_floor",
    "reserved_totals",
]

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


_FIELDS = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}


def _amount(resource: str, value: float) -> str:
    if resource == "memory":
        return _fmt_bytes(value)
    return f"{value:g} {resource}{'s' * (value != 1 and resource in ('CPU', 'GPU'))}"


def _bundle_text(bundle: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {_amount(k, v)}" for k, v in bundle.items()) + "}"


def _pointer(rid: str, resource: str) -> str:
    field = _FIELDS.get(resource)
    if field is None:
        return f"/resources/{rid}/params/worker_resources/resources/{resource}"
    return f"/resources/{rid}/params/worker_resources/{field}"


def reserved_totals(sets: list[tuple[str, WorkerSetParams]]) -> dict[str, float]:
    """What the worker sets reserve in all, by Ray resource name: every remote worker's
    bundle, plus the learners' GPUs."""
    total: dict[str, float] = {}
    for _, ws in sets:
        for k, v in ws.worker_resources.bundle().items():
            total[k] = total.get(k, 0.0) + v * ws.num_workers
        if ws.learner.num_gpus:
            total["GPU"] = total.get("GPU", 0.0) + ws.learner.num_gpus
    return dict(sorted(total.items()))


def _check_reservations(ctx: Context, sets: list[tuple[str, WorkerSetParams]]) -> None:
    """PG186 (totals), PG187 (placement on known nodes), PG188 (empty bundles), PG189."""
    cap: Capacity = ctx.capacity
    for rid, ws in sets:
        if (
            ws.placement_strategy is not None
            and ws.num_workers
            and not (ws.worker_resources.bundle())
        ):
            ctx.report(
                "PG188",
                f"WorkerSet {brief(rid)} places its rollout workers {ws.placement_strategy} "
                "through a placement group, but each worker reserves nothing "
                "(worker_resources is all zeros) and Ray refuses empty bundles",
                pointer=f"/resources/{rid}/params/placement_strategy",
                hint="reserve a resource per worker, e.g. "
                f"{ctx.set_text(f'{rid}.worker_resources.num_cpus', 1)}, or drop "
                "placement_strategy (null)",
            )
        if ws.learner.num_gpus and ws.learner.device == "cpu":
            ctx.report(
                "PG189",
                f'the learner of WorkerSet {brief(rid)} trains on device "cpu" but counts '
                f"learner.num_gpus={ws.learner.num_gpus:g} GPU(s) against {cap.where}: "
                "they stay unused",
                pointer=f"/resources/{rid}/params/learner/num_gpus",
                hint='set learner.device to "auto" or "cuda", or learner.num_gpus to 0',
            )
    short: set[str] = set()  # worker sets already over a total: placing them says nothing new
    for resource, want in reserved_totals(sets).items():
        have = cap.total(resource)
        if have is None or want <= have + 1e-9:
            continue

        # Point at the worker set asking for the most of it (its workers, else its learner).
        def share(s: tuple[str, WorkerSetParams], res: str = resource) -> float:
            return s[1].worker_resources.bundle().get(res, 0.0) * s[1].num_workers

        rid, ws = max(sets, key=share)
        per = ws.worker_resources.bundle().get(resource, 0.0)
        if per:
            pointer = _pointer(rid, resource)
            asks = f"{ws.num_workers} rollout workers x {_amount(resource, per)}"
            fix = (
                "reserve less per worker ("
                + ctx.set_text(
                    f"{rid}.worker_resources.{_FIELDS.get(resource, 'resources.' + resource)}",
                    placeholder="...",
                )
                + "), fewer workers, "
                "or a machine or cluster that has it"
            )
        else:
            pointer, asks = f"/resources/{rid}/params/learner/num_gpus", "the learner"
            fix = f"lower {rid}.learner.num_gpus, or run where there are GPUs"
        short.add(rid)
        learner = sum(s[1].learner.num_gpus for s in sets) if resource == "GPU" else 0.0
        parts = asks + (f" + {learner:g} for the learner" if learner and per else "")
        ctx.report(
            "PG186",
            f"the plan reserves {_amount(resource, want)} ({parts}), more than the "
            f"{_amount(resource, have)} of {cap.where}: Ray would never start "
            f"{'them' if per else 'it'}, and the run would wait forever",
            pointer=pointer,
            hint=fix,
        )
    if cap.nodes is None:
        return
    free = [n.amounts for n in cap.nodes]
    for rid, ws in sets:
        bundle = ws.worker_resources.bundle()
        if not bundle or not ws.num_workers or rid in short:
            continue
        placed = place_bundles(bundle, ws.num_workers, ws.placement_strategy, cap.nodes, free)
        if placed.problem is None:
            continue
        largest = max(cap.nodes, key=lambda n: tuple(n.amounts.get(k, 0.0) for k in bundle))
        how = ws.placement_strategy or "without a placement group"
        ctx.report(
            "PG187",
            f"WorkerSet {brief(rid)}: {ws.num_workers} rollout workers of "
            f"{_bundle_text(bundle)} each cannot be placed {how} on the "
            f"{len(cap.nodes)} node{'s' * (len(cap.nodes) != 1)} of {cap.where}: "
            f"{placed.problem} (the largest, {largest.label()}, offers "
            f"{_bundle_text({k: largest.amounts.get(k, 0.0) for k in bundle})})",
            pointer=f"/resources/{rid}/params/"
            + ("placement_strategy" if ws.placement_strategy else "worker_resources"),
            hint="use PACK or SPREAD, fewer workers, smaller worker_resources, or add nodes"
            if ws.placement_strategy == "STRICT_SPREAD"
            else "reserve less per worker, use fewer workers, or add nodes",
        )


def check_capacity(ctx: Context) -> None:
    """Rollout workers fit the CPUs and memory of the machine or Ray cluster; what they
    (and the learners) reserve fits its resources and, on known nodes, its placement."""
    cap: Capacity = ctx.capacity
    sets = _worker_sets(ctx)
    if not sets:
        return
    _check_reservations(ctx, sets)
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


_DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
}


def _space_bytes(space: Any) -> int | None:
    """Bytes of one value of ``space`` (a ``SpaceInfo``), or None when unknown."""
    size = _DTYPE_BYTES.get(space.dtype or "")
    if size is None:
        return None
    for dim in space.shape:
        size *= int(dim)
    return size


def replay_row_floor(spaces: Any) -> int | None:
    """A lower bound of the bytes one replayed row takes (``spaces``: the env's
    ``EnvSpaces``): its observation and its action, as the env gives them; the
    rows hold more (rewards, flags, the next observation for replay learners), so the
    runtime's estimate (``plangraph.runtime.memory_check``) is larger. None when a space's
    size is unknown (``Dict``, ``Tuple``)."""
    obs, act = _space_bytes(spaces.observation), _space_bytes(spaces.action)
    return None if obs is None or act is None else obs + act


def _feeding_worker_set(ctx: Context, rid: str) -> str | None:
    """The first worker set read upstream of (or by) a writer of replay ``rid``."""
    sets = {r for r, p in ctx.res_params.items() if isinstance(p, WorkerSetParams)}
    for w in ctx.writers.get(rid, []):
        if w not in ctx.plan.nodes or w in ctx.topology.cyclic:
            continue
        up = ctx.topology.ancestors(w) | {w}
        for ws in sorted(sets):
            if any(n in up for n in ctx.readers.get(ws, [])):
                return ws
    return None


def check_replay_size(ctx: Context) -> None:
    """Each replay buffer, when full, fits the memory of the machine (or cluster) the plan
    runs on, by a lower bound from its env's spaces (PG196, a warning: the build refuses it
    with the exact estimate, PG185, before Ray starts)."""
    from plangraph.compiler.env_spaces import env_spaces

    memory = ctx.capacity.memory_bytes
    if memory is None:
        return
    for rid, res in ctx.plan.resources.items():
        p = ctx.res_params.get(rid)
        capacity = getattr(p, "capacity", None)
        if res.kind not in ("ReplayBuffer", "ReplayActors") or not isinstance(capacity, int):
            continue
        ws_id = _feeding_worker_set(ctx, rid)
        ws = ctx.res_params.get(ws_id) if ws_id is not None else None
        if not isinstance(ws, WorkerSetParams) or ws.policy is None:
            continue  # no feeder, or multi-agent rows (one per policy): not estimated
        spaces = env_spaces(ws.env, ws.wrappers)
        row = replay_row_floor(spaces) if spaces is not None else None
        if not row or capacity * row <= memory:
            continue
        fit = memory // row
        ctx.report(
            "PG196",
            f"{res.kind} {brief(rid)} holds capacity={capacity} env steps; full, it needs at "
            f"least {_fmt_bytes(capacity * row)} ({row} bytes per row for the observation "
            f"and action of {brief(ws.env)} alone), more than the "
            f"{_fmt_bytes(memory)} of {ctx.capacity.where}: it could never fill, and "
            "`plangraph run` refuses it before starting",
            pointer=f"/resources/{rid}/params/capacity",
            hint=join_hints(
                f"lower capacity well below {fit} env steps (`plangraph validate "
                "--replay-memory` prints the full estimate)",
                ctx.config_hint(res.params, ["capacity"], f"a value < {fit}"),
            ),
        )
