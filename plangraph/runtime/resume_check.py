"""Whether a checkpoint can be restored into a changed plan (``plangraph run --resume``).

The plan a run resumes with is compared (``plangraph.compiler.diff``) with the plan that
wrote the checkpoint (its ``plan.json``), both with the ``--env``/``--num-workers`` each
launch applied to every ``WorkerSet``. Each change is then *blocking* (the checkpoint's
state cannot be restored into the new plan, or would be restored into something it does
not describe) or *harmless* (listed as a note; the run continues from the checkpoint).

What ``Algorithm.restore`` needs, and so what blocks (everything else is harmless):

* the plan name (a checkpoint restores only into the plan that wrote it);
* every resource the checkpoint holds state for (``policies``/``workers``: worker sets,
  ``buffers``: replay buffers, ``learners``: learner threads) still declared, of the same
  kind, and for a ``WorkerSet`` the same ``env``, ``num_workers`` and
  ``num_envs_per_worker`` (one saved state per rollout worker and per sub-env), the same
  ``policy.algo`` (networks and optimizer state, e.g. a target network) and the same model
  (``policy.hiddens``, ``policy.activation``: the saved weights' shapes and meaning); for
  a ``ReplayBuffer`` the same ``capacity`` and ``prioritized`` (the saved rows and
  priorities);
* every node the checkpoint holds operator state for (``ConcatBatches``' pending batches,
  ``Concurrently``'s and ``Union``'s place in the rotation over their inputs) still there,
  with the same op and as many inputs (a rotation's state is over input positions).

Harmless, for example: learning rates, loss coefficients, batch sizes, rollout fragment
length, stop criteria (not part of the plan), reporting params, nodes and resources added
(they start empty: the checkpoint has nothing for them). Imports no ray and no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plangraph.compiler.diff import PlanDiff, ValueChange, diff_plans
from plangraph.compiler.diff_text import format_value
from plangraph.compiler.plan_view import SAVED_PLAN_FILE, PlanView

__all__ = ["ResumeCheck", "ResumeIssue", "check_resume", "saved_plan_file"]

# Params of a resource kind that shape the state a checkpoint holds for it, and why.
_STATE_PARAMS: dict[str, dict[tuple[str, ...], str]] = {
    "WorkerSet": {
        ("env",): "the saved rollout workers hold envs and episodes of the old env, and the "
        "policy's input and output sizes are the old env's",
        ("num_workers",): "the checkpoint holds one state per rollout worker; restore needs "
        "as many workers as were saved",
        ("num_envs_per_worker",): "each saved rollout worker holds one state per sub-env; "
        "restore needs as many sub-envs",
        ("policy", "algo"): "the saved networks and optimizer state are another "
        "algorithm's (e.g. with or without a target network)",
        ("policy", "hiddens"): "the saved weights have the old layer widths",
        ("policy", "activation"): "the saved weights were trained with the old activation",
    },
    "ReplayBuffer": {
        ("capacity",): "the saved buffer is restored only into one of the same capacity",
        ("prioritized",): "uniform and prioritized replay save different state (priorities)",
        ("item",): "a buffer of sequences keeps priorities at sequences' first rows only, a "
        "buffer of transitions at every row",
    },
}
# Where a checkpoint's state tree keeps each resource's state (Algorithm.save).
_RESOURCE_STATE_KEYS = ("policies", "workers", "buffers", "learners")


@dataclass(frozen=True)
class ResumeIssue:
    """One change between the saved and the new plan: ``pointer`` into the plan JSON,
    ``what`` changed (values as compiled), ``why`` it blocks (``None``: harmless), and
    ``where`` in the new plan file it is (``file:line:col``, if known)."""

    pointer: str
    what: str
    why: str | None = None
    where: str | None = None

    def format(self) -> str:
        head = f"{self.where}: " if self.where else ""
        tail = f": {self.why}" if self.why else ""
        return f"{head}{self.pointer}: {self.what}{tail}"


@dataclass(frozen=True)
class ResumeCheck:
    """The changes, split: ``blocking`` ones refuse the resume, ``harmless`` ones are a
    note. Both empty: the plan is the saved one."""

    diff: PlanDiff
    blocking: tuple[ResumeIssue, ...]
    harmless: tuple[ResumeIssue, ...]

    @property
    def ok(self) -> bool:
        return not self.blocking


def saved_plan_file(checkpoint: Path, run_dir: Path) -> Path | None:
    """The compiled plan that wrote ``checkpoint``: its own ``plan.json``, else the run
    directory's (older checkpoints); ``None`` when neither exists."""
    for candidate in (checkpoint / SAVED_PLAN_FILE, run_dir / SAVED_PLAN_FILE):
        if candidate.is_file():
            return candidate
    return None


