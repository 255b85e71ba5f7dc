"""Human- and machine-readable descriptions of operators (``plangraph ops``)."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from plangraph.ops.algorithms import algorithms
from plangraph.ops.models import ModelSettings, model_types
from plangraph.ops.policies import AlgorithmConfig
from plangraph.ops.registry import OpSignature, ResourceKind

__all__ = [
    "catalog_text",
    "describe_op",
    "describe_params",
    "describe_policy",
    "find_policy",
    "op_text",
    "plain_text",
    "policy_configs",
    "policy_text",
    "summary",
]

_ROLE = re.compile(r":[\w:.-]+:`([^`]+)`")  # :class:`Foo` -> `Foo`
_LITERAL = re.compile(r"``(.+?)``")  # ``x`` -> `x`
_STRONG = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")  # **x** -> x
_EMPHASIS = re.compile(r"(?<![\w*`])\*(\S(?:[^*]*?\S)?)\*(?![\w*])")  # *x* -> x
_ABBREVIATIONS = (
    "e.g.",
    "i.e.",
    "etc.",
    "cf.",
    "vs.",
    "approx.",
    "resp.",
    "eq.",
    "Eq.",
    "et al.",
    "sec.",
    "Sec.",
    "fig.",
    "Fig.",
)


def plain_text(rst: str) -> str:
    """reStructuredText inline markup as plain text for a terminal: ``x`` and roles
    become `x` (code stays marked), **strong** and *emphasis* lose their stars."""
    text = _ROLE.sub(r"`\1`", rst)
    text = _LITERAL.sub(r"`\1`", text)
    text = _STRONG.sub(r"\1", text)
    return _EMPHASIS.sub(r"\1", text)


def summary(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, as plain text on one line
    (the whole paragraph when it has no sentence end)."""
    para = " ".join(doc.strip().split("\n\n", 1)[0].split())
    para = plain_text(para)
    for m in re.finditer(r"[.!?](?=\s|$)", para):
        head = para[: m.end()]
        if not head.endswith(_ABBREVIATIONS):
            return head
    return para


