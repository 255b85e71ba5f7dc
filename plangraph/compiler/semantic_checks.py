"""Checks on what a plan means for the RL algorithm: capabilities, readiness, batch sizes.

They run after the dataflow checks and read only validated values (``ctx.params``,
``ctx.res_params``): a param that came out invalid was reported already, and a value
that is not known is never guessed. What the policy can do comes from the config
models' ``capabilities`` (:data:`plangraph.ops.policies.CAPABILITIES`), not from the
torch classes, so the compiler stays free of torch.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Iterator

from pydantic import BaseModel

from plangraph.compiler.context import Context, join_hints
from plangraph.ir.refs import resource_ref_id
from plangraph.ops.policies import PolicyConfigModel
from plangraph.ops.resources import LearnerThreadParams, ReplayBufferParams, WorkerSetParams
from plangraph.text import brief

__all__ = [
    "check_batch_sizes",
    "check_capabilities",
    "check_replay_ready",
    "check_replay_use",
]

#: operator -> the policy capability it calls on
_NEEDS: dict[str, tuple[str, str]] = {
    "UpdateTarget": ("target_network", "syncs the policy's target network"),
    "ComputeGradients": ("gradients", "asks the policy for gradients"),
    "ApplyGradients": ("gradients", "applies gradients to the policy"),
}

#: operators that update the learner policy from the batches they receive
_TRAINERS = ("TrainOneStep", "ComputeGradients", "Enqueue")

#: operators whose output items are their input items (same env steps per item)
_PASS_THROUGH = frozenset(
    {
        "Duplicate",
        "Enqueue",
        "StoreToReplay",
        "UpdatePriorities",
        "UpdateWorkerWeights",
        "WaitUntilTimestepsElapsed",
    }
)


def _param(ctx: Context, nid: str, name: str) -> object:
    params = ctx.params.get(nid)
    return getattr(params, name, None) if params is not None else None


def _resource(ctx: Context, ref: object, model: type[BaseModel]) -> tuple[str, BaseModel] | None:
    """``(id, validated params)`` of the resource ``ref`` (``"@id"``) names, when valid and
    of ``model``'s kind."""
    rid = resource_ref_id(ref)
    params = ctx.res_params.get(rid) if rid is not None else None
    return (rid, params) if rid is not None and isinstance(params, model) else None


def _worker_set(ctx: Context, nid: str) -> tuple[str, WorkerSetParams] | None:
    """The worker set whose policy node ``nid`` uses (an Enqueue's: its learner thread's)."""
    if ctx.plan.nodes[nid].op == "Enqueue":
        learner = _resource(ctx, _param(ctx, nid, "queue"), LearnerThreadParams)
        if learner is None:
            return None
        assert isinstance(learner[1], LearnerThreadParams)
        found = _resource(ctx, learner[1].workers, WorkerSetParams)
    else:
        found = _resource(ctx, _param(ctx, nid, "workers"), WorkerSetParams)
    if found is None:
        return None
    assert isinstance(found[1], WorkerSetParams)
    return found[0], found[1]


def _algos_with(capability: str) -> str:
    members = typing.get_args(PolicyConfigModel)
    return ", ".join(
        m.model_fields["algo"].default for m in members if capability in m.capabilities
    )


def _policy_text(rid: str, policy: PolicyConfigModel) -> str:
    return f"the {policy.algo} policy of worker set {brief(rid)}"


def check_capabilities(ctx: Context) -> None:
    """Each operator's policy can do what the operator calls (e.g. a target network)."""
    for nid, node in ctx.plan.nodes.items():
        need = _NEEDS.get(node.op)
        if need is None or ctx.sigs.get(nid) is None:
            continue
        found = _worker_set(ctx, nid)
        if found is None:
            continue
        rid, ws = found
        capability, does = need
        if capability in ws.policy.capabilities:
            continue
        ctx.report(
            "PG170",
            f"{node.op} {does}, but {_policy_text(rid, ws.policy)} has no "
            f"{capability.replace('_', ' ')}, so the run would crash (AttributeError) at "
            "its first call",
            node=nid,
            pointer=f"/nodes/{nid}/op",
            hint=f"policies with a {capability.replace('_', ' ')}: {_algos_with(capability)}; "
            f"use one of them (/resources/{rid}/params/policy/algo) or remove the node",
        )


def _replay_readers_upstream(ctx: Context, nid: str) -> list[str]:
    anc = ctx.topology.ancestors(nid)
    readers = {
        r
        for rid, res in ctx.plan.resources.items()
        if res.kind in ("ReplayBuffer", "ReplayActors")
        for r in ctx.readers.get(rid, [])
        if r in anc
    }
    return list(ctx.topology.sort(readers))


