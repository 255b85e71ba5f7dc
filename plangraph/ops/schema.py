"""JSON Schema of the plan format, generated from the IR and the built-in catalog.

Nodes are a union discriminated on ``op`` (one branch per built-in operator, with that
operator's ``Params`` schema); resources a union discriminated on ``kind``. Wherever a
param value may be written, a ``"${...}"`` config reference is accepted too. User
operators (``register_op``) are not part of the committed schema: the compiler, not the
schema, is the authority on plans that use them.

The committed copy is ``plangraph/ops/plan.schema.json``; ``plangraph schema --check``
fails when it drifts from :func:`plan_schema`.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from plangraph.ir.plan import dump_json
from plangraph.ops.algorithms import builtin_algorithms
from plangraph.ops.models import ModelSettings, builtin_model_types
from plangraph.ops.policies import AlgorithmConfig
from plangraph.ops.registry import all_ops, all_resource_kinds

__all__ = ["SCHEMA_PATH", "SCHEMA_REF_FROM_PLANS", "plan_schema", "schema_text"]

SCHEMA_PATH = Path(__file__).with_name("plan.schema.json")
SCHEMA_REF_FROM_PLANS = "../plangraph/ops/plan.schema.json"
"""The ``"$schema"`` value the JSON files in ``plans/`` use (relative to ``plans/``)."""

_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.\-]*$"
_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
_CONFIG_REF = {
    "type": "string",
    "pattern": r"^\$\{.+\}$",
    "description": 'A config reference: "${key}" or an expression such as '
    '"${ceil(train_batch_size / microbatch_size)}".',
}


def _forbid() -> ConfigDict:
    return ConfigDict(defer_build=True, extra="forbid")


def plan_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a plan file, as a dict."""
    node_models = []
    for name, sig in all_ops().items():
        if not sig.builtin:
            continue
        max_items = None if sig.variadic is not None else len(sig.inputs)
        node_models.append(
            create_model(
                f"{name}Node",
                __config__=_forbid(),
                __doc__=f"A {name} node: {sig.type_text()}.",
                op=(_literal(name), Field(description=sig.doc.splitlines()[0])),
                inputs=(
                    list[str],
                    Field(
                        [],
                        min_length=sig.min_inputs,
                        max_length=max_items,
                        description=f"Upstream node ids ({sig.arity_text()}).",
                    ),
                ),
                params=(sig.params_model, Field({}, description="Operator parameters.")),
            )
        )
    res_models = []
    for name, kind in all_resource_kinds().items():
        res_models.append(
            create_model(
                f"{name}Resource",
                __config__=_forbid(),
                __doc__=kind.doc.splitlines()[0] if kind.doc else name,
                kind=(_literal(name), ...),
                params=(kind.params_model, Field(description=f"{name} parameters.")),
            )
        )
    AnyNode: Any = Annotated[_union(node_models), Field(discriminator="op")]
    AnyResource: Any = Annotated[_union(res_models), Field(discriminator="kind")]
    plan_model = create_model(
        "PlanFile",
        __config__=ConfigDict(defer_build=True, extra="forbid", title="plangraph plan"),
        __doc__="A plangraph execution plan (see docs/CONTRACTS.md).",
        schema_=(
            str,
            Field(None, alias="$schema", description="Path or URL of this schema (editors)."),
        ),
        name=(str, Field(min_length=1, description="Plan name.")),
        description=(str, Field("", description="What the plan does.")),
        config=(
            dict[str, Any],
            Field({}, description='Defaults for "${key}" references; overridable.'),
        ),
        resources=(
            dict[str, AnyResource],
            Field({}, description='Resources by id, referenced as "@id".'),
        ),
        nodes=(
            dict[str, AnyNode],
            Field(description="Operator nodes by id."),
        ),
        output=(str, Field(description="Id of the node whose items are the results.")),
    )
    schema = plan_model.model_json_schema(by_alias=True)
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    for settings in _registered_settings():  # what the open policy and model types name
        sub = settings.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        defs.update(sub.pop("$defs", {}))
        defs[settings.__name__] = sub
    defs["ConfigRef"] = _CONFIG_REF
    param_defs = {m.__name__ for m in _param_models()}
    for name, d in defs.items():
        if name in param_defs:
            _allow_refs(d)
    _write_settings_refs(schema)
    props = schema["properties"]
    props["config"]["propertyNames"] = {"pattern": _KEY_PATTERN}
    props["nodes"]["propertyNames"] = {"pattern": _ID_PATTERN}
    props["resources"]["propertyNames"] = {"pattern": _ID_PATTERN}
    props["$schema"].pop("default", None)
    props["$schema"]["type"] = "string"
    props["$schema"].pop("anyOf", None)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def _literal(name: str) -> Any:
    """``Literal[name]`` for a name known only at run time (an operator's, a kind's)."""
    return Literal[name]


