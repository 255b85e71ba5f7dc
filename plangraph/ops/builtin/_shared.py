"""Param types shared by the built-in operators: resource references and the worker set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from plangraph.ir.types import MULTI_AGENT_BATCH, SAMPLE_BATCH, PortType

__all__ = [
    "WORKERS_READ",
    "WORKERS_WRITE",
    "PolicyIds",
    "ResourceRef",
    "policies_field",
    "same_as_input",
    "workers_field",
]

ResourceRef = Annotated[
    str,
    Field(
        pattern=r"^@[A-Za-z_][A-Za-z0-9_.\-]*$",
        description='Reference to a declared resource, "@id".',
    ),
]

WORKERS_READ = {"workers": ("WorkerSet", "read")}
"""``resources=`` of an op that reads the worker set (samples, computes gradients)."""
WORKERS_WRITE = {"workers": ("WorkerSet", "write")}
"""``resources=`` of an op that updates the learner policy (and broadcasts its weights)."""


def workers_field() -> str:
    """The ``workers`` param every op using the worker set has (default ``"@workers"``)."""
    return Field(
        "@workers", description='The WorkerSet resource (learner policy + rollout workers), "@id".'
    )


PolicyIds = tuple[Annotated[str, Field(min_length=1)], ...]
"""Policy ids of a multi-agent worker set (``WorkerSet`` ``policies``), in any order."""


def policies_field(what: str) -> Any:
    """The ``policies`` param of an op that serves multi-agent plans: ``what`` says what
    the op does with the listed policies (default ``()``)."""
    return Field((), description=f"Multi-agent: {what}.")


def same_as_input(types: Sequence[PortType], _params: Any) -> PortType:
    """Output rule of a batch op that serves both kinds of batch: ``MultiAgentBatch`` out
    when one comes in, else ``SampleBatch`` (also for an unknown or wrong input, which the
    input's own type check reports once)."""
    return MULTI_AGENT_BATCH if list(types) == [MULTI_AGENT_BATCH] else SAMPLE_BATCH