def check_replay_use(ctx: Context) -> None:
    """Policies that need fresh rollouts are not trained from replay, and the reverse."""
    for nid, node in ctx.plan.nodes.items():
        if node.op not in _TRAINERS or ctx.sigs.get(nid) is None or nid in ctx.topology.cyclic:
            continue
        found = _worker_set(ctx, nid)
        if found is None:
            continue
        rid, ws = found
        policy = ws.policy
        readers = _replay_readers_upstream(ctx, nid)
        anc = ctx.topology.ancestors(nid)
        if readers and "replay" not in policy.capabilities:
            ctx.report(
                "PG171",
                f"{node.op} trains {_policy_text(rid, policy)} on batches replayed by "
                f"{brief(readers[0])}, but {policy.algo} learns on-policy from "
                f"{policy.learns_from}; replayed rows are old, single and shuffled, so it "
                "would train on stale data without an error (a2c, ppo) or fail on the first "
                "batch (impala, appo)",
                node=nid,
                pointer=f"/nodes/{nid}/inputs",
                hint=f"feed {brief(nid)} fresh rollouts (ParallelRollouts -> ConcatBatches -> "
                f"{node.op}) without a replay buffer, or use a policy that learns from replay: "
                f"{_algos_with('replay')}",
            )
        elif (
            not readers
            and "replay" in policy.capabilities
            and node.op != "Enqueue"
            and any(ctx.plan.nodes[a].op == "ParallelRollouts" for a in anc)
        ):
            ctx.report(
                "PG172",
                f"{node.op} trains {_policy_text(rid, policy)} on fresh rollouts without a "
                "replay buffer: each transition is learned from once, in the correlated order "
                "it was sampled (DQN, Mnih et al. 2015, replays to decorrelate and reuse them)",
                node=nid,
                pointer=f"/nodes/{nid}/inputs",
                hint="store the rollouts and train on replay: ParallelRollouts -> "
                'StoreToReplay(buffer="@replay") and LocalReplay(buffer="@replay") -> '
                f'{node.op}, driven by one Concurrently(mode="round_robin")',
            )


def _merges_downstream(ctx: Context, nid: str) -> list[str]:
    return [
        d
        for d in ctx.topology.sort(ctx.topology.descendants(nid))
        if (sig := ctx.sigs.get(d)) is not None and sig.category == "merge"
    ]


def check_replay_ready(ctx: Context) -> None:
    """A replay buffer can hold the learning_starts env steps its readers wait for."""
    for rid, res in ctx.plan.resources.items():
        params = ctx.res_params.get(rid)
        readers = ctx.readers.get(rid, [])
        if not isinstance(params, ReplayBufferParams) or not readers:
            continue
        if params.learning_starts <= params.capacity:
            continue
        reader = readers[0]
        merges = _merges_downstream(ctx, reader)
        waits = (
            f", and {ctx.plan.nodes[merges[0]].op} {brief(merges[0])} that drives it would "
            "wait for it forever after launch"
            if merges
            else ""
        )
        raw = ctx.res_raw_params.get(rid, {})
        field = "learning_starts" if "learning_starts" in raw else "capacity"
        ctx.report(
            "PG173",
            f"{res.kind} {brief(rid)} keeps at most capacity={params.capacity} env steps but "
            f"its readers wait until it holds learning_starts={params.learning_starts}, so "
            f"{brief(reader)} is never ready{waits}",
            node=reader,
            pointer=f"/resources/{rid}/params/{field}",
            hint=join_hints(
                f"raise capacity to >= {params.learning_starts} or lower learning_starts to "
                f"<= {params.capacity}",
                ctx.config_hint(
                    res.params,
                    [field],
                    f"a value <= {params.capacity}"
                    if field == "learning_starts"
                    else f"a value >= {params.learning_starts}",
                ),
            ),
        )


def _chain(ctx: Context, nid: str) -> Iterator[str]:
    """``nid`` and the nodes above it through single-input pass-through operators."""
    seen: set[str] = set()
    cur: str | None = nid
    while cur is not None and cur not in seen and cur in ctx.plan.nodes:
        seen.add(cur)
        yield cur
        node = ctx.plan.nodes[cur]
        cur = node.inputs[0] if node.op in _PASS_THROUGH and len(node.inputs) == 1 else None


def _rollout_item(ws: WorkerSetParams, mode: object) -> tuple[int, str]:
    """Env steps per ParallelRollouts item, and how they are made up."""
    envs, frag = ws.num_envs_per_worker, ws.rollout_fragment_length
    shape = f"{envs} env{'s' if envs > 1 else ''} x rollout_fragment_length {frag}"
    if mode != "bulk_sync":
        return envs * frag, f"one worker's {shape}"
    workers = max(1, ws.num_workers)  # 0: the local worker samples
    return workers * envs * frag, f"{workers} worker{'s' if workers > 1 else ''} x {shape}"


