"""Refuse replay that cannot fit in memory, before any actor starts.

A ``ReplayBuffer`` lives in the driver process and holds ``capacity`` rows of the batches
its writer's worker set samples; a ``ReplayActors`` resource holds them in ``num_shards``
Ray actors, each a buffer of its share (``shard_split``). The bytes per row follow from one
env's observation and action spaces and the policy config
(``plangraph.rl.row_layout.sample_row_layout``); ``plangraph.rl.replay_buffer.
replay_nbytes`` turns that into the bytes of a full buffer (per shard, summed).

* Driver buffers are compared with the memory available now (Linux ``MemAvailable``)
  before Ray starts (``check_replay_memory``), so a plan whose buffers can never fill is
  rejected with the estimate instead of failing an allocation after workers have started
  (buffers grow as data arrives, so the failure would come much later).
* Replay actors are compared with the memory Ray reports available (``ray.
  available_resources()["memory"]``) once Ray is up, before the shards start
  (``check_replay_actor_memory``); the refusal is a located PG185 diagnostic. Each shard
  actor then reserves its estimate as Ray ``memory``, so Ray places it where it fits.
* A ``MixInReplay`` node keeps a ring of ``num_slots`` batches in the driver: it is
  estimated as a driver buffer of ``num_slots`` x the env steps of each batch it stores
  (one rollout fragment after an ``async`` ``ParallelRollouts``, one round of every worker's
  after a ``bulk_sync`` one) and checked with the ``ReplayBuffer`` resources.
* ``replay_memory_diagnostics`` gives the same PG185 for any replay against a given
  amount (``plangraph validate --memory``); ``replay_memory_notes`` the lines
  ``plangraph explain`` prints.

No torch and no ray are imported here (``explain`` and ``validate`` use it).
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
    """Memory of one full replay resource: ``nbytes`` in total, ``row_bytes`` per env step;
    for ``ReplayActors`` also ``shard_nbytes`` (one entry per shard)."""

    resource: str
    capacity: int
    row_bytes: int
    nbytes: int
    capacity_key: str | None  # the config key that sets capacity, if it is a ${ref}
    prioritized: bool = False
    kind: str = "ReplayBuffer"
    shard_nbytes: tuple[int, ...] = ()
    env: str = ""
    slots: int = 0  # MixInReplay: its num_slots (``resource`` is then the node id)

    @property
    def slots_text(self) -> str:
        return f"{self.slots:,} slots of {self.capacity // max(self.slots, 1):,} env steps"

    @property
    def pointer(self) -> str:
        """Where the plan sets the size: the replay resource's ``capacity`` or the
        ``MixInReplay`` node's ``num_slots``."""
        if self.kind == "MixInReplay":
            return f"/nodes/{self.resource}/params/num_slots"
        return f"/resources/{self.resource}/params/capacity"

    @property
    def what(self) -> str:
        """``"replay buffer 'replay'"``, ``"replay actors 'replay' (4 shards)"`` or
        ``"MixInReplay 'mixin' (16 slots of 256 env steps)"``."""
        if self.kind == "MixInReplay":
            return f"MixInReplay {self.resource!r} ({self.slots_text})"
        if self.kind == "ReplayActors":
            n = len(self.shard_nbytes)
            return f"replay actors {self.resource!r} ({n} shard{'s' if n != 1 else ''})"
        return f"replay buffer {self.resource!r}"


