"""What an optimisation pass is, what it reports, and the draft plan it rewrites.

A pass runs after the checks, on a plan without errors. It reads the checked plan (the
analysis ``Context``: validated params, signatures, topology) and rewrites a
:class:`Draft` of the executed plan: node params, resource params, which nodes run on the
rollout workers, which driver nodes run as one fused stage. It never changes the nodes or
the edges, so the declared plan and the executed one have the same graph. Each pass says
what it changed (:class:`Change`: before, after, why) or why it changed nothing (notes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from plangraph.compiler.context import Context
from plangraph.ops.registry import OpSignature

__all__ = ["Change", "Draft", "OptimisationPass", "Outcome", "PassResult", "PassStatus"]

PassStatus = Literal["applied", "not applied", "off"]


@dataclass(frozen=True)
class Change:
    """One rewrite: ``target`` (``"node 'train'"``, ``"resource 'workers'"``), the plan
    ``before`` and ``after`` it (short text), and ``why`` it keeps the results."""

    target: str
    before: str
    after: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"target": self.target, "before": self.before, "after": self.after, "why": self.why}


@dataclass
class Outcome:
    """What one run of a pass did: its changes and its notes (why a candidate was left
    alone, or why there was nothing to do)."""

    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PassResult:
    """One optimisation pass of a compilation: ``status`` ``"applied"`` (at least one
    change), ``"not applied"`` (nothing changed; ``notes`` say why) or ``"off"`` (disabled
    with ``--no-pass``; ``notes`` say what the plan does instead, if anything)."""

    name: str
    doc: str
    status: PassStatus
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "doc": self.doc,
            "status": self.status,
            "changes": [c.to_dict() for c in self.changes],
            "notes": list(self.notes),
        }


@dataclass
class Draft:
    """The executed plan while the passes rewrite it; starts as the checked plan.

    ``params``/``res_params``: validated params by node/resource id (rewritten by
    passes); ``hosts``: node id -> id of the rollout source whose workers run it;
    ``stages``: fused driver stages (node ids in order), in topological order;
    ``sized_for``: worker set id -> the train batch (env steps) its ``"auto"`` fragment
    length was sized for.
    """

    ctx: Context
    params: dict[str, BaseModel | None]
    res_params: dict[str, BaseModel | None]
    hosts: dict[str, str] = field(default_factory=dict)
    stages: list[tuple[str, ...]] = field(default_factory=list)
    sized_for: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, ctx: Context) -> Draft:
        return cls(ctx=ctx, params=dict(ctx.params), res_params=dict(ctx.res_params))

    def snapshot(self) -> Draft:
        """A copy to roll back to (params are frozen models: the dicts are what change)."""
        return Draft(
            ctx=self.ctx,
            params=dict(self.params),
            res_params=dict(self.res_params),
            hosts=dict(self.hosts),
            stages=list(self.stages),
            sized_for=dict(self.sized_for),
        )

    # -- reading the checked plan -----------------------------------------------------

    def sig(self, nid: str) -> OpSignature | None:
        return self.ctx.sigs.get(nid)

    def op(self, nid: str) -> str:
        return self.ctx.plan.nodes[nid].op

    def inputs(self, nid: str) -> tuple[str, ...]:
        return tuple(self.ctx.plan.nodes[nid].inputs)

    def users(self, nid: str) -> tuple[str, ...]:
        return self.ctx.topology.users(nid)

    def order(self) -> tuple[str, ...]:
        """Node ids, inputs before users."""
        return self.ctx.topology.topological_order()

    def param(self, nid: str, name: str) -> Any:
        params = self.params.get(nid)
        return getattr(params, name, None) if params is not None else None


@dataclass(frozen=True)
class OptimisationPass:
    """A pass: ``name`` (stable: ``--no-pass NAME``), ``doc`` (one line: what it
    changes), ``run(draft) -> Outcome``; ``when_off(draft) -> Outcome`` for a pass that
    gives a declared value its meaning (``"auto"``): what the plan does with it off."""

    name: str
    doc: str
    run: Callable[[Draft], Outcome]
    when_off: Callable[[Draft], Outcome] | None = None
