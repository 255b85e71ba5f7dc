"""Param types shared by the built-in operators: resource references and the worker set."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["WORKERS_READ", "WORKERS_WRITE", "ResourceRef", "workers_field"]

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