def estimate_replay_memory(
    compiled: CompiledPlan,
    params: Mapping[str, Any],
    envs: Mapping[str, Any] | None = None,
    kinds: tuple[str, ...] = ("ReplayBuffer", "ReplayActors", "MixInReplay"),
) -> list[ReplayEstimate]:
    """One estimate per replay resource (``ReplayBuffer``, ``ReplayActors``) that some
    worker set writes to, and per ``MixInReplay`` node whose batches' size is known
    (module doc; ``kinds`` names ``"MixInReplay"`` for those).

    Creates (and closes) one env per distinct env of those worker sets, in-process.

    Args:
        compiled: the plan.
        params: validated resource params by resource id (overrides applied).
        envs: env creators by worker set id (``resolve_worker_env``, inside the declared
            wrappers); default: each worker set's ``env`` id inside its ``wrappers``.
        kinds: the replay kinds to estimate.

    Raises:
        gymnasium.error.Error, ImportError: an env cannot be made.
    """
    from plangraph.ops.resources import shard_split
    from plangraph.rl.replay_buffer import replay_nbytes
    from plangraph.rl.row_layout import env_spaces, sample_row_layout
    from plangraph.rl.wrappers import with_wrappers

    spaces: dict[Any, tuple[Any, Any]] = {}
    out = []
    # (id, kind, worker sets that feed it): replay resources, then MixInReplay nodes.
    stores: list[tuple[str, Any, list[str]]] = []
    for rid, res in sorted(compiled.resources.items()):
        if res.kind in kinds and res.kind != "MixInReplay":
            writers = [w for w in res.writers if w in compiled.nodes]
            fed = {ws for w in writers for ws in compiled.nodes[w].fed_by.get("WorkerSet", ())}
            stores.append((rid, res, sorted(fed)))
    if "MixInReplay" in kinds:
        for nid in sorted(_mixin_rows(compiled)):
            feeds = compiled.nodes[nid].fed_by.get("WorkerSet", ())
            stores.append((nid, _MixIn(), sorted(feeds)))
    for rid, res, feeders in stores:
        if not feeders:
            continue
        ws_params = params[feeders[0]]
        if getattr(ws_params, "policy", None) is None:
            continue  # multi-agent rows (per policy): not estimated here
        env_spec = (envs or {}).get(feeders[0])
        if env_spec is None:  # the replay rows hold what the wrappers return
            env_spec = with_wrappers(ws_params.env, ws_params.wrappers)
        env_key = id(env_spec) if callable(env_spec) else env_spec
        if env_key not in spaces:
            spaces[env_key] = env_spaces(env_spec)
        layout = sample_row_layout(*spaces[env_key], ws_params.policy)
        if res.kind == "MixInReplay":
            out.append(_mixin_estimate(compiled, rid, ws_params, layout))
            continue
        p = params[rid]
        # A sequence buffer keeps its trees whether or not it is prioritized.
        trees = p.prioritized or p.item == "sequence"
        row = replay_nbytes(1, layout)
        raw = compiled.plan.resources[rid].params.get("capacity")
        key = re.fullmatch(r"\$\{(\w+)\}", raw) if isinstance(raw, str) else None
        if res.kind == "ReplayActors":
            shards = tuple(
                replay_nbytes(c, layout, trees) for c in shard_split(p.capacity, p.num_shards)
            )
            nbytes = sum(shards)
        else:
            shards, nbytes = (), replay_nbytes(p.capacity, layout, trees)
        out.append(
            ReplayEstimate(
                resource=rid,
                capacity=p.capacity,
                row_bytes=row,
                nbytes=nbytes,
                capacity_key=key.group(1) if key else None,
                prioritized=trees,
                kind=res.kind,
                shard_nbytes=shards,
                env=str(ws_params.env),
            )
        )
    return out


class _MixIn:
    kind = "MixInReplay"


def _mixin_rows(compiled: CompiledPlan) -> dict[str, int]:
    """Env steps of each batch a ``MixInReplay`` node stores, by node id, where known: the
    node reads (through operators that keep items whole) a ``ParallelRollouts`` of a
    single-policy worker set with an integer fragment length (``executed`` plan)."""
    executed = compiled.executed
    keep = {"UpdateWorkerWeights", "StandardizeFields", "Duplicate", "StoreToReplay"}
    out = {}
    for nid, node in executed.nodes.items():
        if node.op != "MixInReplay" or node.params is None or len(node.inputs) != 1:
            continue
        src = node.inputs[0]
        while executed.nodes[src].op in keep and len(executed.nodes[src].inputs) == 1:
            src = executed.nodes[src].inputs[0]
        source = executed.nodes[src]
        if source.op != "ParallelRollouts" or source.params is None:
            continue
        ref = getattr(source.params, "workers", "")
        ws = executed.resources.get(ref[1:]) if isinstance(ref, str) else None
        wp: Any = ws.params if ws is not None else None  # WorkerSetParams
        frag = getattr(wp, "rollout_fragment_length", None)
        if wp is None or not isinstance(frag, int):
            continue
        rows = wp.num_envs_per_worker * frag
        if getattr(source.params, "mode", None) == "bulk_sync":
            rows *= max(1, wp.num_workers)
        out[nid] = rows
    return out


