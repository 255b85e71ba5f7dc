"""The dataset check before launch, one implementation for ``plangraph run`` and
``plangraph validate --datasets``.

Every ``OfflineData`` resource's Parquet footers are read (schema and row counts, no row
data: ``plangraph.rl.offline.inspect_dataset``) and its columns checked against the env
and the learner of each ``ReadExperiences`` node reading it (``check_layout``). ``run``
raises the problems as a ``BuildError`` before Ray starts; ``validate`` prints them as
PG198 diagnostics, located at the resource's ``path``. Imports neither ray nor torch
(pyarrow, gymnasium); the caller says how to get an env's spaces and a learner's columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DatasetProblem", "check_datasets"]

_HINT_READ = (
    "give the folder or URI of a recorded dataset (plangraph run PLAN --record DIR writes "
    "one), e.g. --set dataset=DIR"
)


@dataclass(frozen=True)
class DatasetProblem:
    """One problem of one dataset: ``resource`` (the ``OfflineData`` id), the
    ``ReadExperiences`` ``node`` it concerns (None: the dataset itself), the message
    (naming the resource's JSON path; without the node, which ``error_text`` and the
    diagnostic add) and a hint."""

    resource: str
    node: str | None
    message: str
    hint: str

    @property
    def pointer(self) -> str:
        return f"/resources/{self.resource}/params/path"

    def error_text(self) -> str:
        """The ``BuildError`` text ``plangraph run`` stops with: the node, the message and
        the hint (a diagnostic shows the node apart)."""
        where = f"node {self.node!r} " if self.node else ""
        return f"{where}{self.message}; {self.hint}"

    def diagnostic(self, compiled: Any) -> Any:
        """The PG198 diagnostic ``plangraph validate --datasets`` prints, located where
        the plan file gives the resource's ``path``."""
        from plangraph.compiler.diagnostics import Diagnostic

        source = compiled.plan.source
        location = source.locate(self.pointer) if source is not None else None
        if location is None and self.resource in compiled.resources:
            location = compiled.resources[self.resource].location
        return Diagnostic(
            "PG198",
            self.message,
            node=self.node,
            pointer=self.pointer,
            location=location,
            hint=self.hint,
        )


def check_datasets(
    compiled: Any,
    params: Mapping[str, Any],
    worker_sets: Mapping[str, Any],
    spaces: Callable[[str], tuple[Any, Any]],
    needed: Callable[[Any], Sequence[str]],
) -> tuple[dict[str, Any], list[DatasetProblem]]:
    """Read every ``OfflineData`` resource's footers and check its columns against each
    ``ReadExperiences`` node reading it.

    Args:
        compiled: the compiled plan (its resources and nodes).
        params: the resolved params by resource id (``OfflineDataParams`` for datasets).
        worker_sets: ``WorkerSetParams`` by worker set id (single-agent ones are checked).
        spaces: ``(observation space, action space)`` of one sub-env of a worker set, by
            its id (may raise: the caller's error).
        needed: the columns a policy config's learner reads from a dataset besides the
            recorded ones (its ``loss_columns`` less optional and derived ones).

    Returns:
        ``(DatasetInfo by resource id, problems)``; a dataset that cannot be read has no
        info and one problem, and its readers are not checked further.
    """
    from plangraph.errors import DatasetError
    from plangraph.rl.offline import check_layout, inspect_dataset

    infos: dict[str, Any] = {}
    problems: list[DatasetProblem] = []
    for rid, res in sorted(compiled.resources.items()):
        if res.kind != "OfflineData":
            continue
        try:
            infos[rid] = inspect_dataset(params[rid].path)
        except DatasetError as exc:
            message = f"resource {rid!r} (/resources/{rid}/params/path): {exc}"
            problems.append(DatasetProblem(rid, None, message, _HINT_READ))
    for nid, node in compiled.nodes.items():
        if node.op != "ReadExperiences" or node.params is None:
            continue
        read: Any = node.params  # ReadExperiencesParams
        # resource references, "@offline" -> "offline" (checked by the compiler)
        rid, ws_id = read.dataset.removeprefix("@"), read.workers.removeprefix("@")
        ws = worker_sets.get(ws_id)
        if rid not in infos or ws is None or ws.policy is None:
            continue
        obs_space, act_space = spaces(ws_id)
        found = check_layout(infos[rid], obs_space, act_space, list(needed(ws.policy)))
        if found:
            lines = "; ".join(msg for _col, msg in found)
            message = (
                f"reads dataset {infos[rid].path!r} (resource {rid!r}, "
                f"/resources/{rid}/params/path) for worker set {ws_id!r} (env {ws.env!r}, "
                f"algo {ws.policy.algo!r}): {lines}"
            )
            hint = (
                f"record it in this env with a plan whose algorithm samples the columns "
                f"{ws.policy.algo} reads (plangraph run PLAN --record DIR; docs/offline.md "
                "says which), or give a dataset with these columns (the schema is there too)"
            )
            problems.append(DatasetProblem(rid, nid, message, hint))
    return infos, problems
