"""A plan as compiled, in the one form two plans are compared in (``plangraph diff``).

A :class:`PlanView` is :meth:`CompiledPlan.to_dict` as a model: config as resolved
(defaults plus overrides), every node's op, inputs, port types and params with
``${config}`` references resolved and defaults filled in, every resource's kind and params
(likewise) with the nodes that read and write it. It comes from a plan file (compiled
here) or from the ``plan.json`` a run directory or checkpoint holds (the same
``to_dict`` form, written by ``plangraph run`` and ``Algorithm.save``), so a plan is
compared with the one a run actually used, without the operators that run needed being
registered here.

:func:`load_view` decides which from the path: a directory is a run or checkpoint
directory (its ``plan.json``); a ``.json`` file in the compiled form (it has
``output_type``) is read as saved; any other ``.json`` or ``.py`` is a plan file.
Imports pydantic only (no ray, no torch).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, PrivateAttr, ValidationError

from plangraph.errors import CheckpointError, PlanError
from plangraph.ir.source import JSONSyntaxError, Location, SourceMap, parse_json_with_positions

if TYPE_CHECKING:
    from plangraph.compiler.compiled import CompiledPlan

__all__ = [
    "SAVED_PLAN_FILE",
    "NodeView",
    "PlanView",
    "ResourceView",
    "load_view",
    "read_saved_view",
]

SAVED_PLAN_FILE = "plan.json"
"""The compiled plan in a run directory and in each of its checkpoints."""


class _View(BaseModel):
    # Lax mode for JSON arrays as tuples only: pydantic v2 never turns a number into a
    # string or an id, so a hand-edited value of the wrong type is still refused.
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    def __eq__(self, other: object) -> bool:
        # Fields only: where a plan was written never makes two plans differ.
        if not isinstance(other, BaseModel):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # params are dicts


class NodeView(_View):
    """One node as compiled: ``params`` are JSON values, resolved, defaults included."""

    op: str = Field(min_length=1)
    inputs: tuple[str, ...] = ()
    input_types: tuple[str | None, ...] = ()
    output_type: str | None = None
    params: dict[str, JsonValue] = Field(default_factory=dict)

    def input_type(self, port: int) -> str | None:
        """The inferred type of input ``port`` (``None``: not inferred)."""
        return self.input_types[port] if port < len(self.input_types) else None


class ResourceView(_View):
    """One resource as compiled: ``readers``/``writers`` are node ids, by access."""

    kind: str = Field(min_length=1)
    params: dict[str, JsonValue] = Field(default_factory=dict)
    readers: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()


class PlanView(_View):
    """A plan as compiled (the ``CompiledPlan.to_dict`` form); nodes in topological order.

    ``source`` (not a field) is where the plan was written, when it is a plan file: the
    located form of a change (:meth:`locate`) points into it.
    """

    name: str
    config: dict[str, JsonValue] = Field(default_factory=dict)
    resources: dict[str, ResourceView] = Field(default_factory=dict)
    nodes: dict[str, NodeView] = Field(default_factory=dict)
    output: str
    output_type: str | None = None

    _source: SourceMap | None = PrivateAttr(default=None)

    @classmethod
    def from_compiled(cls, compiled: CompiledPlan) -> PlanView:
        """The view of ``compiled`` (whose plan should be free of errors: invalid params
        are compared as they were given)."""
        view = cls.model_validate(_known(compiled.to_dict()))
        view._source = compiled.plan.source
        return view

    def locate(self, pointer: str) -> Location | None:
        """Where ``pointer`` (``/nodes/concat/params/min_batch_size``) was written, or its
        nearest written parent; ``None`` for a saved plan."""
        return self._source.locate(pointer) if self._source is not None else None

    def with_resource_params(self, kind: str, updates: Mapping[str, JsonValue]) -> PlanView:
        """This view with ``updates`` set in the params of every ``kind`` resource (e.g. the
        ``--env``/``--num-workers`` a run applies to each ``WorkerSet``)."""
        if not updates:
            return self
        resources = {
            rid: r.model_copy(update={"params": {**r.params, **updates}}) if r.kind == kind else r
            for rid, r in self.resources.items()
        }
        view = self.model_copy(update={"resources": resources})
        view._source = self._source
        return view


# The keys of the compiled form this module compares; a plan.json written by a plangraph
# with more (a later version) is still read, its other keys are not compared.
_TOP_KEYS = tuple(PlanView.model_fields)
_NODE_KEYS = tuple(NodeView.model_fields)
_RESOURCE_KEYS = tuple(ResourceView.model_fields)


def _pick(data: Any, keys: tuple[str, ...]) -> Any:
    return {k: v for k, v in data.items() if k in keys} if isinstance(data, Mapping) else data


def _known(data: Mapping[str, Any]) -> dict[str, Any]:
    out = _pick(data, _TOP_KEYS)
    for part, keys in (("nodes", _NODE_KEYS), ("resources", _RESOURCE_KEYS)):
        if isinstance(out.get(part), Mapping):
            out[part] = {k: _pick(v, keys) for k, v in out[part].items()}
    return out


def is_saved_form(data: Any) -> bool:
    """Whether JSON ``data`` is the compiled form (``plan.json``), not a plan to compile."""
    return isinstance(data, Mapping) and "output_type" in data


def read_saved_view(path: str | os.PathLike[str]) -> PlanView:
    """The :class:`PlanView` of a saved compiled plan (a run's or checkpoint's
    ``plan.json``).

    It is data from whoever shared the run: parsed with plangraph's bounded JSON reader and
    validated (strict types), never executed.

    Raises:
        CheckpointError: the file cannot be read, is not JSON, or not the compiled form
            (one line: the file, where, what is wrong).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CheckpointError(f"{path}: cannot read the saved plan ({reason})") from None
    try:
        data, smap = parse_json_with_positions(text, str(path))
    except JSONSyntaxError as exc:
        raise CheckpointError(
            f"{path}:{exc.line}:{exc.col}: not a saved plan: {exc.msg}; the file is corrupt "
            "or was edited"
        ) from None
    if not is_saved_form(data):
        # Runs now save a plan (``CompiledPlan.to_plan()``, every param explicit) rather
        # than the compiled form; compiling it gives the view of the plan that ran.
        return _compiled_view(path)
    try:
        return PlanView.model_validate(_known(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        pointer = "/" + "/".join(map(str, err["loc"]))
        where = smap.locate(pointer)
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise CheckpointError(
            f"{where or path}: {pointer}: {err['msg']}{more}; the saved plan is corrupt or "
            "was edited"
        ) from None


def _compiled_view(path: Path) -> PlanView:
    from plangraph.compiler import analyze

    compiled = analyze(path)
    if not compiled.ok:
        first = next(d for d in compiled.diagnostics if d.severity == "error")
        raise CheckpointError(
            f"{path}: not a valid saved plan: {first.message}; the saved plan is corrupt or "
            "was edited"
        )
    return PlanView.from_compiled(compiled)


def load_view(path: str | os.PathLike[str], config: Mapping[str, Any] | None = None) -> PlanView:
    """The :class:`PlanView` of ``path``: a plan file (``.json``/``.py``, compiled with
    ``config`` overrides), a saved compiled ``plan.json``, or a directory holding one (a
    run directory, ``runs/X/``, or one of its checkpoints).

    Raises:
        PlanError: no such file, or a directory that holds no ``plan.json``.
        PlanValidationError: a plan file with errors (``.diagnostics`` has them all).
        CheckpointError: a saved plan that is corrupt (see :func:`read_saved_view`).
    """
    path = Path(path)
    if path.is_dir():
        saved = path / SAVED_PLAN_FILE
        if not saved.is_file():
            raise PlanError(
                f"{path}: a directory without {SAVED_PLAN_FILE}; pass a plan file or a run "
                "directory written by plangraph run (runs/NAME/)"
            )
        if config:
            raise PlanError(f"{path}: --set applies to plan files, not to a run's saved plan")
        return read_saved_view(saved)
    if not path.exists():
        raise PlanError(f"no such file or directory: {path}")
    if path.suffix.lower() == ".json" and _looks_saved(path):
        if config:
            raise PlanError(f"{path}: --set applies to plan files, not to a saved plan")
        return read_saved_view(path)
    from plangraph.compiler import analyze
    from plangraph.compiler.diagnostics import PlanValidationError

    compiled = analyze(path, config=config, override_syntax="cli")
    if not compiled.ok:
        raise PlanValidationError(compiled.diagnostics, compiled)
    return PlanView.from_compiled(compiled)


def _looks_saved(path: Path) -> bool:
    # Only the shape decides; a file that does not parse is left to the plan loader, whose
    # diagnostics locate the problem.
    try:
        data, _ = parse_json_with_positions(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, JSONSyntaxError):
        return False
    return is_saved_form(data)