def _item_size(ctx: Context, nid: str) -> int | None:
    """Exact env steps of each item ``nid`` emits, when known at compile time."""
    for cur in _chain(ctx, nid):
        op = ctx.plan.nodes[cur].op
        if op in _PASS_THROUGH:
            continue
        if ctx.params.get(cur) is None or cur in ctx.topology.cyclic:
            return None
        if op == "ParallelRollouts":
            found = _worker_set(ctx, cur)
            return _rollout_item(found[1], _param(ctx, cur, "mode"))[0] if found else None
        if op in ("LocalReplay", "ParallelReplay"):
            size = _param(ctx, cur, "batch_size")
            return size if isinstance(size, int) else None
        if op == "ConcatBatches":
            node = ctx.plan.nodes[cur]
            inner = _item_size(ctx, node.inputs[0]) if len(node.inputs) == 1 else None
            want = _param(ctx, cur, "min_batch_size")
            if inner is None or not isinstance(want, int):
                return None
            return math.ceil(want / inner) * inner
        return None
    return None


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _closest_divisor(n: int, near: int) -> int:
    divisors = {d for i in range(1, math.isqrt(n) + 1) if n % i == 0 for d in (i, n // i)}
    return min(divisors, key=lambda d: (abs(d - near), -d))


def _check_concat(ctx: Context, nid: str) -> None:
    node = ctx.plan.nodes[nid]
    want = _param(ctx, nid, "min_batch_size")
    if len(node.inputs) != 1 or not isinstance(want, int):
        return
    source = list(_chain(ctx, node.inputs[0]))[-1]
    if ctx.plan.nodes[source].op != "ParallelRollouts" or ctx.params.get(source) is None:
        return
    found = _worker_set(ctx, source)
    if found is None:
        return
    rid, ws = found
    mode = _param(ctx, source, "mode")
    item, shape = _rollout_item(ws, mode)
    if want % item == 0:
        return
    rounds = math.ceil(want / item)
    got = rounds * item
    extra = got - want
    unit = "rollout round" if mode == "bulk_sync" else "rollout fragment"
    per_item = item // ws.rollout_fragment_length
    fixes = []
    if want % per_item == 0:
        frag = _closest_divisor(want // per_item, ws.rollout_fragment_length)
        times = want // (per_item * frag)
        fixes.append(
            f"set rollout_fragment_length to {frag} (/resources/{rid}/params/"
            f"rollout_fragment_length), so that {_count(times, unit)} of {per_item * frag} "
            f"env steps make{'s' if times == 1 else ''} exactly {want}"
        )
    lower = (want // item) * item
    sizes = " or ".join(str(s) for s in (lower, got) if s > 0)
    fixes.append(
        ctx.config_hint(node.params, ["min_batch_size"], f"a multiple of {item}, e.g. {sizes}")
        or f"set min_batch_size to a multiple of {item}, e.g. {sizes}"
    )
    ctx.report(
        "PG174",
        f"min_batch_size={want} is not a multiple of the {item} env steps of one {unit} of "
        f"{brief(source)} ({shape}), so each train batch is {rounds} x {item} = {got} env "
        f"steps: {extra} env steps ({100 * extra / got:.1f}% of the batch) more than asked, "
        "sampled and trained on every iteration",
        node=nid,
        pointer=f"/nodes/{nid}/params/min_batch_size",
        hint="; or ".join(fixes),
    )


def _check_minibatch(ctx: Context, nid: str) -> None:
    node = ctx.plan.nodes[nid]
    size = _param(ctx, nid, "sgd_minibatch_size")
    if len(node.inputs) != 1 or not isinstance(size, int) or size <= 0:
        return
    batch = _item_size(ctx, node.inputs[0])
    if batch is None or size <= batch:
        return
    epochs = _param(ctx, nid, "num_sgd_iter")
    steps = _count(epochs if isinstance(epochs, int) else 1, "optimizer step")
    ctx.report(
        "PG175",
        f"sgd_minibatch_size={size} is larger than the {batch} env-step train batch that "
        f"{brief(node.inputs[0])} sends, so every epoch is one step on the whole batch "
        f"({steps} per train batch, no minibatches)",
        node=nid,
        pointer=f"/nodes/{nid}/params/sgd_minibatch_size",
        hint=join_hints(
            f"lower sgd_minibatch_size to at most {batch}, or to 0 for one step per epoch "
            "on the whole batch",
            ctx.config_hint(node.params, ["sgd_minibatch_size"], f"a value <= {batch}"),
        ),
    )


def check_batch_sizes(ctx: Context) -> None:
    """Train batches come in whole rollout rounds; SGD minibatches fit in the train batch."""
    for nid, node in ctx.plan.nodes.items():
        if ctx.params.get(nid) is None or nid in ctx.topology.cyclic:
            continue
        if node.op == "ConcatBatches":
            _check_concat(ctx, nid)
        elif node.op == "TrainOneStep":
            _check_minibatch(ctx, nid)
