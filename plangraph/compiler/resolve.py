"""Checks that resolve names and values: config refs, operators, params, resources."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from plangraph.compiler.context import Context, join_hints
from plangraph.compiler.overrides import apply_param_overrides, is_param_override
from plangraph.ir.refs import ConfigRefError, parse_config_ref, resource_ref_id
from plangraph.ops.describe import summary
from plangraph.ops.registry import all_ops, all_resource_kinds, close_matches
from plangraph.text import brief


def _resolve(
    value: Any, config: Mapping[str, Any], ptr: str, fail: Callable[[str, ConfigRefError], None]
) -> Any:
    if isinstance(value, str):
        try:
            ref = parse_config_ref(value)
            return value if ref is None else ref.evaluate(config)
        except ConfigRefError as exc:
            fail(ptr, exc)
            return value
    if isinstance(value, Mapping):
        return {k: _resolve(v, config, f"{ptr}/{k}", fail) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return tuple(_resolve(v, config, f"{ptr}/{i}", fail) for i, v in enumerate(value))
    return value


def _ref_failure(ctx: Context, node: str | None, failed: set[str]) -> Callable:
    def fail(ptr: str, exc: ConfigRefError) -> None:
        failed.add(ptr)
        if exc.unknown:
            keys = ", ".join(sorted(ctx.config)) or "(none)"
            ctx.report(
                "PG113",
                str(exc),
                node=node,
                pointer=ptr,
                hint=f'declare it under "config" (known keys: {keys})',
                suggestions=exc.suggestions,
            )
        else:
            ctx.report(
                "PG118",
                str(exc),
                node=node,
                pointer=ptr,
                hint="write ${key} or a small expression such as ${ceil(a / b)}",
            )

    return fail


def check_config(ctx: Context) -> None:
    """Merge config overrides into the defaults, apply ``--set`` paths into node and
    resource params (``plangraph.compiler.overrides``), then resolve ${...} in them."""
    ctx.config = dict(ctx.plan.config)
    for k, v in ctx.overrides.items():
        if is_param_override(k):
            continue
        if k not in ctx.config:
            hint = f"the plan declares: {', '.join(sorted(ctx.config)) or '(nothing)'}"
            if not ctx.config:
                # e.g. a run's saved plan.json: every value is explicit, none reads config.
                hint += "; set a node or resource param instead: --set nodes.ID.PARAM=VALUE "
                hint += "or --set resources.ID.PARAM=VALUE"
            ctx.report(
                "PG117",
                f"config override {brief(k)} does not match any key of the plan's config",
                pointer=f"/config/{k}",
                hint=hint,
                suggestions=close_matches(k, ctx.config),
            )
        ctx.config[k] = v
    nodes, resources, ctx.param_overrides = apply_param_overrides(ctx)
    ctx.written_params, ctx.res_written_params = nodes, resources
    for nid in ctx.plan.nodes:
        failed: set[str] = set()
        ctx.raw_params[nid] = _resolve(
            nodes[nid], ctx.config, f"/nodes/{nid}/params", _ref_failure(ctx, nid, failed)
        )
        ctx.failed_refs[nid] = failed
    for rid in ctx.plan.resources:
        failed = set()
        ctx.res_raw_params[rid] = _resolve(
            resources[rid], ctx.config, f"/resources/{rid}/params", _ref_failure(ctx, None, failed)
        )
        ctx.failed_refs[f"@{rid}"] = failed


def check_operators(ctx: Context) -> None:
    """Every node names a registered operator."""
    known = all_ops()
    for nid, node in ctx.plan.nodes.items():
        sig = known.get(node.op)
        ctx.sigs[nid] = sig
        if sig is None and node.op:
            ctx.report(
                "PG110",
                f"unknown operator {brief(node.op)}",
                node=nid,
                pointer=f"/nodes/{nid}/op",
                hint="`plangraph ops` lists the operators; a user operator must be "
                "registered with plangraph.ops.register_op before the plan is compiled: "
                "pass the module that registers it with --import (or import it in a "
                "Python plan)",
                suggestions=close_matches(node.op, known),
            )


def check_params(ctx: Context) -> None:
    """Validate each node's params against its operator's Params model."""
    for nid, node in ctx.plan.nodes.items():
        sig = ctx.sigs.get(nid)
        ctx.params[nid] = None
        if sig is None:
            continue
        raw = ctx.raw_params.get(nid, {})
        base = f"/nodes/{nid}/params"
        try:
            params = sig.params_model.model_validate(raw)
        except ValidationError as exc:
            ctx.report_validation(
                exc,
                model=sig.params_model,
                raw=raw,
                original=ctx.written_params.get(nid, node.params),
                base=base,
                node=nid,
                code="PG140",
                skip=ctx.failed_refs.get(nid, set()),
                what=sig.name,
            )
            continue
        if ctx.failed_refs.get(nid):
            continue
        if sig.check_params is not None:
            problems = sig.check_params(params, len(node.inputs))
            for field, msg in problems:
                ctx.report(
                    "PG140",
                    msg,
                    node=nid,
                    pointer=f"{base}/{field}",
                    hint=join_hints(
                        ctx.config_hint(
                            ctx.written_params.get(nid, node.params), [field], "a valid value"
                        ),
                        ctx.override_hint(f"{base}/{field}"),
                        _describe(sig.params_model, field),
                    ),
                )
            if problems:
                continue
        ctx.params[nid] = params


def _describe(model: Any, field: str) -> str | None:
    f = model.model_fields.get(field)
    return f"{field}: {summary(f.description)}" if f is not None and f.description else None


def check_resources(ctx: Context) -> None:
    """Resources have a known kind and valid params; "@id" refs name them with the right kind."""
    kinds = all_resource_kinds()
    for rid, res in ctx.plan.resources.items():
        ctx.res_params[rid] = None
        ctx.readers[rid] = []
        ctx.writers[rid] = []
        kind = kinds.get(res.kind)
        if kind is None:
            if res.kind:
                ctx.report(
                    "PG116",
                    f"unknown resource kind {brief(res.kind)} for resource {brief(rid)}",
                    pointer=f"/resources/{rid}/kind",
                    hint=f"known kinds: {', '.join(kinds)}",
                    suggestions=close_matches(res.kind, kinds),
                )
            continue
        raw = ctx.res_raw_params.get(rid, {})
        try:
            ctx.res_params[rid] = kind.params_model.model_validate(raw)
        except ValidationError as exc:
            ctx.report_validation(
                exc,
                model=kind.params_model,
                raw=raw,
                original=ctx.res_written_params.get(rid, res.params),
                base=f"/resources/{rid}/params",
                node=None,
                code="PG141",
                skip=ctx.failed_refs.get(f"@{rid}", set()),
                what=f"{res.kind} resource {brief(rid)}",
            )

    for nid in ctx.plan.nodes:
        sig = ctx.sigs.get(nid)
        if sig is None:
            continue
        raw = ctx.raw_params.get(nid, {})
        for rp in sig.resources:
            f = sig.params_model.model_fields[rp.param]
            explicit = rp.param in raw
            value = raw[rp.param] if explicit else f.default
            used = resource_ref_id(value)
            if used is None:
                continue  # missing or malformed: reported by check "params"
            ptr = f"/nodes/{nid}/params/{rp.param}" if explicit else f"/nodes/{nid}"
            declared = ctx.plan.resources.get(used)
            if declared is None:
                how = "" if explicit else f" (the default of param {brief(rp.param)})"
                ctx.report(
                    "PG112",
                    f"{sig.name} uses resource {brief(value)}{how}, but the plan declares no "
                    f"resource {brief(used)}",
                    node=nid,
                    pointer=ptr,
                    hint=f'declare it: "resources": {{"{used}": {{"kind": "{rp.kind}", '
                    '"params": {...}}}',
                    suggestions=tuple(
                        f"@{c}"
                        for c in close_matches(
                            used,
                            [r for r, x in ctx.plan.resources.items() if rp.accepts(x.kind)]
                            or list(ctx.plan.resources),
                        )
                    ),
                )
                continue
            if not rp.accepts(declared.kind):
                same = [f"@{r}" for r, x in ctx.plan.resources.items() if rp.accepts(x.kind)]
                ctx.report(
                    "PG142",
                    f"param {brief(rp.param)} of {sig.name} needs a {rp.kinds_text()} resource, "
                    "but "
                    f"{brief(value)} is a {declared.kind or 'resource of unknown kind'}",
                    node=nid,
                    pointer=ptr,
                    suggestions=tuple(same[:3]),
                )
                continue
            (ctx.writers if rp.access == "write" else ctx.readers)[used].append(nid)

    for rid, res in ctx.plan.resources.items():
        kind = kinds.get(res.kind)
        if kind is None or kind.needs_writer_and_reader:
            continue  # replay buffers get the more specific dataflow checks
        if not ctx.readers.get(rid) and not ctx.writers.get(rid):
            ctx.report(
                "PG162",
                f"resource {brief(rid)} ({res.kind}) is declared but no node uses it",
                pointer=f"/resources/{rid}",
                key=True,
                hint="remove it, or reference it as " + f'"@{rid}"',
            )