def _type_text(ann: Any) -> str:
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        return _type_text(args[0])
    if origin is typing.Literal:
        return "|".join(repr(a) if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(a) for a in args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"list[{_type_text(args[0])}]"
        return f"[{', '.join(_type_text(a) for a in args)}]"
    if origin is list:
        return f"list[{_type_text(args[0])}]"
    if origin is dict:
        return f"dict[{_type_text(args[0])}, {_type_text(args[1])}]"
    if ann is type(None):
        return "null"
    if ann is AlgorithmConfig:
        return 'policy {"algo": ...}'
    if ann is ModelSettings:
        return 'model {"type": ...}'
    if isinstance(ann, type):
        return {"str": "string", "bool": "bool", "int": "int", "float": "number"}.get(
            ann.__name__, ann.__name__
        )
    return str(ann)


def _constraints(metadata: list[Any]) -> list[str]:
    out: list[str] = []
    for m in metadata:
        if isinstance(m, at.Ge):
            out.append(f">= {m.ge}")
        elif isinstance(m, at.Gt):
            out.append(f"> {m.gt}")
        elif isinstance(m, at.Le):
            out.append(f"<= {m.le}")
        elif isinstance(m, at.Lt):
            out.append(f"< {m.lt}")
        elif hasattr(m, "pattern") and m.pattern:
            out.append(f"matches {m.pattern}")
    return out


def describe_params(model: type[BaseModel]) -> list[dict[str, Any]]:
    """One dict per field: ``name``, ``type``, ``required``, ``default``, ``constraints``,
    ``description`` (units included)."""
    rows = []
    for name, f in model.model_fields.items():
        required = f.default is PydanticUndefined and f.default_factory is None
        default = None if required else f.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            default = default.model_dump(mode="json")
        rows.append(
            {
                "name": name,
                "type": _type_text(f.annotation),
                "required": required,
                "default": list(default) if isinstance(default, tuple) else default,
                "constraints": _constraints(list(f.metadata)),
                "description": f.description or "",
            }
        )
    return rows


_WHERE = {
    "driver": "driver",
    "actors": "workers",
    "aggregators": "aggregators",
    "shard": "per-shard",
}
"""An op's ``placement`` as the catalog shows it: ``per-shard`` runs inside each rollout
worker on its own ``Shard[...]`` stream (until ``GatherShards``)."""

_WHERE_LONG = {
    "driver": "in the driver",
    "actors": "on the rollout workers (actors)",
    "aggregators": "on aggregation actors of its own",
    "shard": "per-shard: inside each rollout worker, on its own Shard[...] stream",
}


def outputs_by_param(sig: OpSignature) -> tuple[str, dict[str, str]] | None:
    """``(param, {value: output type})`` when the output type depends on the value of a
    ``Literal`` param (``ParallelRollouts``' ``mode``: ``raw`` gives ``Shard[SampleBatch]``),
    found by asking the op's ``infer_output`` with each value (the other params at their
    defaults, the inputs at their declared types); None when it depends on none."""
    if sig.infer_output is None:
        return None
    ins = list(sig.inputs) or ([sig.variadic] * max(sig.min_inputs, 1) if sig.variadic else [])
    for name, f in sig.params_model.model_fields.items():
        if typing.get_origin(f.annotation) is not typing.Literal:
            continue
        outs: dict[str, str] = {}
        for value in typing.get_args(f.annotation):
            try:
                params = sig.params_model.model_construct(**{name: value})
                outs[str(value)] = str(sig.infer_output(ins, params))
            except Exception:  # a rule that needs params left unset: no variants to show
                return None
        if len(set(outs.values())) > 1:
            return name, outs
    return None


def type_text(sig: OpSignature) -> str:
    """:meth:`OpSignature.type_text`, plus the outputs that a param's value changes:
    ``() -> SampleBatch; mode="raw": Shard[SampleBatch]``."""
    text = sig.type_text()
    found = outputs_by_param(sig)
    if found is None:
        return text
    name, outs = found
    other = [f'{name}="{v}": {t}' for v, t in outs.items() if t != str(sig.output)]
    return f"{text}; {', '.join(other)}"


def describe_op(sig: OpSignature) -> dict[str, Any]:
    """The signature as JSON data (``outputs``: the output type by a param's value, when
    it depends on one; ``placement``: where its work runs, ``"shard"`` for a per-shard
    op; ``learns``: the worker set's policy learns from its items)."""
    found = outputs_by_param(sig)
    return {
        "name": sig.name,
        "category": sig.category,
        "apply": sig.apply,
        "type": type_text(sig),
        "inputs": sig.arity_text(),
        "output": str(sig.output),
        "outputs": {found[0]: found[1]} if found else {},
        "placement": sig.placement,
        "learns": sig.learns,
        "summary": summary(sig.doc),
        "doc": sig.doc,
        "builtin": sig.builtin,
        "resources": [
            {"param": r.param, "kind": r.kinds_text(), "access": r.access} for r in sig.resources
        ],
        "params": describe_params(sig.params_model),
    }


_APPLY_USE = {
    "source": "{name}(...)",
    "for_each": "stream.for_each({name}(...))",
    "combine": "stream.combine({name}(...))",
    "filter": "stream.filter({name}(...))",
    "stream": "{name}(stream, ...)",
}


def op_text(sig: OpSignature) -> str:
    """A page of text about one operator: type, usage, doc, params table."""
    d = describe_op(sig)
    lines = [
        f"{sig.name}  [{sig.category}]  {type_text(sig)}",
        f"  python: {_APPLY_USE[sig.apply].format(name=sig.name)}",
        f"  runs: {_WHERE_LONG.get(sig.placement, sig.placement)}",
    ]
    found = outputs_by_param(sig)
    if found is not None:
        name, outs = found
        lines.append(f"  output by {name}: " + "; ".join(f"{v}: {t}" for v, t in outs.items()))
    lines.append("")
    lines += ["  " + x if x else "" for x in plain_text(sig.doc).splitlines()]
    lines.append("")
    lines += _param_lines(d["params"])
    for r in d["resources"]:
        lines.append(f"  resource: {r['param']} -> {r['kind']} ({r['access']})")
    lines.append("  set from the command line: --set nodes.ID.PARAM=VALUE (or ID.PARAM)")
    return "\n".join(lines) + "\n"


def describe_resource_kind(kind: ResourceKind) -> dict[str, Any]:
    """A resource kind (``WorkerSet``, ``ReplayBuffer``, ``LearnerThread``) as JSON data."""
    return {
        "name": kind.name,
        "kind": "resource",
        "summary": summary(inspect.cleandoc(kind.doc)),
        "doc": inspect.cleandoc(kind.doc),
        "params": describe_params(kind.params_model),
    }


def resource_kind_text(kind: ResourceKind) -> str:
    """A page of text about one resource kind: doc, params table, where a param that
    holds a policy config is documented, and the ``--set`` path of its params."""
    d = describe_resource_kind(kind)
    lines = [f'{kind.name}  [resource, declared once and referenced as "@id"]', ""]
    lines += ["  " + x if x else "" for x in plain_text(d["doc"]).splitlines()]
    lines += ["", *_param_lines(d["params"])]
    for name, f in kind.params_model.model_fields.items():
        algos = list(policy_configs()) if _holds_policy(f.annotation) else []
        if algos:
            lines.append(
                f'  {name}: one of the policies, by its "algo" ({", ".join(algos)}); '
                f"`plangraph ops {algos[0]}` lists a policy's params"
            )
    example = ", e.g. --set workers.num_envs_per_worker=4" if kind.name == "WorkerSet" else ""
    lines.append(
        f"  set from the command line: --set resources.ID.PARAM=VALUE (or ID.PARAM){example}"
    )
    return "\n".join(lines) + "\n"


def _holds_policy(annotation: Any) -> bool:
    """Whether a param's annotation holds a policy config (alone, optional or in a dict)."""
    if annotation is AlgorithmConfig:
        return True
    return any(_holds_policy(a) for a in typing.get_args(annotation))


def policy_configs() -> dict[str, type[AlgorithmConfig]]:
    """Policy config model by ``algo``: every registered algorithm
    (``plangraph.ops.algorithms``), built-in or a user's."""
    return {name: spec.config for name, spec in algorithms().items()}


def find_policy(name: str) -> str | None:
    """The ``algo`` that ``name`` names (``ppo``, ``PPO``, ``PPOConfig``), or None."""
    key = name.lower().removesuffix("config")
    return key if key in policy_configs() else None


def describe_policy(algo: str) -> dict[str, Any]:
    """A policy config (the ``policy`` of a ``WorkerSet``) as JSON data."""
    model = policy_configs()[algo]
    doc = inspect.cleandoc(model.__doc__ or "")
    spec = algorithms()[algo]
    return {
        "name": algo,
        "kind": "policy",
        "config": model.__name__,
        "builtin": spec.builtin,
        "summary": summary(doc),
        "doc": doc,
        "capabilities": sorted(model.capabilities),
        "action_spaces": sorted(model.action_spaces),
        "needs_bounded_actions": model.needs_bounded_actions,
        "observation_spaces": sorted(model.observation_spaces),
        "model_types": None if model.model_types is None else sorted(model.model_types),
        "learns_from": model.learns_from,
        "params": describe_params(model),
    }


def describe_model_type(name: str) -> dict[str, Any]:
    """A registered model type (a policy's ``model``) as JSON data."""
    spec = model_types()[name]
    doc = inspect.cleandoc(spec.config.__doc__ or "")
    return {
        "name": name,
        "kind": "model",
        "config": spec.config.__name__,
        "builtin": spec.builtin,
        "summary": summary(doc),
        "doc": doc,
        "params": describe_params(spec.config),
    }


def model_type_text(name: str) -> str:
    """A page of text about one model type: doc, settings, how a plan names it."""
    d = describe_model_type(name)
    lines = [f'{name}  [model {d["config"]}: a policy\'s "model" with "type": "{name}"]', ""]
    lines += ["  " + x if x else "" for x in plain_text(d["doc"]).splitlines()]
    lines += ["", *_param_lines(d["params"])]
    return "\n".join(lines) + "\n"


def policy_text(algo: str) -> str:
    """A page of text about one policy config: doc, params table, how to set them."""
    d = describe_policy(algo)
    lines = [
        f'{algo}  [policy {d["config"]}: a WorkerSet\'s "policy" with "algo": "{algo}"]',
        "",
    ]
    lines += ["  " + x if x else "" for x in plain_text(d["doc"]).splitlines()]
    bounded = " with finite bounds" if d["needs_bounded_actions"] else ""
    models = "any registered type" if d["model_types"] is None else ", ".join(d["model_types"])
    lines += [
        "",
        f"  can: {', '.join(d['capabilities']) or 'nothing beyond training'}",
        f"  acts in: {', '.join(d['action_spaces'])} action spaces{bounded}; reads "
        f"{', '.join(d['observation_spaces'])} observations; models: {models}",
        f"  learns from: {d['learns_from']}",
    ]
    lines += ["", *_param_lines(d["params"])]
    lines.append(
        "  set from the command line: --set resources.ID.policy.PARAM=VALUE (or "
        "ID.policy.PARAM), e.g. --set workers.policy.gamma=0.98"
    )
    return "\n".join(lines) + "\n"


def _param_lines(params: list[dict[str, Any]]) -> list[str]:
    """The params table of ``op_text``/``resource_kind_text``: type, default, constraints,
    then the description (units) on the next line."""
    if not params:
        return ["  params: none"]
    lines = ["  params:"]
    for p in params:
        default = "required" if p["required"] else f"default {_json(p['default'])}"
        cons = f", {', '.join(p['constraints'])}" if p["constraints"] else ""
        lines.append(f"    {p['name']}: {p['type']} ({default}{cons})")
        if p["description"]:
            lines.append(f"        {plain_text(p['description'])}")
    return lines


def _json(v: Any) -> str:
    import json

    return json.dumps(v)


def catalog_text(sigs: dict[str, OpSignature]) -> str:
    """Two lines per operator: name, category, where it runs (driver, workers,
    aggregators, per-shard), type (with the outputs a param's value changes), the doc's
    first sentence (plain text); then its params with defaults (``plangraph ops NAME``
    has ranges and units)."""
    types = {n: type_text(s) for n, s in sigs.items()}
    wheres = {n: _WHERE.get(s.placement, s.placement) for n, s in sigs.items()}
    wn = max(len(n) for n in sigs)
    wc = max(len(s.category) for s in sigs.values())
    ww = max(len(w) for w in wheres.values())
    wt = max(len(t) for t in types.values())
    lines = []
    for name, s in sigs.items():
        first = summary(s.doc)
        lines.append(
            f"{name:<{wn}}  {s.category:<{wc}}  {wheres[name]:<{ww}}  {types[name]:<{wt}}  {first}"
        )
        params = [
            f"{p['name']}=" + ("<required>" if p["required"] else _json(p["default"]))
            for p in describe_params(s.params_model)
        ]
        lines.append(f"{'':<{wn}}  params: {', '.join(params) or 'none'}")
    from plangraph.ops.registry import all_resource_kinds

    lines += [
        "",
        f"resource kinds: {', '.join(all_resource_kinds())} (plangraph ops KIND)",
        f"policies (a WorkerSet's policy.algo): {', '.join(policy_configs())} (plangraph ops ALGO)",
        f"model types (a policy's model.type): {', '.join(model_types())} (plangraph ops TYPE)",
    ]
    return "\n".join(lines) + "\n"
