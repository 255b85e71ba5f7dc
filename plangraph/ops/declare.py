"""Declaring an operator: :func:`register_op`, for built-ins and user operators alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from plangraph.ir.types import PortType
from plangraph.ops.builder import OpFactory, _caller_location
from plangraph.ops.registry import make_signature, register_signature

__all__ = ["register_op"]


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
    resources: Mapping[str, tuple[str | tuple[str, ...], str]] | None = None,
    check_params: Callable[[Any, int], list[tuple[str, str]]] | None = None,
    infer_output: Callable[[Sequence[PortType], Any], PortType] | None = None,
    replace: bool = False,
    builtin: bool = False,
    placement: str = "driver",
    pure: bool = False,
    rowwise: bool = False,
    learns: bool = False,
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
    ``"list[T]"``); ``resources`` maps a param to ``(kind, "read"|"write")``;
    ``placement`` says where the op's work runs (``"driver"``, ``"actors"`` for work done
    on the rollout workers, or ``"aggregators"`` for work done on aggregation actors of the
    op's own, as ``AggregateBatches``; shown by ``explain`` and the diagram; ``"shard"`` for
    a per-shard op: ``inputs=["Shard[A]"]``, ``output="Shard[B]"``, its ``register_impl``
    factory returning ``fn(worker, item) -> item`` that runs inside each rollout worker on
    ``ParallelRollouts(mode="raw")``'s shards, until ``GatherShards``; the contract is in
    docs/extending.md). ``pure=True`` (a
    ``for_each`` op only) promises that the op is a function of its input item alone: no
    counters, resources or state kept between items, deterministic, never ``NOT_READY``,
    and a batch keeps its rows (same count and order; columns may change). The compiler may
    then run it on the rollout workers when it reads a rollout source directly (pass
    ``worker-side-maps``; its implementation is pickled and sent to the actors).
    ``rowwise=True`` adds that each output row depends on the same input row only
    (``f(concat(a, b)) == concat(f(a), f(b))``, e.g. clipping rewards, but not
    standardising a column), which a bulk-sync source needs: it concatenates the workers'
    fragments (bit for bit only where a row's arithmetic does not depend on the number of
    rows: elementwise numpy does not; a BLAS matrix product may round otherwise).
    ``learns=True`` says the worker set's policy learns from the op's items (an optimizer
    step or the gradients for one, in the driver, or per shard on each rollout worker):
    ``explain`` shows from it where the plan's learners run, and fed experience batches,
    the op is checked as a trainer (replayed or fresh batches for its policy: PG171,
    PG172). Raises
    ``RegistrationError`` (a ``ValueError``) if the name is taken (unless ``replace``) or
    the signature is inconsistent (e.g. a for_each op without exactly one input).

    plangraph's own operators (``plangraph/ops/builtin/``) are declared the same way with
    ``builtin=True``: they cannot be replaced or removed, and ``plangraph.runtime`` finds
    their implementation in the runtime module of their category
    (``plangraph/runtime/ops/<category>.py``).
    """

    loc = None if builtin else _caller_location()
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
            builtin=builtin,
            placement=placement,
            pure=pure,
            rowwise=rowwise,
            learns=learns,
        )
        register_signature(dataclasses.replace(sig, origin=origin), replace=replace)
        return OpFactory(op_name)

    if name is not None:
        return _register(name, params)

    def decorator(cls: type[BaseModel]) -> OpFactory:
        return _register(cls.__name__, cls)

    return decorator
