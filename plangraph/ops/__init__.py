"""The operator catalog: signatures, ``Params`` models, and Python builders.

``from plangraph.ops import ParallelRollouts, ConcatBatches, TrainOneStep, ...`` gives
builders that record plan nodes (see :mod:`plangraph.ops.builder`); ``get_op(name)`` the
:class:`OpSignature`; ``register_op`` adds a user operator. Imports only pydantic and
``plangraph.ir`` (no ray, no torch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from plangraph.ir.types import PortType
from plangraph.ops import catalog as _catalog  # registers the built-ins
from plangraph.ops.builder import (
    OpFactory,
    PendingOp,
    PlanBuildError,
    Stream,
    _caller_location,
    op_factory,
)
from plangraph.ops.registry import (
    APPLY_MODES,
    CATEGORIES,
    OpParams,
    OpSignature,
    ResourceKind,
    ResourceParam,
    all_ops,
    all_resource_kinds,
    get_op,
    get_resource_kind,
    make_signature,
    register_resource_kind,
    register_signature,
    unregister_op,
)
from plangraph.ops.resources import (
    ReplayBufferParams,
    WorkerSetParams,
    replay_buffer,
    worker_set,
)

__all__ = [
    "APPLY_MODES",
    "CATEGORIES",
    "ApplyGradients",
    "AverageGradients",
    "Batch",
    "ComputeGradients",
    "ConcatBatches",
    "Concurrently",
    "Duplicate",
    "Flatten",
    "LocalReplay",
    "OpFactory",
    "OpParams",
    "OpSignature",
    "ParallelRollouts",
    "PendingOp",
    "PlanBuildError",
    "ReplayBufferParams",
    "ResourceKind",
    "ResourceParam",
    "StandardMetricsReporting",
    "StoreToReplay",
    "Stream",
    "TrainOneStep",
    "Union",
    "UpdateTarget",
    "WaitUntilTimestepsElapsed",
    "WorkerSetParams",
    "all_ops",
    "all_resource_kinds",
    "get_op",
    "get_resource_kind",
    "op_factory",
    "register_op",
    "register_resource_kind",
    "replay_buffer",
    "unregister_op",
    "worker_set",
]

del _catalog

ParallelRollouts = OpFactory("ParallelRollouts")
ConcatBatches = OpFactory("ConcatBatches")
TrainOneStep = OpFactory("TrainOneStep")
ComputeGradients = OpFactory("ComputeGradients")
Batch = OpFactory("Batch")
AverageGradients = OpFactory("AverageGradients")
ApplyGradients = OpFactory("ApplyGradients")
StoreToReplay = OpFactory("StoreToReplay")
LocalReplay = OpFactory("LocalReplay")
UpdateTarget = OpFactory("UpdateTarget")
Concurrently = OpFactory("Concurrently")
StandardMetricsReporting = OpFactory("StandardMetricsReporting")
Flatten = OpFactory("Flatten")
WaitUntilTimestepsElapsed = OpFactory("WaitUntilTimestepsElapsed")
Union = OpFactory("Union")
Duplicate = OpFactory("Duplicate")


def register_op(
    name: str | None = None,
    *,
    category: str,
    output: str | PortType,
    apply: str = "for_each",
    inputs: Sequence[str | PortType] = (),
    variadic: str | PortType | None = None,
    min_inputs: int | None = None,
    params: type[BaseModel] | None = None,
    doc: str | None = None,
    resources: Mapping[str, tuple[str, str]] | None = None,
    check_params: Callable[[Any, int], list[tuple[str, str]]] | None = None,
    infer_output: Callable[[Sequence[PortType], Any], PortType] | None = None,
    replace: bool = False,
) -> Any:
    """Register a user operator; returns its Python builder (an :class:`OpFactory`).

    Two forms::

        TopK = register_op("TopK", category="combine", inputs=["SampleBatch"],
                           output="SampleBatch", params=TopKParams)

        @register_op(category="combine", apply="filter", inputs=["SampleBatch"],
                     output="SampleBatch")
        class MinEpisodeReturn(OpParams):
            '''Keep batches whose mean episode return is at least ``threshold``.'''
            threshold: float = 0.0

    In the decorator form the class is the ``Params`` model, its name the op name and its
    docstring the op doc. ``inputs``/``output`` are port types as text (``"SampleBatch"``,
    ``"list[T]"``); ``resources`` maps a param to ``(kind, "read"|"write")``. Raises
    ``ValueError`` if the name is taken (unless ``replace``) or the signature is
    inconsistent (e.g. a for_each op without exactly one input).
    """

    loc = _caller_location()
    origin = str(loc) if loc is not None else None

    def _register(op_name: str, model: type[BaseModel] | None) -> OpFactory:
        sig = make_signature(
            op_name,
            category=category,
            apply=apply,
            output=output,
            params=model,
            inputs=inputs,
            variadic=variadic,
            min_inputs=min_inputs,
            doc=doc,
            resources=resources,
            check_params=check_params,
            infer_output=infer_output,
        )
        register_signature(dataclasses.replace(sig, origin=origin), replace=replace)
        return OpFactory(op_name)

    if name is not None:
        return _register(name, params)

    def decorator(cls: type[BaseModel]) -> OpFactory:
        return _register(cls.__name__, cls)

    return decorator
