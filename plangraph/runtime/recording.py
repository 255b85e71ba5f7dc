"""Recording sampled experience: the item function shared by ``WriteExperiences`` and
``plangraph run --record DIR`` (which adds one after every rollout source).

The rows go to a ``plangraph.rl.offline.ExperienceWriter`` (Parquet files of bounded size,
written on a background thread); the writer is closed, and its last file written, when
the build context stops (``BuildContext.closers``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plangraph.flow.metrics import get_metrics
from plangraph.runtime.build_context import BuildContext, resource_id

RECORDED = "num_env_steps_recorded"
"""Counter: rows written to a dataset (agent steps for a multi-agent batch)."""


def _metadata(ctx: BuildContext, workers: str) -> dict[str, Any]:
    """``metadata.json``'s contents for worker set ``workers``: env id and spaces, plan,
    run seed, plangraph version."""
    from plangraph.rl.offline import describe_space
    from plangraph.version import __version__

    rid = resource_id(workers)
    ws = ctx.worker_sets[rid]
    params = ctx.resource_params.get(rid)
    meta: dict[str, Any] = {
        "format": "plangraph-experiences",
        "plangraph_version": __version__,
        "env": getattr(params, "env", None),
        "seed": ctx.seed,
        "worker_set": rid,
        "plan": ctx.compiled.to_plan().to_dict(),
    }
    policy = ws.local_policy
    if getattr(ws, "multi_agent", False):
        meta["policies"] = {
            pid: {
                "observation_space": describe_space(p.observation_space),
                "action_space": describe_space(p.action_space),
            }
            for pid, p in policy.items()
        }
    else:
        meta["observation_space"] = describe_space(policy.observation_space)
        meta["action_space"] = describe_space(policy.action_space)
        meta["algo"] = policy.config.algo
    return meta


def experience_recorder(
    ctx: BuildContext, *, path: str, workers: str, max_file_bytes: int, prefix: str
) -> Callable[[Any], Any]:
    """An item function that records each batch's rows under ``path`` and returns the
    batch unchanged; its writer is closed when ``ctx`` stops.

    Raises:
        DatasetError: (when called) a batch's columns differ from the first batch's, or a
            file could not be written.
    """
    from plangraph.rl.offline import ExperienceWriter, record_columns

    writer = ExperienceWriter(
        path, metadata=_metadata(ctx, workers), max_file_bytes=max_file_bytes, prefix=prefix
    )
    ctx.closers.append(writer.close)

    def record(batch: Any) -> Any:
        for columns in record_columns(batch):
            writer.write(columns)
            get_metrics().counters[RECORDED] += len(columns["rewards"])
        return batch

    return record
