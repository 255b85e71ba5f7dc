"""Built-in merge operators: drive several branches (``Concurrently``), merge, fan out.

Implementations: ``plangraph/runtime/ops/merge.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from plangraph.ir.types import ANY, PortType, join
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams

__all__ = [
    "Concurrently",
    "ConcurrentlyParams",
    "Duplicate",
    "DuplicateParams",
    "Union",
    "UnionParams",
]


Weight = Annotated[float, Field(gt=0)] | Literal["*"]


class ConcurrentlyParams(OpParams):
    """Drive several branches from one stream, e.g. DQN's store and replay/train branches.

    Inputs are pulled in their ``inputs`` order. ``round_robin``: a deterministic rotation,
    taking ``weights[i]`` items from input ``i`` per round (fractions rounded at random,
    ``"*"``: as many as are ready, up to 100, never blocking); ``async``: items as they
    become ready. Only the items of inputs listed in ``output_indexes`` are emitted; every
    input is still driven. Output type: the union of the emitted inputs' types.
    """

    mode: Literal["round_robin", "async"] = Field(
        "round_robin", description="round_robin: fixed rotation; async: as items are ready."
    )
    output_indexes: tuple[Annotated[int, Field(ge=0)], ...] | None = Field(
        None, description="Input positions whose items are emitted (default: all)."
    )
    weights: tuple[Weight, ...] | None = Field(
        None,
        description='Items per round from each input (positive numbers or "*"); '
        "round_robin only; one per input.",
    )

    @field_validator("output_indexes")
    @classmethod
    def _indexes(cls, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if v is not None:
            if not v:
                raise ValueError("output_indexes must name at least one input")
            if len(set(v)) != len(v):
                raise ValueError("output_indexes must not repeat an index")
        return v

    @model_validator(mode="after")
    def _weights(self) -> ConcurrentlyParams:
        if self.weights is not None:
            if self.mode != "round_robin":
                raise ValueError("weights are only allowed with mode 'round_robin'")
            if all(w == "*" for w in self.weights):
                raise ValueError('at least one weight must be a number, not "*"')
        return self


def _check_concurrently(params: ConcurrentlyParams, n: int) -> list[tuple[str, str]]:
    errs: list[tuple[str, str]] = []
    if params.output_indexes is not None:
        bad = [i for i in params.output_indexes if i >= n]
        if bad:
            errs.append(
                (
                    "output_indexes",
                    f"output_indexes {list(bad)} out of range for {n} inputs (valid: 0..{n - 1})",
                )
            )
    if params.weights is not None and len(params.weights) != n:
        errs.append(
            ("weights", f"weights has {len(params.weights)} entries but the node has {n} inputs")
        )
    return errs


def _concurrently_output(types: Sequence[PortType], params: ConcurrentlyParams) -> PortType:
    if not types:
        return ANY
    idx = params.output_indexes
    chosen = [types[i] for i in idx if i < len(types)] if idx is not None else list(types)
    return join(chosen) if chosen else ANY


Concurrently = register_op(
    "Concurrently",
    category="merge",
    apply="stream",
    variadic="Any",
    min_inputs=2,
    output="Any",
    params=ConcurrentlyParams,
    check_params=_check_concurrently,
    infer_output=_concurrently_output,
    builtin=True,
)


class UnionParams(OpParams):
    """Merge streams into one (``a.union(b, ...)``): every input is driven.

    ``deterministic``: take one item from each input in turn; otherwise items as they
    become ready. Output type: the union of the input types.
    """

    deterministic: bool = Field(False, description="Rotate inputs instead of as-ready.")


Union = register_op(
    "Union",
    category="merge",
    apply="stream",
    variadic="T",
    min_inputs=2,
    output="T",
    params=UnionParams,
    builtin=True,
)


class DuplicateParams(OpParams):
    """Fan a stream out to several consumers (``stream.duplicate(n)``).

    Each consumer sees every item; a consumer that runs ahead waits (not-ready marker)
    until the others catch up, so memory stays bounded. A stream consumed by more than one
    node must go through a Duplicate.
    """


Duplicate = register_op(
    "Duplicate",
    category="merge",
    apply="stream",
    inputs=["T"],
    output="T",
    params=DuplicateParams,
    builtin=True,
)
