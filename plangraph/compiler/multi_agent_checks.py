"""Checks of multi-agent plans: env names, the policy mapping, and ``policies=`` params.

A multi-agent ``WorkerSet`` declares ``policies`` and a ``policy_mapping`` (agent id or
glob -> policy id; ``plangraph.ops.policy_mapping``). These checks read only validated
values and the multi-agent env registry's agent ids (``plangraph.ops.multi_agent_envs``),
so they import neither gymnasium nor pettingzoo:

* PG195: the env names no registered multi-agent env (did-you-mean);
* PG190: a mapping value, or an entry of an operator's ``policies``, names no declared
  policy (did-you-mean);
* PG191: an agent of the env that no mapping entry matches (when the env's agent ids
  are known from its ``env_config``);
* PG192 (warning): a mapping entry that matches no agent of the env;
* PG193 (warning): a declared policy that no operator trains, or that no agent maps to;
* PG194: ``policies=`` on an operator of a single-agent worker set, or not exactly one
  policy where one policy's rows are meant (``StoreToReplay`` of a ``MultiAgentBatch``,
  ``TrainOneStep`` of replayed ``SampleBatch`` rows of a multi-agent worker set).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from plangraph.compiler.context import Context
from plangraph.ir.refs import resource_ref_id
from plangraph.ir.types import MULTI_AGENT_BATCH, SAMPLE_BATCH
from plangraph.ops.multi_agent_envs import (
    AgentCountError,
    get_multi_agent_env,
    multi_agent_env_names,
)
from plangraph.ops.policy_mapping import is_pattern, map_agent
from plangraph.ops.resources import WorkerSetParams
from plangraph.ops.sizes import MAX_AGENTS
from plangraph.text import brief, close_matches

__all__ = ["check_multi_agent_policies", "check_policy_mapping", "check_trained_policies"]

#: operators that train the policies they are given
_TRAINERS = ("TrainOneStep",)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _multi_agent_sets(ctx: Context) -> dict[str, WorkerSetParams]:
    return {
        rid: p
        for rid, p in sorted(ctx.res_params.items())
        if isinstance(p, WorkerSetParams) and p.policies is not None
    }


def _unknown_policy_hint(pid: str, declared: list[str]) -> tuple[str, tuple[str, ...]]:
    close = close_matches(pid, declared)
    return f"declared policies: {', '.join(declared)}", close


def _shown(agents: list[str], limit: int = 10) -> str:
    """The first ``limit`` agent ids for a message, and how many more there are."""
    more = f", ... ({len(agents) - limit} more)" if len(agents) > limit else ""
    return ", ".join(agents[:limit]) + more


def _agent_ids(
    entry: Any, env_config: Mapping[str, Any], ctx: Context | None = None, rid: str = ""
) -> list[str]:
    """The agent ids ``entry.agents(env_config)`` lists; ``[]`` (unknown) when it refuses
    the config (an agent count out of bounds: PG141 at its key, reported when ``ctx`` is
    given), raises, or lists more than ``MAX_AGENTS`` ids."""
    where = f"/resources/{rid}/params/env_config"
    try:
        agents = list(entry.agents(env_config))
    except AgentCountError as exc:
        if ctx is not None:
            ctx.report(
                "PG141",
                f"WorkerSet {brief(rid)}: env {brief(entry.name)}: {exc}",
                pointer=f"{where}/{_escape(exc.key)}",
                hint=f"a multi-agent env has at most {MAX_AGENTS} agents here",
            )
        return []
    except Exception as exc:  # a user's agents function: its failure is not ours to raise
        if ctx is not None:
            ctx.report(
                "PG141",
                f"WorkerSet {brief(rid)}: the agent ids of env {brief(entry.name)} could not "
                f"be listed from env_config ({type(exc).__name__}: {brief(str(exc))})",
                pointer=where,
                hint="fix env_config, or the agents function the env was registered with",
            )
        return []
    if len(agents) > MAX_AGENTS:
        if ctx is not None:
            ctx.report(
                "PG141",
                f"WorkerSet {brief(rid)}: env {brief(entry.name)} has {len(agents)} agents "
                f"with this env_config, more than {MAX_AGENTS}",
                pointer=where,
                hint=f"use at most {MAX_AGENTS} agents",
            )
        return []
    return [str(a) for a in agents]


def check_policy_mapping(ctx: Context) -> None:
    """PG195, PG190, PG191, PG192 on every multi-agent worker set."""
    for rid, ws in _multi_agent_sets(ctx).items():
        base = f"/resources/{rid}/params"
        entry = get_multi_agent_env(ws.env)
        if entry is None:
            names = multi_agent_env_names()
            ctx.report(
                "PG195",
                f"WorkerSet {brief(rid)} declares policies (multi-agent) but its env "
                f"{brief(ws.env)} is not a registered multi-agent env",
                pointer=f"{base}/env",
                hint=f"registered: {', '.join(names)}; a Python plan registers its own "
                "with plangraph.ops.register_multi_agent_env(name, creator)",
                suggestions=close_matches(ws.env, names),
            )
        declared = sorted(ws.policies or {})
        for key, pid in sorted(ws.policy_mapping.items()):
            if pid not in declared:
                hint, close = _unknown_policy_hint(pid, declared)
                ctx.report(
                    "PG190",
                    f"WorkerSet {brief(rid)}: policy_mapping maps {brief(key)} to policy "
                    f"{brief(pid)}, which is not declared in policies",
                    pointer=f"{base}/policy_mapping/{_escape(key)}",
                    hint=f"map it to a declared policy or declare {brief(pid)}; {hint}",
                    suggestions=close,
                )
        if entry is None or entry.agents is None:
            continue
        agents = _agent_ids(entry, ws.env_config, ctx, rid)
        if not agents:
            continue
        for agent in agents:
            if map_agent(agent, ws.policy_mapping) is None:
                ctx.report(
                    "PG191",
                    f"WorkerSet {brief(rid)}: no policy_mapping entry maps agent "
                    f"{brief(agent)} of {ws.env} to a policy (agents: {_shown(agents)})",
                    pointer=f"{base}/policy_mapping",
                    hint=f'add "{agent}": "<policy id>" or a pattern that matches it '
                    '("*" maps every agent)',
                    suggestions=close_matches(agent, list(ws.policy_mapping)),
                )
        for key in sorted(ws.policy_mapping):
            matched = [
                a for a in agents if a == key or (is_pattern(key) and fnmatch.fnmatchcase(a, key))
            ]
            if not matched:
                ctx.report(
                    "PG192",
                    f"WorkerSet {brief(rid)}: policy_mapping entry {brief(key)} matches no "
                    f"agent of {ws.env} (agents: {_shown(agents)})",
                    pointer=f"{base}/policy_mapping/{_escape(key)}",
                    key=True,
                    hint="remove it, or correct the agent id or pattern",
                    suggestions=close_matches(key, agents),
                )


def _upstream_worker_sets(ctx: Context, nid: str) -> list[str]:
    """Worker sets named by ``nid`` (its ``workers``) or by the nodes feeding it."""
    found = []
    for cur in [nid, *sorted(ctx.topology.ancestors(nid))]:
        rid = resource_ref_id(getattr(ctx.params.get(cur), "workers", None))
        if rid is not None and isinstance(ctx.res_params.get(rid), WorkerSetParams):
            found.append(rid)
    return sorted(set(found))


def check_multi_agent_policies(ctx: Context) -> None:
    """PG190 and PG194 on the ``policies`` param of every operator that has one."""
    for nid in sorted(ctx.plan.nodes):
        params = ctx.params.get(nid)
        named = getattr(params, "policies", None)
        if params is None or not isinstance(named, tuple) or nid in ctx.topology.cyclic:
            continue
        op = ctx.plan.nodes[nid].op
        ins = ctx.input_types.get(nid, ())
        in_type = ins[0] if ins else None
        rids = _upstream_worker_sets(ctx, nid)
        multi = [r for r in rids if ctx.res_params[r].policies is not None]  # type: ignore[union-attr]
        pointer = f"/nodes/{nid}/params/policies"
        if named and rids and not multi:
            ctx.report(
                "PG194",
                f"{op} {brief(nid)} names policies {list(named)}, but worker set "
                f"{brief(rids[0])} is single-agent (one policy, no policy ids)",
                node=nid,
                pointer=pointer,
                hint="remove policies, or declare policies and a policy_mapping on the worker set",
            )
            continue
        for rid in multi:
            declared = sorted(ctx.res_params[rid].policies or {})  # type: ignore[union-attr]
            for i, pid in enumerate(named):
                if pid not in declared:
                    hint, close = _unknown_policy_hint(pid, declared)
                    ctx.report(
                        "PG190",
                        f"{op} {brief(nid)} names policy {brief(pid)}, which worker set "
                        f"{brief(rid)} does not declare",
                        node=nid,
                        pointer=f"{pointer}/{i}",
                        hint=hint,
                        suggestions=close,
                    )
        if not multi:
            continue
        if (
            op == "ConcatBatches"
            and getattr(params, "count_steps_by", None) == "agent_steps"
            and in_type == SAMPLE_BATCH
        ):
            ctx.report(
                "PG194",
                f"ConcatBatches {brief(nid)} counts agent steps, but its input is a "
                "SampleBatch (one policy's rows: each row is one agent step already)",
                node=nid,
                pointer=f"/nodes/{nid}/params/count_steps_by",
                hint='use count_steps_by="env_steps" here',
            )
        one_policy = (op == "StoreToReplay" and in_type == MULTI_AGENT_BATCH) or (
            op in _TRAINERS and in_type == SAMPLE_BATCH
        )
        if one_policy and len(named) != 1:
            what = (
                "stores one policy's rows"
                if op == "StoreToReplay"
                else "trains one policy on replayed rows"
            )
            ctx.report(
                "PG194",
                f"{op} {brief(nid)} {what} of multi-agent worker set {brief(multi[0])}, "
                f"but policies names {len(named)} ({list(named)})",
                node=nid,
                pointer=pointer,
                hint='name exactly one policy, e.g. policies=["'
                + sorted(ctx.res_params[multi[0]].policies or {"<id>": None})[0]  # type: ignore[union-attr]
                + '"]',
            )


def _selected(ctx: Context, nid: str) -> set[str] | None:
    """Policies a ``MultiAgentBatch`` reaching ``nid`` can hold: those every upstream
    ``SelectExperiences`` keeps (None: not narrowed)."""
    keep: set[str] | None = None
    for cur in ctx.topology.ancestors(nid):
        if ctx.plan.nodes[cur].op == "SelectExperiences":
            named = getattr(ctx.params.get(cur), "policies", None)
            if isinstance(named, tuple):
                keep = set(named) if keep is None else keep & set(named)
    return keep


def check_trained_policies(ctx: Context) -> None:
    """PG193: every declared policy is trained by some operator and acted by some agent."""
    for rid, ws in _multi_agent_sets(ctx).items():
        declared = sorted(ws.policies or {})
        trained: set[str] = set()
        for nid, node in ctx.plan.nodes.items():
            if node.op not in _TRAINERS or ctx.params.get(nid) is None:
                continue
            if rid not in _upstream_worker_sets(ctx, nid):
                continue
            named = getattr(ctx.params[nid], "policies", ())
            if named:
                trained.update(named)
            else:
                sel = _selected(ctx, nid)
                trained.update(declared if sel is None else sel)
        mapped = set(ws.policy_mapping.values())
        entry = get_multi_agent_env(ws.env)
        agents = _agent_ids(entry, ws.env_config) if entry and entry.agents else []
        if agents:
            mapped = {p for a in agents if (p := map_agent(a, ws.policy_mapping)) is not None}
        for pid in declared:
            if pid not in mapped:
                why = "no agent maps to it, so it never acts or learns"
            elif pid not in trained:
                why = "no operator trains it, so its agents act with its initial weights"
            else:
                continue
            ctx.report(
                "PG193",
                f"WorkerSet {brief(rid)}: policy {brief(pid)} is declared but {why}",
                pointer=f"/resources/{rid}/params/policies/{_escape(pid)}",
                key=True,
                hint="train it (TrainOneStep(policies=[...])), map an agent to it, or remove it",
            )
