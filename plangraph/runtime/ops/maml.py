"""Implementations of MAML's operators (``plangraph/ops/builtin/maml.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import ray

from plangraph.errors import BuildError
from plangraph.flow import deadlines
from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics, phase
from plangraph.flow.sentinel import NOT_READY
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.counters import TRAINED
from plangraph.runtime.implementations import register_impl, register_lowering
from plangraph.runtime.items import TrainInfo, scalar_stats


@register_impl("MAMLInnerAdaptation")
def _maml_inner_adaptation(params: Any) -> Any:
    """The per-shard function: ``inner_adaptation(worker, batch)``, run in each worker."""
    from plangraph.algorithms.maml.adaptation import inner_adaptation

    return inner_adaptation


@register_lowering("MetaUpdate")
def _meta_update(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.algorithms.maml.adaptation import (
        AdaptedTask,
        check_task_api,
        draw_tasks,
        set_task,
    )
    from plangraph.rl.rollout_worker import env_creator

    p = node.params
    ws = ctx.worker_set(p.workers)
    env = env_creator(ws.env)()
    missing = check_task_api(env)
    if missing:
        raise BuildError(
            f"node {node.id!r}: MetaUpdate sets tasks on the rollout workers, but the env of "
            f"worker set {p.workers!r} ({type(env.unwrapped).__name__}) has no "
            f"{', '.join(missing)}; a task distribution needs sample_tasks(n), "
            "set_task(task) and get_task() (docs/guide/environments.md, e.g. Navigation2D)"
        )
    rng = ctx.node_rng(node.id)
    # The generator state the tasks now on the workers were drawn from: a restored run
    # draws (and sets) the same tasks again at its first pull.
    drawn_from: dict[str, Any] = {"state": rng.bit_generator.state}

    def send_tasks() -> None:
        workers = ws.remote_workers or [ws.local_worker]
        drawn_from["state"] = rng.bit_generator.state
        tasks = draw_tasks(env, len(workers), rng)
        if not ws.remote_workers:
            set_task(ws.local_worker, tasks[0])
            return
        refs = [
            actor.__ray_call__.remote(set_task, task)
            for actor, task in zip(ws.remote_workers, tasks, strict=True)
        ]
        ray.get(refs, timeout=deadlines.REPLY_DEADLINE_S)

    def train(tasks: list[AdaptedTask]) -> TrainInfo:
        metrics = get_metrics()
        policy = ws.local_policy
        policy.set_global_vars(ctx.run_state.global_vars())
        with phase("learning"):
            stats = dict(policy.meta_update([t.batches for t in tasks]))
        pre = float(np.nanmean([t.return_mean(0) for t in tasks]))
        post = float(np.nanmean([t.return_mean(len(t.batches) - 1) for t in tasks]))
        stats.update(
            pre_adaptation_return_mean=pre,
            post_adaptation_return_mean=post,
            adaptation_delta=post - pre,
            num_tasks=len(tasks),
        )
        count = sum(t.env_steps() for t in tasks)
        metrics.counters[TRAINED] += count
        scalars = scalar_stats(stats)
        metrics.info["learner"] = scalars
        with phase("broadcast"):
            ws.sync_weights(ctx.run_state.global_vars(), node_id=node.id)
        return TrainInfo(scalars, count)

    def apply(it: Iterator[Any]) -> Iterator[Any]:
        send_tasks()  # at the first pull: before the first round is requested
        buffer: list[AdaptedTask] = []
        for item in it:
            if item is NOT_READY:
                yield item
                continue
            buffer.extend(item)
            send_tasks()  # the next round's tasks (its requests follow them)
            if len(buffer) >= p.meta_batch_size:
                yield train(buffer)
                buffer = []

    def get_state() -> dict[str, Any]:
        return {"rng": drawn_from["state"]}

    def set_state(state: dict[str, Any]) -> None:
        rng.bit_generator.state = state["rng"]

    ctx.register_operator_state(node.id, get_state, set_state)
    (upstream,) = inputs
    return upstream.transform(apply, name=node.id)
