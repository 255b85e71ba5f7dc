"""The plan IR: ``Plan``, ``Node`` and ``Resource`` (pydantic, frozen), and their JSON form.

A plan is data: operator nodes keyed by id, each naming its ``op``, its ``inputs`` (ids of
upstream nodes, in port order) and its ``params``; resources (worker set, replay buffers)
declared once and referenced from params as ``"@id"``; config defaults referenced as
``"${key}"``; and the id of the ``output`` node the driver pulls results from.

Values inside ``params`` and ``config`` are JSON values, stored canonically (sequences as
tuples, mappings as dicts with string keys) so that ``Plan.from_json(plan.to_json()) ==
plan`` always holds: ints stay ints, floats stay floats, tuples survive.

The IR checks only shape (types, keys, id syntax). Whether ops exist, inputs resolve,
types line up and params are in range is the compiler's job, so that it can report every
problem at once.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from plangraph.ir.limits import HINTS, MAX_DEPTH
from plangraph.ir.refs import CONFIG_KEY_RE, ID_RE, ConfigExpr
from plangraph.ir.source import Location, SourceMap, parse_json_with_positions
from plangraph.text import brief

__all__ = ["BuilderOutput", "Node", "Plan", "Resource", "canonical_json_value", "dump_json"]

SCHEMA_KEY = "$schema"


def canonical_json_value(value: Any, where: str = "value", *, _depth: int = 1) -> Any:
    """``value`` as a canonical JSON value: sequences -> tuples, mappings -> dicts.

    :class:`~plangraph.ir.refs.ConfigExpr` becomes its ``"${...}"`` string. Raises
    ``ValueError`` for anything JSON cannot hold (sets, objects, NaN, non-string keys) and
    for a value nested deeper than ``MAX_DEPTH`` levels (a plan's bound; it also keeps
    this recursion far from Python's limit, whatever a Python caller passes).
    """
    if _depth > MAX_DEPTH:
        raise ValueError(
            f"{brief(where)}: value nested more than {MAX_DEPTH} levels deep; {HINTS['depth']}"
        )
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: {value!r} is not a JSON number")
        return value
    if isinstance(value, ConfigExpr):
        return value.ref
    if isinstance(value, list | tuple):
        return tuple(
            canonical_json_value(v, f"{where}[{i}]", _depth=_depth + 1) for i, v in enumerate(value)
        )
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where}: key {k!r} is not a string")
            out[k] = canonical_json_value(v, f"{where}.{k}", _depth=_depth + 1)
        return out
    raise ValueError(f"{where}: {value!r} ({type(value).__name__}) is not a JSON value")


def _to_plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_to_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _to_plain(v) for k, v in value.items()}
    return value


class _IRModel(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    def __eq__(self, other: object) -> bool:
        # Field values only: private metadata (source locations) never affects equality.
        if not isinstance(other, BaseModel):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # params are dicts


class Node(_IRModel):
    """One operator application: ``op`` on the streams of ``inputs`` with ``params``."""

    op: str = Field(min_length=1, description="Operator name from the catalog (`plangraph ops`).")
    inputs: tuple[str, ...] = Field(
        (), description="Ids of the upstream nodes, in input-port order."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description='Operator parameters; "${key}" reads config, "@id" names a resource.',
    )

    @field_validator("params", mode="before")
    @classmethod
    def _canonical_params(cls, v: Any) -> Any:
        return canonical_json_value(v, "params") if isinstance(v, Mapping) else v

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "inputs": list(self.inputs),
            "params": {k: _to_plain(self.params[k]) for k in sorted(self.params)},
        }


class Resource(_IRModel):
    """Shared state declared once (``WorkerSet``, ``ReplayBuffer``, ...) and referenced as
    ``"@id"`` from operator params. Resources are not edges."""

    kind: str = Field(min_length=1, description="Resource kind, e.g. WorkerSet or ReplayBuffer.")
    params: dict[str, Any] = Field(default_factory=dict, description="Kind-specific params.")

    @field_validator("params", mode="before")
    @classmethod
    def _canonical_params(cls, v: Any) -> Any:
        return canonical_json_value(v, "params") if isinstance(v, Mapping) else v

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "params": {k: _to_plain(self.params[k]) for k in sorted(self.params)},
        }


class BuilderOutput(Protocol):
    """What :meth:`Plan.from_builder` needs from a Python builder stream."""

    def __plangraph_nodes__(self) -> tuple[dict[str, Node], dict[str, Any], str]:
        """``(nodes in creation order, {node_id: Location}, output node id)``."""
        ...


class Plan(_IRModel):
    """An execution plan: a DAG of operator nodes with config defaults and resources."""

    name: str = Field(min_length=1, description="Plan name.")
    description: str = Field("", description="What the plan does (free text).")
    config: dict[str, Any] = Field(
        default_factory=dict,
        description='Default values for "${key}" references; overridable at compile time.',
    )
    resources: dict[str, Resource] = Field(
        default_factory=dict, description='Resources by id, referenced as "@id".'
    )
    nodes: dict[str, Node] = Field(description="Operator nodes by id (declaration order kept).")
    output: str = Field(description="Id of the node whose items are the plan's results.")

    _source: SourceMap | None = PrivateAttr(default=None)

    @field_validator("config", mode="before")
    @classmethod
    def _canonical_config(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            for k in v:
                if not isinstance(k, str) or not CONFIG_KEY_RE.fullmatch(k):
                    raise ValueError(f"config key {k!r} must be an identifier")
            return canonical_json_value(v, "config")
        return v

    @field_validator("nodes", "resources")
    @classmethod
    def _ids(cls, v: dict[str, Any]) -> dict[str, Any]:
        for k in v:
            if not ID_RE.fullmatch(k):
                raise ValueError(
                    f"id {k!r} must start with a letter or '_' and use only letters, "
                    "digits, '_', '-' and '.'"
                )
        return v

    # -- source locations (metadata) ----------------------------------------------------

    @property
    def source(self) -> SourceMap | None:
        """Where the plan was written (JSON positions or builder call sites), if known."""
        return self._source

    def with_source(self, source: SourceMap | None) -> Plan:
        """This plan with ``source`` attached (a copy; equality is unaffected)."""
        p = self.model_copy()
        p._source = source
        return p

    # -- JSON -----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON form as plain dicts/lists (key order as written by :meth:`to_json`)."""
        return {
            "name": self.name,
            "description": self.description,
            "config": {k: _to_plain(self.config[k]) for k in sorted(self.config)},
            "resources": {k: r.to_dict() for k, r in self.resources.items()},
            "nodes": {k: n.to_dict() for k, n in self.nodes.items()},
            "output": self.output,
        }

    def to_json(self, *, schema_ref: str | None = None) -> str:
        """Deterministic JSON text (2-space indent, short lists inline, trailing newline).

        ``schema_ref`` adds a leading ``"$schema"`` key (for editors); it is not part of
        the plan and is dropped again by :meth:`from_json`.
        """
        data = self.to_dict()
        if schema_ref is not None:
            data = {SCHEMA_KEY: schema_ref, **data}
        return dump_json(data) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        """Validate the JSON form (``"$schema"`` ignored). Raises pydantic ValidationError."""
        return cls.model_validate({k: v for k, v in data.items() if k != SCHEMA_KEY})

    @classmethod
    def from_json(cls, text: str, *, file: str | None = None) -> Plan:
        """Parse and validate JSON text; positions are kept as :attr:`source`.

        Raises :class:`~plangraph.ir.source.JSONSyntaxError` or pydantic ValidationError;
        use :func:`plangraph.compiler.analyze` for located diagnostics instead.
        """
        data, smap = parse_json_with_positions(text, file)
        if not isinstance(data, dict):
            raise ValueError("a plan is a JSON object")
        return cls.from_dict(data).with_source(smap)

    @classmethod
    def from_builder(
        cls,
        output: BuilderOutput,
        *,
        name: str,
        description: str = "",
        config: Mapping[str, Any] | None = None,
        resources: Mapping[str, Resource] | None = None,
    ) -> Plan:
        """A plan from Python builder streams (``plangraph.ops``), ending at ``output``.

        Nodes are every node ``output`` depends on, in creation order; each keeps the
        file:line of the builder call that made it (:attr:`source`).
        """
        if not hasattr(output, "__plangraph_nodes__"):
            raise TypeError(
                "Plan.from_builder needs the stream of the output node, e.g. "
                f"StandardMetricsReporting(train), not {output!r}"
            )
        nodes, locations, out_id = output.__plangraph_nodes__()
        plan = cls(
            name=name,
            description=description,
            config=dict(config or {}),
            resources=dict(resources or {}),
            nodes=nodes,
            output=out_id,
        )
        smap = SourceMap(file=None)
        # One variable, so this frame does not end up referring to itself. currentframe()
        # is None where the interpreter keeps no frames: the plan then has no location.
        caller = inspect.currentframe()
        caller = caller.f_back if caller is not None else None
        if caller is not None:
            smap.values[""] = Location(_display(caller.f_code.co_filename), caller.f_lineno)
        for node_id, loc in locations.items():
            smap.values[f"/nodes/{node_id}"] = loc
        plan._source = smap
        return plan


def _display(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def dump_json(value: Any, indent: int = 0) -> str:
    """Pretty JSON: objects one key per line, lists of scalars on one line."""
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{inner}{json.dumps(k)}: {dump_json(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        if all(not isinstance(v, Mapping | list | tuple) for v in value):
            return "[" + ", ".join(dump_json(v) for v in value) + "]"
        items = [inner + dump_json(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
