"""The plan IR: pydantic models, port types, references, JSON with source positions.

Imports only pydantic and the standard library (no ray, no torch).
"""

from __future__ import annotations

from plangraph.ir.plan import Node, Plan, Resource, canonical_json_value, dump_json
from plangraph.ir.refs import (
    ConfigExpr,
    ConfigRef,
    ConfigRefError,
    PlanConfig,
    iter_config_refs,
    parse_config_ref,
    resource_ref_id,
)
from plangraph.ir.source import JSONSyntaxError, Location, SourceMap, parse_json_with_positions
from plangraph.ir.types import (
    ANY,
    GRAD_INFO,
    RESULT,
    SAMPLE_BATCH,
    TRAIN_INFO,
    PortType,
    is_assignable,
    join,
    list_of,
    parse_type,
    substitute,
    typevar,
    unify,
)

__all__ = [
    "ANY",
    "GRAD_INFO",
    "RESULT",
    "SAMPLE_BATCH",
    "TRAIN_INFO",
    "ConfigExpr",
    "ConfigRef",
    "ConfigRefError",
    "JSONSyntaxError",
    "Location",
    "Node",
    "Plan",
    "PlanConfig",
    "PortType",
    "Resource",
    "SourceMap",
    "canonical_json_value",
    "dump_json",
    "is_assignable",
    "iter_config_refs",
    "join",
    "list_of",
    "parse_config_ref",
    "parse_json_with_positions",
    "parse_type",
    "resource_ref_id",
    "substitute",
    "typevar",
    "unify",
]
