"""Pass ``map-fusion``: run chains of per-item operators on the driver as one stage.

A chain is two or more driver nodes whose operators map one item to one item
(``apply="for_each"``: ``TrainOneStep``, ``UpdateTarget``, ``AverageGradients``,
``ApplyGradients``, user maps, ...), each reading only the one before it and being its
only reader. Lowered one by one, each is a flow-iterator stage: a generator step per item
and per operator. Fused, one stage calls the operators in turn on each item. The calls,
their order and their arguments are the same, so the results are: every operator keeps
its own timer, its errors still name its node, and an operator that asks to be called
again (``NOT_READY``, e.g. ``Enqueue`` under back-pressure) is called again with the same
item, the operators before it not again. A user operator with a whole-stream lowering
(``register_lowering``) ends a stage at build time.
"""

from __future__ import annotations

from plangraph.compiler.passes.base import Change, Draft, OptimisationPass, Outcome
from plangraph.text import brief

__all__ = ["PASS", "stage_name"]


def stage_name(stage: tuple[str, ...]) -> str:
    """The name of a fused stage: its node ids joined by ``+`` (``"train+target"``)."""
    return "+".join(stage)


def _fusable(draft: Draft, nid: str) -> bool:
    sig = draft.sig(nid)
    return (
        sig is not None
        and sig.apply == "for_each"
        and sig.placement != "shard"  # runs in the rollout workers, not a driver stage
        and len(draft.inputs(nid)) == 1
        and draft.params.get(nid) is not None
        and nid not in draft.hosts  # moved onto the rollout workers
        and nid not in draft.ctx.topology.cyclic
    )


def _run(draft: Draft) -> Outcome:
    out = Outcome()
    taken: set[str] = set()
    for nid in draft.order():
        if nid in taken or not _fusable(draft, nid):
            continue
        chain = [nid]
        while True:
            users = draft.users(chain[-1])
            if len(users) != 1 or users[0] in taken or not _fusable(draft, users[0]):
                break
            chain.append(users[0])
        if len(chain) < 2:
            continue
        stage = tuple(chain)
        taken.update(stage)
        draft.stages.append(stage)
        ops = " -> ".join(f"{n} ({draft.op(n)})" for n in stage)
        out.changes.append(
            Change(
                "nodes " + ", ".join(map(brief, stage)),
                f"{len(stage)} driver stages: {ops}",
                f"1 stage {brief(stage_name(stage))}: one call per item runs them in turn, "
                "each with its own timer",
                "each maps one item to one item (for_each), reads only the one before it and "
                "is its only reader: the same calls in the same order",
            )
        )
    if not out.changes:
        out.notes.append(
            "no chain of two or more per-item (for_each) driver operators, each the only "
            "reader of the one before"
        )
    return out


PASS = OptimisationPass(
    "map-fusion",
    "Run chains of per-item driver operators as one flow stage",
    _run,
)