def _mixin_estimate(
    compiled: CompiledPlan, nid: str, ws_params: Any, layout: Mapping[str, Any]
) -> ReplayEstimate:
    """The ring of ``MixInReplay`` node ``nid``: ``num_slots`` batches of its rows, held
    as the batches' columns (no insertion ids, no trees)."""
    from plangraph.rl.replay_buffer import replay_nbytes

    rows = _mixin_rows(compiled)[nid]
    node = compiled.executed.nodes[nid]
    slots = int(node.params.num_slots)  # type: ignore[union-attr]
    row = replay_nbytes(1, layout) - 8  # the columns only: a slot is a SampleBatch
    raw = compiled.plan.nodes[nid].params.get("num_slots")
    key = re.fullmatch(r"\$\{(\w+)\}", raw) if isinstance(raw, str) else None
    return ReplayEstimate(
        resource=nid,
        capacity=slots * rows,
        row_bytes=row,
        nbytes=slots * rows * row,
        capacity_key=key.group(1) if key else None,
        kind="MixInReplay",
        env=str(ws_params.env),
        slots=slots,
    )


def check_replay_memory(
    compiled: CompiledPlan,
    params: Mapping[str, Any],
    available: int | None = None,
    *,
    envs: Mapping[str, Any] | None = None,
) -> list[ReplayEstimate]:
    """Raise unless the plan's full driver-side replay buffers (``ReplayBuffer``) fit in
    ``available`` bytes (default: ``available_memory_bytes()``; unknown memory skips the
    check). Replay actors are checked against Ray's memory: ``check_replay_actor_memory``.

    Returns:
        the estimates (for a caller that reports them).

    Raises:
        BuildError: the buffers together need more than the available memory; the message
            gives each estimate in binary units and the largest capacity that would fit.
    """
    estimates = estimate_replay_memory(
        compiled, params, envs, kinds=("ReplayBuffer", "MixInReplay")
    )
    if available is None:
        available = available_memory_bytes()
    total = sum(e.nbytes for e in estimates)
    if available is None or total <= available:
        return estimates
    needs = "; ".join(
        f"{e.what} of capacity {e.capacity:,} env steps needs about "
        f"{format_bytes(e.nbytes)} ({e.row_bytes} bytes per env step)"
        for e in estimates
    )
    hints = []
    for e in estimates:
        what = "num_slots" if e.kind == "MixInReplay" else "the capacity"
        hint = f"lower {what} ({_how(e, python=True)})"
        if len(estimates) == 1:
            # PER trees: 32 bytes per leaf, up to 64 per env step with power-of-two leaves.
            per_step = e.row_bytes + (64 if e.prioritized else 0)
            if e.kind == "MixInReplay":
                per_slot = per_step * (e.capacity // max(e.slots, 1))
                hint += f"; about {available // per_slot:,} slots fit"
            else:
                hint += f"; about {available // per_step:,} env steps fit"
        hints.append(hint)
    raise BuildError(
        f"{needs}, but only {format_bytes(available)} of memory is available: {'; '.join(hints)}"
    )


def _how(e: ReplayEstimate, python: bool) -> str:
    """Where the capacity is set: its config key as ``--set``, and as ``config=`` too when
    the caller may be Python (a build; ``plangraph validate`` is the command line's)."""
    if not e.capacity_key:
        return f"node {e.resource!r}" if e.kind == "MixInReplay" else f"resource {e.resource!r}"
    key = e.capacity_key
    return f"--set {key}=N" + (f", or config={{{key!r}: N}} from Python" if python else "")


def _fit_hint(e: ReplayEstimate, available: int, python: bool) -> str:
    # PER trees: 32 bytes per leaf, up to 64 per env step with power-of-two leaves.
    per_step = e.row_bytes + (64 if e.prioritized else 0)
    if e.kind == "MixInReplay":
        per_slot = per_step * (e.capacity // max(e.slots, 1))
        return f"lower num_slots ({_how(e, python)}): about {available // per_slot:,} slots fit"
    return f"lower the capacity ({_how(e, python)}): about {available // per_step:,} env steps fit"


def replay_memory_diagnostics(
    compiled: CompiledPlan,
    estimates: list[ReplayEstimate],
    available: int,
    where: str,
    *,
    python: bool = False,
) -> list[Any]:
    """PG185 diagnostics when the ``estimates`` together need more than ``available``
    bytes (``where``: who reports that memory, for the message); one per resource, located
    at its ``capacity``; ``[]`` when they fit. ``python``: the hint also spells the fix as
    ``config=`` (a build, which Python or the command line may have started)."""
    from plangraph.compiler.diagnostics import Diagnostic

    total = sum(e.nbytes for e in estimates)
    if total <= available:
        return []
    out = []
    for e in estimates:
        per_shard = ""
        if e.shard_nbytes:
            per_shard = f", {format_bytes(max(e.shard_nbytes))} per shard x {len(e.shard_nbytes)}"
        others = (
            f" ({format_bytes(total)} with the plan's other replay)" if len(estimates) > 1 else ""
        )
        share = available * e.nbytes // total
        out.append(
            Diagnostic(
                "PG185",
                f"{e.what} of capacity {e.capacity:,} env steps needs about "
                f"{format_bytes(e.nbytes)} when full ({e.row_bytes} bytes per env step of "
                f"{e.env}{per_shard}){others}, but {where} only {format_bytes(available)}",
                node=e.resource if e.kind == "MixInReplay" else None,
                pointer=e.pointer,
                location=(
                    compiled.nodes[e.resource].location
                    if e.kind == "MixInReplay"
                    else compiled.resources[e.resource].location
                ),
                hint=f"{_fit_hint(e, share, python)}; or run where more memory is free",
            )
        )
    return out


def ray_available_memory() -> int | None:
    """Bytes of ``memory`` Ray reports available now (all nodes), or ``None``."""
    import ray

    memory = ray.available_resources().get("memory")
    return int(memory) if memory is not None else None


def check_replay_actor_memory(
    compiled: CompiledPlan,
    params: Mapping[str, Any],
    available: int | None = None,
    *,
    envs: Mapping[str, Any] | None = None,
    where: str = "Ray reports",
) -> list[ReplayEstimate]:
    """Raise unless the plan's replay actors fit in the memory Ray reports available
    (``available`` bytes if given, which ``where`` names in the message; without it, call
    with Ray running). Returns their estimates.

    Raises:
        BuildError: they do not fit; the message is the located PG185 diagnostic(s) with
            the estimate and the memory Ray reports.
    """
    estimates = estimate_replay_memory(compiled, params, envs, kinds=("ReplayActors",))
    if not estimates:
        return estimates
    if available is None:
        available = ray_available_memory()
    if available is None:
        return estimates
    problems = replay_memory_diagnostics(compiled, estimates, available, where, python=True)
    if problems:
        raise BuildError("\n".join(d.format() for d in problems))
    return estimates


def replay_memory_notes(compiled: CompiledPlan, params: Mapping[str, Any]) -> dict[str, list[str]]:
    """What ``plangraph explain`` prints under each replay resource: its estimated memory
    when full, per shard and in total (deterministic: the memory available is checked at
    build, not printed); a line saying why when it cannot be estimated (the env cannot be
    made here)."""
    replay = [rid for rid, r in compiled.resources.items() if r.kind in _REPLAY_KINDS]
    if not replay:
        return {}
    try:
        estimates = estimate_replay_memory(compiled, params, kinds=_REPLAY_KINDS)
    except Exception as exc:  # an env that cannot be made here: say so, never crash
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return {
            rid: [f"memory: not estimated (the env cannot be made here: {why})"] for rid in replay
        }
    out: dict[str, list[str]] = {}
    for e in estimates:
        head = f"memory when full (from {e.env}'s spaces): {e.row_bytes} bytes per env step,"
        if e.shard_nbytes:
            per = " or ".join(format_bytes(b) for b in sorted(set(e.shard_nbytes)))
            body = f"{per} per shard, {format_bytes(e.nbytes)} in total"
            check = "the memory Ray reports available"
        else:
            body = f"{format_bytes(e.nbytes)} in total"
            check = "the memory available in the driver's machine"
        out[e.resource] = [head, f"  {body};", f"  checked at build against {check}"]
    return out


_REPLAY_KINDS = ("ReplayBuffer", "ReplayActors")