def _union(models: list[type[BaseModel]]) -> Any:
    u: Any = models[0]
    for m in models[1:]:
        u = u | m
    return u


def _param_models() -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []

    def walk(m: type[BaseModel]) -> None:
        if m in seen:
            return
        seen.append(m)
        for f in m.model_fields.values():
            for sub in _models_in(f.annotation):
                walk(sub)

    for sig in all_ops().values():
        if sig.builtin:
            walk(sig.params_model)
    for kind in all_resource_kinds().values():
        walk(kind.params_model)
    return seen


def _registered_settings() -> list[type[BaseModel]]:
    """The built-in algorithms' and model types' settings models."""
    return [s.config for s in builtin_algorithms()] + [s.config for s in builtin_model_types()]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if annotation is AlgorithmConfig:
        return [s.config for s in builtin_algorithms()]
    if annotation is ModelSettings:
        return [s.config for s in builtin_model_types()]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for a in typing.get_args(annotation):
        out += _models_in(a)
    return out


def _write_settings_refs(node: Any) -> None:
    """Replace each placeholder of the open policy and model types (``plangraph.ops.
    algorithms``) by a discriminated ``oneOf`` of references to the settings models."""
    if isinstance(node, list):
        for item in node:
            _write_settings_refs(item)
    if not isinstance(node, dict):
        return
    spec = node.pop("x-plangraph-settings", None)
    if spec is not None:
        mapping = {tag: f"#/$defs/{name}" for tag, name in spec["mapping"].items()}
        node["oneOf"] = [{"$ref": ref} for ref in mapping.values()]
        node["discriminator"] = {"propertyName": spec["tag"], "mapping": mapping}
    for value in node.values():
        _write_settings_refs(value)


def _ref_ok(prop: dict[str, Any]) -> dict[str, Any]:
    if prop.get("$ref") == "#/$defs/ConfigRef" or "discriminator" in prop:
        return prop
    meta: dict[str, Any] = {
        k: prop.pop(k) for k in ("title", "description", "default") if k in prop
    }
    _items_ref_ok(prop)
    if "anyOf" in prop:
        for alt in prop["anyOf"]:
            _items_ref_ok(alt)
        prop["anyOf"].append({"$ref": "#/$defs/ConfigRef"})
        return {**prop, **meta}
    return {"anyOf": [prop, {"$ref": "#/$defs/ConfigRef"}], **meta}


def _items_ref_ok(prop: dict[str, Any]) -> None:
    """References inside arrays too: list items and tuple elements (``prefixItems``), e.g.
    ``lr_schedule: [[0, "${lr}"], ["${lr_anneal_steps}", 0.0]]``."""
    if isinstance(prop.get("items"), dict):
        prop["items"] = _ref_ok(prop["items"])
    if isinstance(prop.get("prefixItems"), list):
        prop["prefixItems"] = [_ref_ok(p) for p in prop["prefixItems"]]


def _allow_refs(model_schema: dict[str, Any]) -> None:
    for key, prop in list(model_schema.get("properties", {}).items()):
        model_schema["properties"][key] = _ref_ok(prop)


def schema_text() -> str:
    """:func:`plan_schema` as deterministic JSON text (with a trailing newline)."""
    return dump_json(plan_schema()) + "\n"


def committed_schema() -> dict[str, Any]:
    """The committed ``plan.schema.json``. Raises ``OSError`` if it is missing."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
