"""Param types shared by the built-in operators: resource references and the worker set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from plangraph.ir.types import ANY, PortType, join

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
    return Field(  # type: ignore[no-any-return]
        "@workers", description='The WorkerSet resource (learner policy + rollout workers), "@id".'
    )


PolicyIds = tuple[Annotated[str, Field(min_length=1)], ...]
"""Policy ids of a multi-agent worker set (``WorkerSet`` ``policies``), in any order."""


def policies_field(what: str) -> Any:
    """The ``policies`` param of an op that serves multi-agent plans: ``what`` says what
    the op does with the listed policies (default ``()``)."""
    return Field((), description=f"Multi-agent: {what}.")


def same_as_input(types: Sequence[PortType], _params: Any) -> PortType:
    """Output rule of a pass-through op: the type of its (one) input, ``Any`` unknown."""
    return join(types) if types else ANY