def _stateful_resources(state: Mapping[str, Any]) -> set[str]:
    out: set[str] = set()
    for key in _RESOURCE_STATE_KEYS:
        part = state.get(key)
        if isinstance(part, Mapping):
            out.update(str(k) for k in part)
    return out


def _stateful_nodes(state: Mapping[str, Any]) -> set[str]:
    ops = state.get("operators")
    return {str(k) for k in ops} if isinstance(ops, Mapping) else set()


def _value(c: ValueChange) -> str:
    a = "(absent)" if c.status == "added" else format_value(c.a)
    b = "(absent)" if c.status == "removed" else format_value(c.b)
    return f"{a} -> {b}"


def _ids(ids: tuple[str, ...]) -> str:
    return "[" + ", ".join(ids) + "]"


def check_resume(
    saved: PlanView,
    plan: PlanView,
    state: Mapping[str, Any],
    *,
    saved_label: str = "the saved plan",
    plan_label: str = "the plan",
    locate: Callable[[str], str | None] | None = None,
) -> ResumeCheck:
    """Classify every change from ``saved`` (the plan that wrote the checkpoint) to
    ``plan`` (the one resuming) by what restoring ``state`` (the checkpoint's state tree)
    into ``plan`` needs; see the module docstring. Both views should already carry the
    ``--env``/``--num-workers`` of their launch (``PlanView.with_resource_params``).
    ``locate(pointer)`` says where a change was made (default: where ``plan`` was
    written, ``file:line:col``); e.g. ``"--num-workers 1"`` for a launch override."""
    diff = diff_plans(saved, plan, a_label=saved_label, b_label=plan_label)
    node_state, res_state = _stateful_nodes(state), _stateful_resources(state)
    blocking: list[ResumeIssue] = []
    harmless: list[ResumeIssue] = []

    def add(pointer: str, what: str, why: str | None) -> None:
        if locate is not None:
            where = locate(pointer)
        else:
            loc = plan.locate(pointer)
            where = str(loc) if loc else None
        issue = ResumeIssue(pointer, what, why, where)
        (blocking if why else harmless).append(issue)

    if diff.name is not None:
        add(
            "/name",
            f"{format_value(diff.name[0])} -> {format_value(diff.name[1])}",
            "a checkpoint restores only into the plan that wrote it",
        )
    if diff.output is not None:
        add("/output", f"{diff.output[0]} -> {diff.output[1]}", None)
    for c in diff.config:
        add(c.pointer("/config"), _value(c), None)

    for rid in diff.resources_removed:
        kind = saved.resources[rid].kind
        why = (
            f"the checkpoint holds this {kind}'s state and the plan no longer declares it"
            if rid in res_state
            else None
        )
        add(f"/resources/{rid}", f"{kind} removed", why)
    for rid in diff.resources_added:
        add(f"/resources/{rid}", f"{plan.resources[rid].kind} added (starts empty)", None)
    for rc in diff.resources_changed:
        base = f"/resources/{rc.id}"
        held = rc.id in res_state
        if rc.kind is not None:
            why = (
                f"the checkpoint holds a {rc.kind[0]}'s state, which a {rc.kind[1]} cannot take"
                if held
                else None
            )
            add(f"{base}/kind", f"{rc.kind[0]} -> {rc.kind[1]}", why)
            continue  # another kind's params are all different: the kind says it
        rules = _STATE_PARAMS.get(saved.resources[rc.id].kind, {}) if held else {}
        for c in rc.params:
            add(c.pointer(f"{base}/params"), _value(c), rules.get(c.path))

    for nid in diff.nodes_removed:
        op = saved.nodes[nid].op
        why = (
            f"the checkpoint holds this {op}'s state and the plan no longer has the node"
            if nid in node_state
            else None
        )
        add(f"/nodes/{nid}", f"{op} removed", why)
    for nid in diff.nodes_added:
        add(f"/nodes/{nid}", f"{plan.nodes[nid].op} added", None)
    for nc in diff.nodes_changed:
        base = f"/nodes/{nc.id}"
        held = nc.id in node_state
        if nc.op is not None:
            why = (
                f"the checkpoint holds a {nc.op[0]}'s state, which a {nc.op[1]} cannot take"
                if held
                else None
            )
            add(f"{base}/op", f"{nc.op[0]} -> {nc.op[1]}", why)
        if nc.inputs is not None:
            old, new = nc.inputs
            # A rotation's state is over input positions; other ids at as many positions
            # (an upstream node renamed, a branch replaced) leave it usable.
            why = (
                f"its saved state is a place in a rotation over its {len(old)} inputs; it "
                f"now has {len(new)}"
                if held and len(old) != len(new)
                else None
            )
            add(f"{base}/inputs", f"{_ids(old)} -> {_ids(new)}", why)
        for c in nc.params:
            add(c.pointer(f"{base}/params"), _value(c), None)
    return ResumeCheck(diff, tuple(blocking), tuple(harmless))
