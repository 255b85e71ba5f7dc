"""Checks on what a plan means for the RL algorithm: capabilities, readiness, batch sizes.

They run after the dataflow checks and read only validated values (``ctx.params``,
``ctx.res_params``): a param that came out invalid was reported already, and a value
that is not known is never guessed. What the policy can do comes from the config
models' ``capabilities`` (:data:`plangraph.ops.policies.CAPABILITIES`), not from the
torch classes, so the compiler stays free of torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from plangraph.compiler.context import Context, join_hints
from plangraph.compiler.env_spaces import EnvSpaces, env_spaces
from plangraph.ir.refs import resource_ref_id
from plangraph.ir.types import MULTI_AGENT_BATCH, SAMPLE_BATCH, PortType, is_shard
from plangraph.ops.algorithms import algorithms
from plangraph.ops.policies import AlgorithmConfig
from plangraph.ops.registry import OpSignature
from plangraph.ops.resources import LearnerThreadParams, ReplayBufferParams, WorkerSetParams
from plangraph.text import brief, count

__all__ = [
    "SpaceProblem",
    "check_all_reduce",
    "check_batch_sizes",
    "check_capabilities",
    "check_env_spaces",
    "check_gradient_sources",
    "check_replay_ready",
    "check_replay_use",
    "space_problems",
]

#: operator -> the policy capability it calls on
_NEEDS: dict[str, tuple[str, str]] = {
    "UpdateTarget": ("target_network", "syncs the policy's target network"),
    "UpdateKL": ("kl_penalty", "adapts the policy's KL penalty coefficient"),
    "ComputeGradients": ("gradients", "asks the policy for gradients"),
    "ApplyGradients": ("gradients", "applies gradients to the policy"),
    "AsyncGradients": ("gradients", "asks the rollout workers' policies for gradients"),
    "DDPPOTrainOnShard": (
        "all_reduce",
        "trains the rollout workers' policies on gradients all-reduced among them",
    ),
    "MetaUpdate": ("meta_learning", "meta-updates the policy through its inner adaptation"),
}


def _takes_experience(t: PortType) -> bool:
    """Port type ``t`` carries experience batches: ``SampleBatch``, ``MultiAgentBatch`` or
    a union of them, whole or per shard (``Shard[...]``)."""
    if t.is_shard:
        t = t.args[0]
    members = t.args if t.is_union else (t,)
    return all(m in (SAMPLE_BATCH, MULTI_AGENT_BATCH) for m in members)


def _trains_on_experience(sig: OpSignature) -> bool:
    """An operator that trains its worker set's policy (``learns``) on the experience it
    receives (every input port takes batches: TrainOneStep, ComputeGradients, Enqueue,
    DDPPOTrainOnShard, a user's trainer), or, a source, on the fragments its rollout
    workers sample for it (AsyncGradients); not one fed gradients or adapted tasks
    (ApplyGradients, MetaUpdate), whose batches an upstream trainer was already checked
    on."""
    if not sig.learns:
        return False
    ports = sig.inputs or ((sig.variadic,) if sig.variadic is not None else ())
    return all(_takes_experience(t) for t in ports)


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
    ws = found[1]
    if ws.policies is not None:
        # Multi-agent: the checks of one policy apply to the one policy the node names.
        named = _param(ctx, nid, "policies") or ()
        if not isinstance(named, tuple) or len(named) != 1 or named[0] not in ws.policies:
            return None
        ws = ws.model_copy(update={"policy": ws.policies[named[0]]})
    return found[0], ws


Fits = Callable[[type[AlgorithmConfig]], bool]
"""Whether an algorithm (its config class) could run where a hint would send the user."""


def _algos_with(capability: str, fits: Fits | None = None) -> str:
    """The algorithms with ``capability`` (and, given ``fits``, that pass it: those that
    can run on the plan's env and replay resources, so that a hint never sends a user to
    an algorithm another check refuses)."""
    return ", ".join(
        name
        for name, spec in algorithms().items()
        if capability in spec.config.capabilities and (fits is None or fits(spec.config))
    )


def _fits_env(ws: WorkerSetParams) -> Fits | None:
    """Whether an algorithm's config class acts in the action space and reads the
    observations of worker set ``ws``'s env (None when the env's spaces are unknown, or
    its env is multi-agent: each policy has its own spaces there)."""
    if ws.policies is not None:
        return None
    spaces = env_spaces(ws.env, ws.wrappers)
    if spaces is None:
        return None
    act, obs = spaces.action, spaces.observation
    return lambda config: (
        _acts_in(config, act.kind, act.bounded) and obs.kind in config.observation_spaces
    )


def _acts_in(config: type[AlgorithmConfig], kind: str, bounded: bool) -> bool:
    """The algorithm acts in action spaces of ``kind`` (``bounded``: finite Box bounds)."""
    return kind in config.action_spaces and (bounded or not config.needs_bounded_actions)


def _policy_text(rid: str, policy: AlgorithmConfig) -> str:
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
        policy = ws.policy
        if policy is None or capability in policy.capabilities:
            continue  # None: a worker set of several policies (checked per policy node)
        ctx.report(
            "PG170",
            f"{node.op} {does}, but {_policy_text(rid, policy)} has no "
            f"{capability.replace('_', ' ')}, so the run would crash (AttributeError) at "
            "its first call",
            node=nid,
            pointer=f"/nodes/{nid}/op",
            hint=f"policies with a {capability.replace('_', ' ')}: {_algos_with(capability)}; "
            f"use one of them (/resources/{rid}/params/policy/algo) or remove the node",
        )


@dataclass(frozen=True)
class SpaceProblem:
    """A policy that cannot read its env's observations or act in its actions.

    ``field``: the worker set param to point at (``"policy/algo"``, ``"env"``, ...);
    ``env_may_fix``: whether another env is a way out (not for a model type the algorithm
    cannot learn with, whatever the env).
    """

    code: str
    field: str
    message: str
    hint: str
    env_may_fix: bool = True


def _algos_acting_in(kind: str, bounded: bool) -> str:
    return ", ".join(
        name for name, spec in algorithms().items() if _acts_in(spec.config, kind, bounded)
    )


def space_problems(
    policy: AlgorithmConfig, spaces: EnvSpaces, algo_at: str = "policy.algo"
) -> list[SpaceProblem]:
    """What keeps ``policy`` from running on the env of ``spaces`` (empty: nothing).

    The capability data are the config model's ``action_spaces``,
    ``needs_bounded_actions`` and ``observation_spaces``; ``algo_at`` names where the
    algorithm is set, for the hints.
    """
    out = []
    env, act, obs = brief(spaces.env), spaces.action, spaces.observation
    if act.kind not in policy.action_spaces:
        kinds = " and ".join(sorted(policy.action_spaces))
        others = _algos_acting_in(act.kind, act.bounded)
        out.append(
            SpaceProblem(
                "PG183",
                "policy/algo",
                f"the {policy.algo} policy acts in {kinds} action spaces only, but env {env} "
                f"has action space {act.text}, so the policy cannot be built for it",
                (
                    f"algorithms that act in {act.kind} action spaces: {others}; use one of "
                    f"them ({algo_at}) or an env with {kinds} actions"
                    if others
                    else f"no algorithm acts in {act.kind} action spaces; use another env"
                ),
            )
        )
    elif act.kind == "Box" and policy.needs_bounded_actions and not act.bounded:
        out.append(
            SpaceProblem(
                "PG183",
                "policy/algo",
                f"the {policy.algo} policy squashes its actions into the bounds of a Box "
                f"action space, but env {env} has action space {act.text} with infinite "
                "bounds",
                f"use an env whose action bounds are finite, or an algorithm that clips "
                f"Gaussian actions instead ({algo_at}): {_algos_acting_in('Box', False)}",
            )
        )
    if obs.kind not in policy.observation_spaces:
        kinds = " and ".join(sorted(policy.observation_spaces))
        out.append(
            SpaceProblem(
                "PG184",
                "env",
                f"the {policy.algo} policy's model reads {kinds} observations (any shape and "
                f"dtype, cast to float32), but env {env} has observation space {obs.text}",
                "use an env with Box observations, or wrap it: a Discrete observation "
                'becomes its one-hot Box with {"name": "flatten_observation"} in the worker '
                "set's wrappers",
            )
        )
    else:
        out += _model_problems(policy, spaces)
    return out


def _model_problems(policy: AlgorithmConfig, spaces: EnvSpaces) -> list[SpaceProblem]:
    """A model type the algorithm does not build, or one that cannot read the env's
    observations (``ModelSettings.observation_problem``: e.g. a CNN on observations that
    are no [H, W, C] image, or one too small for it)."""
    obs = spaces.observation
    model = policy.resolved_model(obs.shape)
    field = "policy/model" if policy.model is not None else "env"
    if policy.model_types is not None and model.type not in policy.model_types:
        kinds = " and ".join(sorted(policy.model_types))
        return [
            SpaceProblem(
                "PG184",
                field,
                f"the {policy.algo} policy builds {kinds} models only, but its model for the "
                f"observations {list(obs.shape)} of env {brief(spaces.env)} is a {model.type}",
                f'give a model of type {kinds} ({{"type": "mlp", ...}} flattens any Box '
                "observation)",
                env_may_fix=False,
            )
        ]
    if model.recurrent and not policy.recurrent_models:
        able = sorted(n for n, spec in algorithms().items() if spec.config.recurrent_models)
        return [
            SpaceProblem(
                "PG184",
                field,
                f"the {policy.algo} policy does not learn with recurrent models, but its "
                f"model is a {model.type}, which carries a state from step to step",
                f"algorithms that learn with recurrent models: {', '.join(able) or 'none'}; "
                'use one of them, or a model without state ({"type": "mlp", ...})',
                env_may_fix=False,
            )
        ]
    problem = model.observation_problem(tuple(obs.shape))
    if problem is None:
        return []
    which = f"the {policy.algo} policy's {model.type} model" + (
        "" if policy.model is not None else " (the default for these observations)"
    )
    message, hint = problem
    return [
        SpaceProblem(
            "PG184",
            field,
            f"{which} {message} (env {brief(spaces.env)}, observation space {obs.text})",
            hint,
        )
    ]


def check_env_spaces(ctx: Context) -> None:
    """Each worker set's policy reads its env's observations and acts in its action space."""
    for rid, res in ctx.plan.resources.items():
        ws = ctx.res_params.get(rid)
        if not isinstance(ws, WorkerSetParams) or ws.policy is None:
            continue  # a multi-agent env is not a gymnasium id (multi_agent_checks)
        spaces = env_spaces(ws.env, ws.wrappers)
        if spaces is None:
            continue
        for problem in space_problems(ws.policy, spaces, f"/resources/{rid}/params/policy/algo"):
            ctx.report(
                problem.code,
                f"WorkerSet {brief(rid)}: {problem.message}",
                pointer=f"/resources/{rid}/params/{problem.field}",
                # Another env is a way out only where the env is what does not fit.
                hint=join_hints(
                    problem.hint, ctx.config_hint(res.params, ["env"], "another env id")
                )
                if problem.env_may_fix
                else problem.hint,
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
        sig = ctx.sigs.get(nid)
        if sig is None or not _trains_on_experience(sig) or nid in ctx.topology.cyclic:
            continue
        found = _worker_set(ctx, nid)
        if found is None:
            continue
        rid, ws = found
        policy = ws.policy
        if policy is None:  # a worker set of several policies (checked per policy node)
            continue
        readers = _replay_readers_upstream(ctx, nid)
        env_fits = _fits_env(ws)
        anc = ctx.topology.ancestors(nid)
        mixers = [a for a in ctx.topology.sort(anc) if ctx.plan.nodes[a].op == "MixInReplay"]
        if mixers and not {"replay", "off_policy_batches"} & policy.capabilities:
            ctx.report(
                "PG171",
                f"{node.op} trains {_policy_text(rid, policy)} on batches that MixInReplay "
                f"{brief(mixers[0])} replays, but {policy.algo} learns on-policy from "
                f"{policy.learns_from}; a replayed batch was sampled by an older policy and "
                "nothing in its loss corrects for that, so it would train on stale data "
                "without an error",
                node=nid,
                pointer=f"/nodes/{nid}/inputs",
                hint=f"remove {brief(mixers[0])}, or use a policy that corrects whole old "
                "batches (V-trace): "
                f"{_algos_with('off_policy_batches', env_fits) or 'none for this env'}",
            )
        elif readers and "replay" not in policy.capabilities:
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
                f"{node.op}) without a replay buffer"
                + _replay_algos_text(_replay_fits(ctx, readers, env_fits)),
            )
        elif readers and (wrong := _replay_item_mismatches(ctx, readers, policy.replay_item)):
            reader, buf = wrong[0]
            _report_item_mismatch(ctx, nid, node.op, rid, policy, reader, buf)
        elif (
            readers
            and policy.model is not None
            and policy.model.recurrent
            and policy.recurrent_models  # else PG184 said the model does not fit at all
            and policy.replay_item != "sequence"
        ):
            ctx.report(
                "PG171",
                f"{node.op} trains {_policy_text(rid, policy)} on batches replayed by "
                f"{brief(readers[0])}, but its model is recurrent ({policy.model.type}): the "
                "replay buffers sample single transitions in random order, which tears the "
                "sequences its state runs along apart (docs/recurrent.md)",
                node=nid,
                pointer=f"/nodes/{nid}/inputs",
                hint=f"feed {brief(nid)} fresh rollouts (ParallelRollouts -> ConcatBatches -> "
                f'{node.op}), give the policy a model without state ({{"type": "mlp"}}), or '
                f"use an algorithm that replays sequences: "
                f"{_algos_replaying('sequence', env_fits)}",
            )
        elif (
            not readers
            and "replay" in policy.capabilities
            and node.op != "Enqueue"
            and (
                # a source that samples for itself (AsyncGradients)
                (not sig.inputs and sig.variadic is None)
                or any(ctx.plan.nodes[a].op == "ParallelRollouts" for a in anc)
            )
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


def _algos_replaying(item: str, fits: Fits | None = None) -> str:
    names = _algos_with(
        "replay", lambda config: config.replay_item == item and (fits is None or fits(config))
    )
    return names or "none for this env"


def _read_buffers(ctx: Context, readers: list[str]) -> Iterator[tuple[str, str, BaseModel | None]]:
    """``(reader node, replay resource, its params)`` for each replay resource each of
    ``readers`` reads (params None where they did not validate)."""
    for reader in readers:
        for rid, res in sorted(ctx.plan.resources.items()):
            if res.kind in ("ReplayBuffer", "ReplayActors") and reader in ctx.readers.get(rid, []):
                yield reader, rid, ctx.res_params.get(rid)


def _replay_fits(ctx: Context, readers: list[str], env_fits: Fits | None) -> Fits:
    """An algorithm fits the replay of ``readers`` when it acts in the env (``env_fits``)
    and learns from the item (transitions or sequences) their buffers keep."""
    items = {getattr(params, "item", "transition") for _, _, params in _read_buffers(ctx, readers)}
    return lambda config: (
        (env_fits is None or env_fits(config)) and (not items or config.replay_item in items)
    )


def _replay_algos_text(fits: Fits) -> str:
    """``", or use a policy that learns from replay: dqn, ..."`` (those that ``fits``), or
    ``""`` when none does."""
    names = _algos_with("replay", fits)
    return f", or use a policy that learns from replay: {names}" if names else ""


def _replay_item_mismatches(ctx: Context, readers: list[str], item: str) -> list[tuple[str, str]]:
    """``(reader node, replay resource)`` of each replay reader upstream whose resource
    keeps another ``item`` (transitions or sequences) than the policy learns from."""
    return [
        (reader, rid)
        for reader, rid, params in _read_buffers(ctx, readers)
        if params is not None and getattr(params, "item", "transition") != item
    ]


def _report_item_mismatch(
    ctx: Context,
    nid: str,
    op: str,
    ws: str,
    policy: AlgorithmConfig,
    reader: str,
    buf: str,
) -> None:
    """PG197: the policy learns from replayed sequences and the buffer keeps single
    transitions, or the reverse."""
    given = "item" in ctx.plan.resources[buf].params
    pointer = f"/resources/{buf}/params" + ("/item" if given else "")
    if policy.replay_item == "sequence":
        model = policy.model
        state = (
            f"; its recurrent model ({model.type}) needs each sequence whole, from the state "
            "stored at its start"
            if model is not None and model.recurrent
            else ""
        )
        message = (
            f"{op} trains {_policy_text(ws, policy)} on batches replayed by {brief(reader)} "
            f"from {brief(buf)}, which keeps single transitions (item 'transition'), but "
            f"{policy.algo} learns from {policy.learns_from}{state}"
        )
        hint = f'give the replay resource {brief(buf)} "item": "sequence"'
    else:
        message = (
            f"{op} trains {_policy_text(ws, policy)} on batches replayed by {brief(reader)} "
            f"from {brief(buf)}, which replays whole sequences (item 'sequence'), but "
            f"{policy.algo} learns from {policy.learns_from}"
        )
        hint = (
            f'give {brief(buf)} "item": "transition" (the default), or use an algorithm '
            f"that replays sequences: {_algos_replaying('sequence')}"
        )
    ctx.report("PG197", message, node=nid, pointer=pointer, hint=hint)


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


def keeps_items(ctx: Context, nid: str) -> bool:
    """Whether node ``nid`` passes each item on with the same env steps: a pass-through
    operator, one declared pure (a pure op keeps a batch's rows), or a ``GatherShards``
    that emits the shards' items one by one (``sync``, ``async``: each a worker's
    fragment, as an ``async`` source's)."""
    node = ctx.plan.nodes[nid]
    sig = ctx.sigs.get(nid)
    if node.op == "GatherShards":  # (fed a driver stream, it is PG201's, not a gather)
        return (
            len(node.inputs) == 1
            and _param(ctx, nid, "mode") in ("sync", "async")
            and is_shard(ctx.types.get(node.inputs[0]))
        )
    return len(node.inputs) == 1 and (node.op in _PASS_THROUGH or (sig is not None and sig.pure))


def _chain(ctx: Context, nid: str) -> Iterator[str]:
    """``nid`` and the nodes above it through single-input pass-through operators."""
    seen: set[str] = set()
    cur: str | None = nid
    while cur is not None and cur not in seen and cur in ctx.plan.nodes:
        seen.add(cur)
        yield cur
        cur = ctx.plan.nodes[cur].inputs[0] if keeps_items(ctx, cur) else None


def rollout_source(ctx: Context, nid: str) -> str:
    """The node at the top of ``nid``'s pass-through chain (``nid`` itself if none)."""
    return list(_chain(ctx, nid))[-1]


def _rollout_item(ws: WorkerSetParams, mode: object, sized: str = "") -> tuple[int, str] | None:
    """Env steps per ParallelRollouts item, and how they are made up; None while the
    fragment length is ``"auto"`` (pass rollout-sizing decides it)."""
    envs, frag = ws.num_envs_per_worker, ws.rollout_fragment_length
    if not isinstance(frag, int):
        return None
    shape = f"{envs} env{'s' if envs > 1 else ''} x rollout_fragment_length {frag}{sized}"
    if mode != "bulk_sync":
        return envs * frag, f"one worker's {shape}"
    workers = max(1, ws.num_workers)  # 0: the local worker samples
    return workers * envs * frag, f"{workers} worker{'s' if workers > 1 else ''} x {shape}"


def _item_size(ctx: Context, nid: str) -> int | None:
    """Exact env steps of each item ``nid`` emits, when known at compile time."""
    for cur in _chain(ctx, nid):
        op = ctx.plan.nodes[cur].op
        if keeps_items(ctx, cur):
            continue
        if ctx.params.get(cur) is None or cur in ctx.topology.cyclic:
            return None
        if op == "ParallelRollouts":
            found = _worker_set(ctx, cur)
            item = _rollout_item(found[1], _param(ctx, cur, "mode")) if found else None
            return item[0] if item else None
        if op in ("LocalReplay", "ParallelReplay"):
            size = _param(ctx, cur, "batch_size")
            return size if isinstance(size, int) else None
        if op in ("ConcatBatches", "AggregateBatches"):
            node = ctx.plan.nodes[cur]
            inner = _item_size(ctx, node.inputs[0]) if len(node.inputs) == 1 else None
            want = _param(ctx, cur, "min_batch_size")
            if inner is None or not isinstance(want, int):
                return None
            return math.ceil(want / inner) * inner
        return None
    return None


def _closest_divisor(n: int, near: int) -> int:
    divisors = {d for i in range(1, math.isqrt(n) + 1) if n % i == 0 for d in (i, n // i)}
    return min(divisors, key=lambda d: (abs(d - near), -d))


def _check_concat(
    ctx: Context,
    nid: str,
    only: Collection[str] | None = None,
    sized: Mapping[str, tuple[str, bool]] | None = None,
) -> None:
    node = ctx.plan.nodes[nid]
    want = _param(ctx, nid, "min_batch_size")
    if len(node.inputs) != 1 or not isinstance(want, int):
        return
    source = rollout_source(ctx, node.inputs[0])
    if ctx.plan.nodes[source].op != "ParallelRollouts" or ctx.params.get(source) is None:
        return
    found = _worker_set(ctx, source)
    if found is None or (only is not None and found[0] not in only):
        return
    rid, ws = found
    mode = _param(ctx, source, "mode")
    how, by_pass = (sized or {}).get(rid, ("", False))
    shaped = _rollout_item(ws, mode, f" ({how})" if how else "")
    if shaped is None:
        return  # "auto": pass rollout-sizing sizes it, then checks it again
    item, shape = shaped
    if want % item == 0:
        return
    rounds = math.ceil(want / item)
    got = rounds * item
    extra = got - want
    unit = "rollout round" if mode == "bulk_sync" else "rollout fragment"
    assert isinstance(ws.rollout_fragment_length, int)
    per_item = item // ws.rollout_fragment_length
    message = (
        f"min_batch_size={want} is not a multiple of the {item} env steps of one {unit} of "
        f"{brief(source)} ({shape}), so each train batch is {rounds} x {item} = {got} env "
        f"steps: {extra} env steps ({100 * extra / got:.1f}% of the batch) more than asked, "
        "sampled and trained on every iteration"
    )
    pointer = f"/nodes/{nid}/params/min_batch_size"
    # what "auto" sizes one fragment per worker for: num_workers x num_envs_per_worker
    per_round = per_item * (1 if mode == "bulk_sync" else max(1, ws.num_workers))
    if by_pass:
        # Sized from "auto": only the batch size itself can make the rounds exact.
        lower = (want // per_round) * per_round
        sizes = " or ".join(str(x) for x in (lower, lower + per_round) if x > 0)
        wanted = f"a multiple of {per_round} (num_workers x num_envs_per_worker), e.g. {sizes}"
        fix = ctx.config_hint(node.params, ["min_batch_size"], wanted)
        hint = (fix or f"set min_batch_size to {wanted}") + (
            '; "auto" then sizes the rollout fragments to make it exactly'
        )
        ctx.report("PG174", message, node=nid, pointer=pointer, hint=hint)
        return
    fixes = []
    if want % per_item == 0:
        frag = _closest_divisor(want // per_item, ws.rollout_fragment_length)
        times = want // (per_item * frag)
        fix = (
            f"set rollout_fragment_length to {frag} (/resources/{rid}/params/"
            f"rollout_fragment_length), so that {count(times, unit)} of {per_item * frag} "
            f"env steps make{'s' if times == 1 else ''} exactly {want}"
        )
        if want % per_round == 0 and "rollout-sizing" not in ctx.disabled_passes:
            auto = want // per_round
            fix += (
                ', or to "auto" (the compiler sizes it so, also when the batch or the '
                "workers change)"
                if auto == frag
                else f', or to "auto" ({auto}: one round of {want})'
            )
        fixes.append(fix)
    lower = (want // item) * item
    sizes = " or ".join(str(s) for s in (lower, got) if s > 0)
    fixes.append(
        ctx.config_hint(node.params, ["min_batch_size"], f"a multiple of {item}, e.g. {sizes}")
        or f"set min_batch_size to a multiple of {item}, e.g. {sizes}"
    )
    if how and "rollout-sizing" in ctx.disabled_passes:
        fixes.append('compile without --no-pass rollout-sizing, which sizes "auto" for the batch')
    ctx.report(
        "PG174",
        message,
        node=nid,
        pointer=pointer,
        hint="; or ".join(fixes),
    )


def _uses(ctx: Context, nid: str, only: Collection[str] | None) -> bool:
    """Whether a rollout source of a worker set in ``only`` feeds node ``nid`` (any
    node when ``only`` is None)."""
    if only is None:
        return True
    source = rollout_source(ctx, nid)
    found = _worker_set(ctx, source) if ctx.plan.nodes[source].op == "ParallelRollouts" else None
    if found is None and ctx.plan.nodes[source].op in ("ConcatBatches", "AggregateBatches"):
        inner = ctx.plan.nodes[source].inputs
        return bool(inner) and _uses(ctx, inner[0], only)
    return found is not None and found[0] in only


def _check_minibatch(ctx: Context, nid: str, only: Collection[str] | None = None) -> None:
    node = ctx.plan.nodes[nid]
    size = _param(ctx, nid, "sgd_minibatch_size")
    if len(node.inputs) != 1 or not isinstance(size, int) or size <= 0:
        return
    if not _uses(ctx, node.inputs[0], only):
        return
    batch = _item_size(ctx, node.inputs[0])
    if batch is None or size <= batch:
        return
    epochs = _param(ctx, nid, "num_sgd_iter")
    steps = count(epochs if isinstance(epochs, int) else 1, "optimizer step")
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


def check_batch_sizes(
    ctx: Context,
    only: Collection[str] | None = None,
    sized: Mapping[str, tuple[str, bool]] | None = None,
) -> None:
    """Train batches come in whole rollout rounds; SGD minibatches fit in the train batch."""
    # ``only``/``sized``: pass rollout-sizing checks again, once it has sized them, the
    # worker sets whose fragment length was "auto" (skipped here before): worker set id ->
    # (how its fragment length came about, whether the pass sized it for the batch).
    for nid, node in ctx.plan.nodes.items():
        if ctx.params.get(nid) is None or nid in ctx.topology.cyclic:
            continue
        if node.op in ("ConcatBatches", "AggregateBatches"):
            _check_concat(ctx, nid, only, sized)
        elif node.op == "TrainOneStep":
            _check_minibatch(ctx, nid, only)


#: operators that emit gradients without a source rollout worker, and why
_SOURCELESS = {
    "ComputeGradients": "computes its gradients in the driver, with the learner policy",
    "AverageGradients": "combines the gradients of several batches into one",
}
#: operators that pass gradient items through (a source, if any, stays on them)
_GRAD_PASS_THROUGH = frozenset({"Duplicate", "Concurrently", "Union"})


def _sourceless_producers(ctx: Context, nid: str) -> list[str]:
    """The nodes feeding ``nid``, through pass-through and merge operators, whose
    gradients name no rollout worker."""
    found: list[str] = []
    seen: set[str] = set()
    todo = list(ctx.plan.nodes[nid].inputs)
    while todo:
        cur = todo.pop()
        if cur in seen or cur not in ctx.plan.nodes:
            continue
        seen.add(cur)
        op = ctx.plan.nodes[cur].op
        if op in _SOURCELESS:
            found.append(cur)
        elif op in _GRAD_PASS_THROUGH:
            todo.extend(ctx.plan.nodes[cur].inputs)
    return list(ctx.topology.sort(found))


def check_gradient_sources(ctx: Context) -> None:
    """Gradients applied with update_workers="source" come from the rollout workers."""
    for nid, node in ctx.plan.nodes.items():
        if node.op != "ApplyGradients" or nid in ctx.topology.cyclic:
            continue
        if _param(ctx, nid, "update_workers") != "source":
            continue
        for producer in _sourceless_producers(ctx, nid):
            op = ctx.plan.nodes[producer].op
            ctx.report(
                "PG182",
                f'ApplyGradients with update_workers="source" sends the new weights to the '
                f"rollout worker that computed each gradient, but {op} {brief(producer)} "
                f"{_SOURCELESS[op]}: its gradients come from no rollout worker, so the run "
                "would stop at the first one (ValueError)",
                node=nid,
                pointer=f"/nodes/{nid}/params/update_workers",
                hint="compute the gradients on the rollout workers with AsyncGradients(workers) "
                '-> ApplyGradients(update_workers="source") (A3C), or set '
                "update_workers to true to broadcast the weights to every worker",
            )


def check_all_reduce(ctx: Context) -> None:
    """DDPPOTrainOnShard's process group is formed by remote rollout workers."""
    for nid, node in ctx.plan.nodes.items():
        if node.op != "DDPPOTrainOnShard" or ctx.sigs.get(nid) is None:
            continue
        ref = _param(ctx, nid, "workers")
        found = _resource(ctx, ref, WorkerSetParams)
        if found is None:
            continue
        rid, ws = found
        assert isinstance(ws, WorkerSetParams)
        if ws.policies is not None:
            continue  # a multi-agent worker set's Shard[MultiAgentBatch]: PG130 already
        if ws.num_workers == 0:
            ctx.report(
                "PG205",
                f"{node.op} {brief(nid)} trains on the remote rollout workers of worker set "
                f"{brief(rid)}, which has num_workers = 0: there is no worker to form the "
                "process group (the driver holds no learner in DD-PPO)",
                node=nid,
                pointer=f"/resources/{rid}/params/num_workers",
                hint="set num_workers >= 1 (each worker trains on its own rows; 2 or more "
                "average their gradients), or use PPO's plan (ParallelRollouts -> "
                "TrainOneStep) to train in the driver",
            )
