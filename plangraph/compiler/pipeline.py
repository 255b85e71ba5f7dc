"""The checks an analysis runs, in order, and the runner that runs them.

:data:`BUILTIN_CHECKS` is the whole pipeline, spelled out: each check reads what the
ones before it resolved (``params`` needs ``operators``, ``types`` needs ``cycles``), so
the order is part of the design and lives here, in one tuple, rather than in numbers
scattered over the modules that define the checks. Loading the plan ("load") always comes
first and is not a check.

A user check is added with :func:`register_check`, after a named check; the running
pipeline is :func:`checks` (also ``plangraph.compiler.CHECKS``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from plangraph.compiler import (
    aggregation_checks,
    graph_checks,
    merge_checks,
    multi_agent_checks,
    resolve,
    resource_checks,
    semantic_checks,
    shard_checks,
)
from plangraph.compiler.compiled import PassRecord
from plangraph.compiler.context import Context
from plangraph.ops.describe import summary

__all__ = ["BUILTIN_CHECKS", "Check", "checks", "register_check", "run_checks"]


@dataclass(frozen=True)
class Check:
    """One check of the pipeline: ``name`` (shown by ``explain``, stable), ``doc`` (one
    line: what it checks) and ``fn(ctx) -> None``, which appends diagnostics to ``ctx``
    and fills in what later checks read."""

    name: str
    doc: str
    fn: Callable[[Context], None]

    @classmethod
    def of(cls, name: str, fn: Callable[[Context], None]) -> Check:
        """A check whose ``doc`` is the first sentence of ``fn``'s docstring, whole (a
        docstring's first line may end mid-sentence), as plain text."""
        return cls(name, summary(fn.__doc__ or ""), fn)


BUILTIN_CHECKS: tuple[Check, ...] = (
    # names and values
    Check.of("config", resolve.check_config),
    Check.of("operators", resolve.check_operators),
    Check.of("params", resolve.check_params),
    Check.of("resources", resolve.check_resources),
    # graph shape and types
    Check.of("graph", graph_checks.check_graph),
    Check.of("cycles", graph_checks.check_cycles),
    Check.of("arity", graph_checks.check_arity),
    Check.of("fan-out", graph_checks.check_fan_out),
    Check.of("types", graph_checks.check_types),
    Check.of("shards", shard_checks.check_shards),
    # dataflow
    Check.of("replay", graph_checks.check_replay),
    Check.of("learner", graph_checks.check_learner),
    Check.of("reachability", graph_checks.check_reachability),
    Check.of("output-type", graph_checks.check_output_type),
    # what the plan means for the algorithm (values known at compile time only)
    Check.of("env-spaces", semantic_checks.check_env_spaces),
    Check.of("capabilities", semantic_checks.check_capabilities),
    Check.of("all-reduce", semantic_checks.check_all_reduce),
    Check.of("replay-use", semantic_checks.check_replay_use),
    Check.of("replay-ready", semantic_checks.check_replay_ready),
    Check.of("batch-sizes", semantic_checks.check_batch_sizes),
    Check.of("aggregation", aggregation_checks.check_aggregation),
    Check.of("gradient-sources", semantic_checks.check_gradient_sources),
    # multi-agent: env names, policy mapping, policies= params, untrained policies
    Check.of("policy-mapping", multi_agent_checks.check_policy_mapping),
    Check.of("policies", multi_agent_checks.check_multi_agent_policies),
    Check.of("trained-policies", multi_agent_checks.check_trained_policies),
    # how Concurrently drives its branches (a plan that would hang is refused here)
    Check.of("branches-produce", merge_checks.check_branches_produce),
    Check.of("branch-turns", merge_checks.check_branch_turns),
    Check.of("round-robin", merge_checks.check_round_robin_throttle),
    # what the plan asks of the machine (or the Ray cluster) it will run on
    Check.of("capacity", resource_checks.check_capacity),
    Check.of("replay-size", resource_checks.check_replay_size),
)

_pipeline: tuple[Check, ...] = BUILTIN_CHECKS


def checks() -> tuple[Check, ...]:
    """The pipeline :func:`plangraph.compiler.analyze` runs: the built-in checks plus any
    added by :func:`register_check`, in run order."""
    return _pipeline


def register_check(check: Check, *, after: str) -> tuple[Check, ...]:
    """Run ``check`` right after the check named ``after`` in every later analysis.

    Returns the new pipeline. Raises ``ValueError`` if a check of that name is already
    in the pipeline or no check is named ``after`` (the names: ``plangraph explain``).
    """
    global _pipeline
    names = [c.name for c in _pipeline]
    if check.name in names:
        raise ValueError(f"check {check.name!r} is already in the pipeline")
    if after not in names:
        raise ValueError(f"no check named {after!r}; the pipeline is: {', '.join(names)}")
    i = names.index(after) + 1
    _pipeline = (*_pipeline[:i], check, *_pipeline[i:])
    return _pipeline


def run_checks(ctx: Context, pipeline: Iterable[Check]) -> list[PassRecord]:
    """Run ``pipeline`` on ``ctx`` in order; one :class:`PassRecord` per check.

    A check that raises is a bug in the check, not in the plan: it is reported as PG199
    naming the check and the exception, and the checks after it still run (they tolerate
    missing data, so they report what they can).
    """
    records: list[PassRecord] = []
    for chk in pipeline:
        before = len(ctx.diagnostics)
        try:
            chk.fn(ctx)
        except Exception as exc:  # any bug in a check; KeyboardInterrupt still stops
            what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            ctx.report(
                "PG199",
                f"check {chk.name!r} crashed with {what}",
                hint="a bug in the check (plangraph's, or a registered operator's param "
                "check), not in the plan: please report it with the plan and this message; "
                "the other checks still ran",
            )
        records.append(PassRecord(chk.name, chk.doc, len(ctx.diagnostics) - before))
    return records
