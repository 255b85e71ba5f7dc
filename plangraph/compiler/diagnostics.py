"""Diagnostics: stable codes, severities, locations, and their text/JSON forms.

Every problem the compiler finds is a :class:`Diagnostic` with a stable ``code`` (and a
readable ``name``), the node id, a JSON pointer into the plan, the source location
(line:col in a JSON file, file:line of the builder call in a Python plan), a message, a
hint and did-you-mean suggestions. ``CODES`` is the full table (``plangraph explain``
and the docs list it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from plangraph.errors import PlanError
from plangraph.ir.source import Location
from plangraph.text import escape_surrogates, printable

__all__ = ["CODES", "Diagnostic", "PlanValidationError", "Severity"]

Severity = Literal["error", "warning"]

CODES: dict[str, tuple[str, Severity, str]] = {
    # loading
    "PG100": ("json-syntax", "error", "The plan file is not valid JSON."),
    "PG101": ("unknown-key", "error", "A key the plan format does not know."),
    "PG102": ("invalid-plan", "error", "A plan field is missing or has the wrong type."),
    "PG103": ("python-plan-error", "error", "A Python plan failed to build or defines no plan."),
    "PG104": ("unreadable-plan", "error", "The plan cannot be read (encoding, file type)."),
    "PG105": (
        "too-large",
        "error",
        "A value nested too deeply, an integer too large, or a plan with too many values.",
    ),
    # overrides (--set)
    "PG108": (
        "override-shadows-config",
        "warning",
        "A --set path replaces a ${key} that the plan also reads elsewhere.",
    ),
    # names and references
    "PG110": ("unknown-op", "error", "A node names an operator that is not registered."),
    "PG111": ("unknown-input", "error", "A node input names no node of the plan."),
    "PG112": ("unknown-resource", "error", 'An "@id" names no declared resource.'),
    "PG113": ("unknown-config-key", "error", 'A "${key}" names no config key.'),
    "PG114": ("duplicate-id", "error", "Two nodes (or resources) share an id."),
    "PG115": ("unknown-output", "error", "The plan output names no node."),
    "PG116": ("unknown-resource-kind", "error", "A resource kind that is not registered."),
    "PG117": (
        "unknown-config-override",
        "error",
        "A --set override that names no config key, node or resource of the plan.",
    ),
    "PG118": ("bad-config-ref", "error", 'A "${...}" that does not parse or evaluate.'),
    "PG119": ("unknown-param", "error", "A param the operator or resource does not take."),
    # graph shape
    "PG120": ("cycle", "error", "The graph has a cycle (plans are DAGs)."),
    "PG130": ("type-mismatch", "error", "An edge carries a type its consumer cannot take."),
    "PG131": ("wrong-arity", "error", "A node has the wrong number of inputs."),
    # values
    "PG140": ("invalid-param", "error", "An operator param value is missing or invalid."),
    "PG141": ("invalid-resource-param", "error", "A resource param value is invalid."),
    "PG142": ("resource-kind-mismatch", "error", "A param references the wrong kind."),
    # dataflow
    "PG150": ("replay-no-writer", "error", "A replay buffer nothing writes to."),
    "PG151": ("replay-no-reader", "error", "A replay buffer nothing reads from."),
    "PG152": ("replay-starvation", "error", "Replay reader and writer not driven together."),
    "PG153": ("fan-out", "error", "A stream consumed twice without a Duplicate."),
    "PG154": ("learner-no-enqueue", "error", "A learner thread that nothing enqueues to."),
    "PG155": ("learner-no-dequeue", "error", "A learner thread whose results nobody reads."),
    "PG156": ("learner-not-driven", "error", "Enqueue and Dequeue not driven together."),
    "PG160": ("unreachable-node", "error", "A node that cannot reach the output never runs."),
    "PG161": ("output-not-result", "warning", "The plan output is not a Result stream."),
    "PG162": ("unused-resource", "warning", "A declared resource no node references."),
    # semantics
    "PG170": (
        "missing-capability",
        "error",
        "An operator calls on something the policy lacks (e.g. a target network).",
    ),
    "PG171": (
        "on-policy-from-replay",
        "error",
        "An on-policy algorithm (a2c, ppo, impala, appo), or a recurrent model, trained "
        "on batches from a replay buffer; or an algorithm without V-trace (a2c, ppo) fed "
        "old batches by MixInReplay (impala and appo correct those).",
    ),
    "PG172": (
        "train-without-replay",
        "warning",
        "A replay learner (dqn) trained on fresh rollouts.",
    ),
    "PG173": ("replay-never-ready", "error", "learning_starts exceeds the replay capacity."),
    "PG174": (
        "uneven-train-batch",
        "warning",
        "min_batch_size is not a whole number of rollout rounds: every batch overshoots.",
    ),
    "PG175": (
        "minibatch-too-large",
        "warning",
        "sgd_minibatch_size is larger than the train batch it splits.",
    ),
    "PG176": (
        "branch-never-produces",
        "error",
        "A Concurrently input that can never produce an item (fed only by its own output).",
    ),
    "PG177": (
        "branch-keeps-turn",
        "error",
        "A Concurrently branch that never hands the turn back (waits on what only others do).",
    ),
    "PG178": (
        "round-robin-throttle",
        "warning",
        "A round_robin branch that blocks for many rollout rounds per item, stalling the others.",
    ),
    # resources
    "PG179": (
        "too-many-workers",
        "error",
        "More rollout workers than the machine or cluster can run (4 per CPU).",
    ),
    "PG180": (
        "cpu-oversubscribed",
        "warning",
        "More rollout workers than CPUs: they share cores, sampling stops scaling.",
    ),
    "PG181": (
        "memory-oversubscribed",
        "warning",
        "The rollout worker processes need more memory than the machine or cluster has.",
    ),
    "PG182": (
        "gradients-without-source",
        "error",
        'ApplyGradients(update_workers="source") fed gradients no rollout worker computed.',
    ),
    "PG183": (
        "unsupported-action-space",
        "error",
        "The policy cannot act in the env's action space (e.g. DQN on Box actions).",
    ),
    "PG184": (
        "unsupported-observation-space",
        "error",
        "The policy's model cannot read the env's observations, or the algorithm does "
        "not build (or learn with) that kind of model.",
    ),
    "PG185": (
        "replay-memory",
        "error",
        "Replay buffers that cannot fit in the memory available when full (validate "
        "--memory; replay actors at build, against the memory Ray reports).",
    ),
    "PG186": (
        "resources-unavailable",
        "error",
        "The plan reserves more CPUs, GPUs, memory or custom resources than the machine or "
        "cluster has.",
    ),
    "PG187": (
        "placement-infeasible",
        "error",
        "The rollout workers cannot be placed on the cluster's nodes with the declared "
        "placement strategy.",
    ),
    "PG188": (
        "empty-bundle",
        "error",
        "A placement strategy for rollout workers that reserve no resource (empty bundles).",
    ),
    "PG189": (
        "learner-gpus-unused",
        "warning",
        'The learner counts GPUs against the cluster but trains on device "cpu".',
    ),
    # multi-agent plans
    "PG190": (
        "unknown-policy",
        "error",
        "A policy_mapping entry or an operator's policies names a policy the worker set "
        "does not declare.",
    ),
    "PG191": (
        "unmapped-agent",
        "error",
        "An agent of the multi-agent env that no policy_mapping entry maps to a policy.",
    ),
    "PG192": (
        "unused-mapping-entry",
        "warning",
        "A policy_mapping agent id or pattern that matches no agent of the env.",
    ),
    "PG193": (
        "untrained-policy",
        "warning",
        "A declared policy that no operator trains (it acts with its initial weights).",
    ),
    "PG194": (
        "policies-misuse",
        "error",
        "policies= that cannot apply: on a single-agent worker set, or not exactly one "
        "policy where one batch of one policy's rows is meant.",
    ),
    "PG195": (
        "unknown-multi-agent-env",
        "error",
        "A multi-agent worker set's env names no registered multi-agent env.",
    ),
    "PG197": (
        "replay-item-mismatch",
        "error",
        "A policy trained from a replay resource that keeps another item than it learns "
        "from: R2D2 (replayed sequences with their stored state) from single transitions, "
        "or a transition learner (dqn) from sequences.",
    ),
    # per-shard streams (Shard[T], on the rollout workers)
    "PG200": (
        "shard-to-driver",
        "error",
        "A per-shard stream (Shard[T], on the rollout workers) fed to a driver operator "
        "without GatherShards.",
    ),
    "PG201": (
        "driver-to-shard",
        "error",
        "A driver stream fed to a per-shard operator (placement='shard') or to GatherShards.",
    ),
    "PG202": (
        "shard-never-gathered",
        "error",
        "A per-shard stream that no GatherShards brings to the driver (the plan output).",
    ),
    "PG203": (
        "shards-of-two-worker-sets",
        "error",
        "A per-shard operator (or GatherShards) reading the shards of two different WorkerSets.",
    ),
    # the compiler itself
    "PG196": (
        "replay-larger-than-memory",
        "warning",
        "A replay buffer that, full, needs more memory than the machine or cluster has (a "
        "lower bound from the env's spaces).",
    ),
    "PG198": (
        "dataset",
        "error",
        "An OfflineData dataset that is missing or unreadable, or whose columns do not fit "
        "the env or the learner of a ReadExperiences reading it (validate --datasets reads "
        "the Parquet footers only; plangraph run checks the same before launch).",
    ),
    "PG199": (
        "internal-check-error",
        "error",
        "A check or an optimisation pass crashed (a bug in it, not in the plan).",
    ),
}


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a plan. Its ``severity`` is always the one its code has in
    :data:`CODES` (``"error"`` blocks launch); an unknown code counts as an error."""

    code: str
    message: str
    node: str | None = None
    pointer: str = ""
    location: Location | None = None
    hint: str | None = None
    suggestions: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return CODES[self.code][0] if self.code in CODES else self.code

    @property
    def severity(self) -> Severity:
        return CODES[self.code][1] if self.code in CODES else "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def format(self) -> str:
        """Compiler-style text, e.g.::

        plans/x.json:12:30: error PG140 [invalid-param] node 'concat': min_batch_size ...
          at /nodes/concat/params/min_batch_size
          hint: ...
          did you mean: 'a', 'b'?

        The text prints in any terminal encoding: lone surrogates and control characters
        in ids, pointers and messages are shown as backslash escapes (``a\\tb``), never
        dropped; ids and the pointer stay on one line.
        """
        where = str(self.location) if self.location is not None else "<plan>"
        subject = f"node '{printable(self.node, newlines=False)}': " if self.node else ""
        message = printable(self.message)
        lines = [
            f"{printable(where)}: {self.severity} {self.code} [{self.name}] {subject}{message}"
        ]
        if self.pointer:
            lines.append(f"  at {printable(self.pointer, newlines=False)}")
        if self.hint:
            lines.append(f"  hint: {printable(self.hint)}")
        if self.suggestions:
            shown = ", ".join(printable(repr(s)) for s in self.suggestions)
            lines.append(f"  did you mean: {shown}?")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form. Strings are as found except that lone surrogates are written as
        ``\\udXXX`` (so the JSON encodes as UTF-8); control characters are left to the
        JSON encoder, which escapes them."""
        loc = self.location

        def text(v: str | None) -> str | None:
            return None if v is None else escape_surrogates(v)

        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": text(self.message),
            "node": text(self.node),
            "pointer": text(self.pointer),
            "file": text(loc.file) if loc else None,
            "line": loc.line if loc else None,
            "col": loc.col if loc else None,
            "hint": text(self.hint),
            "suggestions": [escape_surrogates(s) for s in self.suggestions],
        }


class PlanValidationError(PlanError):
    """Raised by :func:`plangraph.compile` when a plan has errors; ``diagnostics`` holds
    all of them (warnings included), ``compiled`` the best-effort analysis."""

    def __init__(self, diagnostics: Iterable[Diagnostic], compiled: Any = None) -> None:
        self.diagnostics = tuple(diagnostics)
        self.compiled = compiled
        errors = [d for d in self.diagnostics if d.is_error]
        head = f"plan has {len(errors)} error{'s' if len(errors) != 1 else ''}"
        super().__init__(head + ":\n" + "\n".join(d.format() for d in self.diagnostics))
