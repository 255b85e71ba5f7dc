"""Implementations of the built-in train operators (``plangraph/ops/builtin/train.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics, phase
from plangraph.flow.sentinel import NOT_READY, note_local_wait
from plangraph.rl.advantage_norm import pool_terms
from plangraph.runtime.build_context import BuildContext, resource_id
from plangraph.runtime.counters import (
    AGENT_SAMPLED,
    AGENT_TRAINED,
    ENQUEUE_RETRIES,
    ENQUEUED,
    SAMPLED,
    TARGET_UPDATES,
    TRAINED,
    WEIGHT_SYNCS,
    policy_counter,
)
from plangraph.runtime.implementations import register_lowering, register_map
from plangraph.runtime.items import GradInfo, ReplayPriorities, TrainInfo, scalar_stats


def _broadcast(ctx: BuildContext, ws: Any, node_id: str) -> None:
    """The learner's weights to every rollout worker, sent by plan node ``node_id`` (a
    failed ``set_weights`` raises ``RemoteCallError`` naming it, where it is found)."""
    with phase("broadcast"):
        ws.sync_weights(ctx.run_state.global_vars(), node_id=node_id)


@register_map("TrainOneStep")
def _train_one_step(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)
    if getattr(ws, "multi_agent", False):
        return _train_policies(node, ctx, ws)
    # Prioritized replay upstream: TD errors of each update become the new priorities.
    # The compiler knows which replay buffers feed this node (through any replay reader).
    per_buffers = [
        ctx.buffers[rid]
        for rid in ctx.compiled.nodes[node.id].replay_sources
        if hasattr(ctx.buffers[rid], "update_priorities")
    ]
    # Counted in the (checkpointed) metrics, so a restored run keeps its broadcast phase.
    updates_key = f"num_updates/{node.id}"

    def train(batch: Any) -> TrainInfo:
        metrics = get_metrics()
        policy = ws.local_policy
        policy.set_global_vars(ctx.run_state.global_vars())
        with phase("learning"):
            stats = dict(policy.train(batch, p.num_sgd_iter, p.sgd_minibatch_size))
        replay = ReplayPriorities.of(batch, stats)  # rows from ReplayActors: UpdatePriorities
        td_error = stats.pop("td_error", None)
        if td_error is not None and per_buffers and "batch_indexes" in batch:
            for buf in per_buffers:
                buf.update_priorities(batch["batch_indexes"], np.asarray(td_error))
        count = batch.env_steps()
        metrics.counters[TRAINED] += count
        scalars = scalar_stats(stats)
        metrics.info["learner"] = scalars
        if p.update_workers_every == 1:
            _broadcast(ctx, ws, node.id)
        else:
            metrics.counters[updates_key] += 1
            if metrics.counters[updates_key] % p.update_workers_every == 0:
                _broadcast(ctx, ws, node.id)
        return TrainInfo(scalars, count, replay)

    return train


def _train_policies(node: Any, ctx: BuildContext, ws: Any) -> Callable[[Any], Any]:
    """TrainOneStep of a multi-agent worker set: each named policy on its own rows."""
    p = node.params
    named = tuple(p.policies)
    updates_key = f"num_updates/{node.id}"

    def per_policy(batch: Any) -> dict[str, Any]:
        if hasattr(batch, "policy_batches"):
            return {
                pid: b
                for pid, b in batch.policy_batches.items()
                if (not named or pid in named) and b.count > 0
            }
        if len(named) != 1:  # the compiler's PG194 catches this in a plan
            raise ValueError(
                f"TrainOneStep {node.id!r} got a SampleBatch (one policy's rows) but "
                f"policies={list(named)}; name exactly the policy it trains"
            )
        return {named[0]: batch} if batch.count > 0 else {}

    def train(batch: Any) -> TrainInfo:
        metrics = get_metrics()
        todo = per_policy(batch)
        global_vars = ctx.run_state.policy_global_vars(todo)
        all_stats: dict[str, float] = {}
        trained_rows = 0
        for pid, rows in todo.items():
            policy = ws.local_policy[pid]
            policy.set_global_vars(global_vars[pid])
            with phase("learning"):
                stats = dict(policy.train(rows, p.num_sgd_iter, p.sgd_minibatch_size))
            stats.pop("td_error", None)
            scalars = scalar_stats(stats)
            ctx.run_state.policy_learner[pid] = scalars
            all_stats.update({f"{pid}/{k}": v for k, v in scalars.items()})
            metrics.counters[policy_counter(AGENT_TRAINED, pid)] += rows.count
            metrics.counters[AGENT_TRAINED] += rows.count
            trained_rows += rows.count
        # Env steps once per batch: a MultiAgentBatch's own; replayed rows are agent steps.
        count = batch.env_steps() if hasattr(batch, "policy_batches") else trained_rows
        metrics.counters[TRAINED] += count
        metrics.info["learner"] = all_stats
        if todo:
            metrics.counters[updates_key] += 1
            if metrics.counters[updates_key] % p.update_workers_every == 0:
                with phase("broadcast"):
                    ws.sync_weights(
                        ctx.run_state.policy_global_vars(ws.local_policy),
                        policies=list(todo),
                        node_id=node.id,
                    )
        return TrainInfo(all_stats, count)

    return train


@register_map("ComputeGradients")
def _compute_gradients(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    ws = ctx.worker_set(node.params.workers)

    def compute(batch: Any) -> GradInfo:
        policy = ws.local_policy
        policy.set_global_vars(ctx.run_state.global_vars())
        with phase("learning"):
            grads, stats = policy.compute_gradients(batch)
            terms = policy.advantage_norm_terms(batch)
        scalars = scalar_stats(dict(stats))
        get_metrics().info["learner"] = scalars
        return GradInfo(list(grads), batch.env_steps(), scalars, terms)

    return compute


def average_gradients(infos: list[GradInfo]) -> GradInfo:
    """Combine the gradients of the microbatches of one train batch into its gradient.

    Gradients: the mean weighted by rows, ``sum_k (n_k / N) * g_k`` with ``n_k`` the env
    steps of microbatch ``k`` (``GradInfo.count``) and ``N = sum_k n_k``; for a per-row-mean
    loss this is exactly the gradient of the concatenated batch, also for unequal
    microbatches (RLlib 1.x summed; an unweighted mean would over-weight the rows of
    small microbatches). When the infos carry ``adv_norm`` terms (A2C with
    ``normalize_advantages``) the advantages are standardised by the pooled statistics of
    all ``N`` rows (``plangraph.rl.advantage_norm``), so the result equals the gradient of
    the whole train batch. A single info is returned unchanged (its statistics are the
    train batch's). Env steps: summed. Stats: row-weighted means (exact for per-row means
    such as ``vf_loss``; ``policy_loss`` keeps each microbatch's normalisation).

    Returns:
        ``GradInfo`` with float32 gradients, ``count = N`` and the pooled ``adv_norm``.

    Raises:
        ValueError: an empty list, no rows in total, gradient lists of different lengths,
            or infos that mix normalised and plain gradients.
    """
    if not infos:
        raise ValueError("AverageGradients got an empty list of gradients")
    n = len(infos[0].grads)
    if any(len(g.grads) != n for g in infos):
        raise ValueError("AverageGradients: gradient lists differ in length")
    if len(infos) == 1:
        return infos[0]
    total = sum(g.count for g in infos)
    if total <= 0:
        raise ValueError("AverageGradients: the gradients were computed on no env steps")
    weights = [g.count / total for g in infos]
    with_terms = [g.adv_norm is not None for g in infos]
    pooled = None
    if all(with_terms):
        pooled = pool_terms([g.adv_norm for g in infos if g.adv_norm is not None])
        grads = pooled.gradient()
    elif any(with_terms):
        raise ValueError(
            "AverageGradients: some gradients standardise advantages and some do not; "
            "compute them with the same worker set"
        )
    else:
        # float64 accumulation: with equal microbatches this rounds like the plain mean.
        grads = [
            np.asarray(
                sum(w * g.grads[i].astype(np.float64) for w, g in zip(weights, infos, strict=True))
            ).astype(infos[0].grads[i].dtype)
            for i in range(n)
        ]
    keys = sorted(set().union(*(g.stats for g in infos)))
    stats = {}
    for k in keys:
        have = [(g.count, g.stats[k]) for g in infos if k in g.stats]
        rows = sum(c for c, _ in have)
        stats[k] = float(sum(c * v for c, v in have) / rows) if rows else 0.0
    return GradInfo(grads, total, stats, pooled)


@register_map("AverageGradients")
def _average_gradients(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    def average(infos: list[GradInfo]) -> GradInfo:
        with phase("learning"):
            return average_gradients(infos)

    return average


@register_map("ApplyGradients")
def _apply_gradients(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)
    to_source = p.update_workers == "source"
    # The learner's version (updates applied), in the checkpointed counters so a restored
    # run keeps numbering where it stopped; only kept where workers are tagged with it.
    version_key = f"num_updates/{node.id}"

    def apply(info: GradInfo) -> TrainInfo:
        if to_source and ws.remote_workers and info.source is None:
            # Refused before the step: the compiler's PG182 catches the built-in cases.
            raise ValueError(
                f"ApplyGradients {node.id!r} has update_workers='source' but its gradients "
                "name no source rollout worker (they were computed in the driver); feed it "
                "from AsyncGradients, or set update_workers=true to broadcast the weights"
            )
        metrics = get_metrics()
        policy = ws.local_policy
        policy.set_global_vars(ctx.run_state.global_vars())
        with phase("learning"):
            extra = policy.apply_gradients(info.grads) or {}
        metrics.counters[TRAINED] += info.count
        stats = {**info.stats, **scalar_stats(dict(extra))}
        if to_source:
            stats.update(_sync_source(info))
        metrics.info["learner"] = stats
        if p.update_workers is True:
            _broadcast(ctx, ws, node.id)
        return TrainInfo(stats, info.count)

    def _sync_source(info: GradInfo) -> dict[str, float]:
        """Send the new weights to the worker that computed ``info``; its policy lag."""
        counters = get_metrics().counters
        lag = counters[version_key] - info.policy_version
        counters[version_key] += 1
        if not ws.remote_workers:
            return {"policy_lag": 0.0}  # the local worker samples with the learner policy
        global_vars = {**ctx.run_state.global_vars(), "policy_version": counters[version_key]}
        with phase("broadcast"):
            ws.sync_weights_to(info.source, global_vars, node_id=node.id)
        counters[WEIGHT_SYNCS] += 1
        return {"policy_lag": float(lag)}

    return apply


@register_map("UpdateTarget")
def _update_target(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)
    lock = ctx.policy_lock(p.workers)
    counter = SAMPLED if p.unit == "sampled" else TRAINED
    last_key = f"last_target_update_ts/{node.id}"
    if getattr(ws, "multi_agent", False):
        return _update_policy_targets(node, ws, lock)

    def update(item: Any) -> Any:
        metrics = get_metrics()
        now, last = metrics.counters[counter], metrics.counters[last_key]
        # Fires once each time the counter passes a multiple of freq (freq 0: every item
        # that saw progress).
        due = now > last if p.freq == 0 else now // p.freq > last // p.freq
        if due:
            with lock:  # a learner thread may be training this policy
                with phase("learning"):
                    if p.tau == 1.0:
                        ws.local_policy.update_target()
                    else:
                        ws.local_policy.update_target(tau=p.tau)
            metrics.counters[TARGET_UPDATES] += 1
            metrics.counters[last_key] = now
        return item

    return update


@register_map("UpdateKL")
def _update_kl(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)
    lock = ctx.policy_lock(p.workers)
    if getattr(ws, "multi_agent", False):
        return _update_policy_kls(node, ctx, ws, lock)

    def update(info: TrainInfo) -> TrainInfo:
        kl = info.stats.get("kl")
        if kl is None:
            raise ValueError(
                f"UpdateKL {node.id!r}: the training step reported no 'kl' (learner stats "
                f"{sorted(info.stats)}); place it right after TrainOneStep of a PPO policy"
            )
        with lock:  # a learner thread may be training this policy
            coeff = float(ws.local_policy.update_kl(float(kl)))
        stats = {**info.stats, "kl_coeff": coeff}
        metrics = get_metrics()
        metrics.info["learner"] = {**metrics.info.get("learner", {}), "kl_coeff": coeff}
        return TrainInfo(stats, info.count, info.replay)

    return update


def _update_policy_kls(node: Any, ctx: BuildContext, ws: Any, lock: Any) -> Callable[[Any], Any]:
    """UpdateKL of a multi-agent worker set: each policy from its own ``<id>/kl``."""
    named = tuple(node.params.policies)
    pids = [
        pid
        for pid in (named or tuple(ws.local_policy))
        if hasattr(ws.local_policy[pid], "update_kl")
    ]

    def update(info: TrainInfo) -> TrainInfo:
        stats = dict(info.stats)
        for pid in pids:
            kl = info.stats.get(f"{pid}/kl")
            if kl is None:
                continue  # not trained in this step: left as it is (RLlib warns)
            with lock:
                coeff = float(ws.local_policy[pid].update_kl(float(kl)))
            stats[f"{pid}/kl_coeff"] = coeff
            learner = ctx.run_state.policy_learner.get(pid)
            if learner is not None:
                learner["kl_coeff"] = coeff
        get_metrics().info["learner"] = stats
        return TrainInfo(stats, info.count, info.replay)

    return update


def _update_policy_targets(node: Any, ws: Any, lock: Any) -> Callable[[Any], Any]:
    """UpdateTarget of a multi-agent worker set: each policy on its own agent steps."""
    p = node.params
    base = AGENT_SAMPLED if p.unit == "sampled" else AGENT_TRAINED
    pids = [
        pid
        for pid in (p.policies or tuple(ws.local_policy))
        if hasattr(ws.local_policy[pid], "update_target")
    ]

    def update(item: Any) -> Any:
        metrics = get_metrics()
        for pid in pids:
            last_key = f"last_target_update_ts/{node.id}/{pid}"
            now, last = metrics.counters[policy_counter(base, pid)], metrics.counters[last_key]
            due = now > last if p.freq == 0 else now // p.freq > last // p.freq
            if not due:
                continue
            with lock, phase("learning"):
                policy = ws.local_policy[pid]
                if p.tau == 1.0:
                    policy.update_target()
                else:
                    policy.update_target(tau=p.tau)
            metrics.counters[TARGET_UPDATES] += 1
            metrics.counters[policy_counter(TARGET_UPDATES, pid)] += 1
            metrics.counters[last_key] = now
        return item

    return update


# -- asynchronous learning (IMPALA/APPO) ----------------------------------------------------

_DEQUEUE_WAIT_S = 0.05


@register_map("Enqueue")
def _enqueue(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    import queue

    learner = ctx.learner(node.params.queue)

    def enqueue(batch: Any) -> Any:
        learner.check(node.id)
        try:
            learner.inqueue.put_nowait(batch)
        except queue.Full:
            # Back-pressure: the same batch is offered again on the next pull.
            get_metrics().counters[ENQUEUE_RETRIES] += 1
            note_local_wait()
            return NOT_READY
        get_metrics().counters[ENQUEUED] += batch.env_steps()
        return batch

    return enqueue


@register_lowering("Dequeue")
def _dequeue(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    import queue

    learner = ctx.learner(node.params.queue)

    def base(timeout: float | None) -> Iterator[Any]:
        while True:
            try:
                if timeout == 0:  # polled by a union: never wait
                    update = learner.outqueue.get_nowait()
                else:  # a blocking consumer: wait a little, then re-check the thread
                    update = learner.outqueue.get(timeout=_DEQUEUE_WAIT_S)
            except queue.Empty:
                learner.check(node.id)
                note_local_wait()
                yield NOT_READY
                continue
            metrics = get_metrics()
            metrics.counters[TRAINED] += update.count
            metrics.info["learner"] = {
                **update.stats,
                "learner_busy_fraction": learner.busy_fraction(),
                "learner_inqueue_size": float(learner.inqueue.qsize()),
            }
            yield TrainInfo(dict(update.stats), update.count, update.replay)

    return LocalIterator(base, name=node.id)


@register_map("UpdateWorkerWeights")
def _update_worker_weights(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    p = node.params
    ws = ctx.worker_set(p.workers)
    ws_id = resource_id(p.workers)
    lock = ctx.policy_lock(p.workers)
    learners = [t for t in ctx.learners.values() if t.workers == ws_id]
    batches_since_sync: dict[int, int] = {}
    cached: list[Any] = [None, -1]  # (object ref of the weights, learner version)

    def version() -> int:
        return learners[0].version if learners else 0

    def sync(batch: Any) -> Any:
        actor = get_metrics().current_actor
        if actor is None or not ws.remote_workers:
            return batch  # local sampling: the workers share the learner policy
        key = id(actor)
        batches_since_sync[key] = batches_since_sync.get(key, 0) + 1
        if batches_since_sync[key] < p.max_weight_sync_delay:
            return batch
        batches_since_sync[key] = 0
        import ray

        current = version()
        with phase("broadcast"):
            if cached[1] != current:
                with lock:  # a consistent snapshot, never half an update
                    weights = ws.local_policy.get_weights()
                    current = version()
                cached[0], cached[1] = ray.put(weights), current
            global_vars = {**ctx.run_state.global_vars(), "policy_version": cached[1]}
            # Not waited for; the rollout source looks at the reply (check_pending).
            ws.send_weights(actor, cached[0], global_vars, node_id=node.id)
        get_metrics().counters[WEIGHT_SYNCS] += 1
        return batch

    return sync


@register_lowering("DDPPOTrainOnShard")
def _ddppo_train_on_shard(node: Any, inputs: list[Any], ctx: BuildContext) -> Any:
    import functools

    import ray

    from plangraph.rl.all_reduce import Rendezvous, leave_group, train_in_group

    ws = ctx.worker_set(node.params.workers)
    if not ws.remote_workers:  # the compiler refuses it (PG205); a plan built otherwise
        raise ValueError(f"{node.id}: DD-PPO needs remote rollout workers (num_workers >= 1)")
    rendezvous: Any = ray.remote(num_cpus=0)(Rendezvous).remote()

    def close() -> None:
        # Every live worker leaves its group (destroy_process_group), then the rendezvous
        # goes; a worker already gone has no group left.
        refs = [w.__ray_call__.remote(leave_group) for w in ws.remote_workers]
        for ref in refs:
            try:
                ray.get(ref, timeout=30.0)
            except Exception:
                pass
        try:
            ray.kill(rendezvous)
        except Exception:  # already gone (a second close)
            pass

    ctx.closers.append(close)
    fn = functools.partial(
        train_in_group,
        rendezvous=rendezvous,
        world_size=len(ws.remote_workers),
        timeout_s=float(ws.policy_config.process_group_timeout_s),
    )
    return inputs[0].then(node.id, fn)


@register_map("DDPPOReport")
def _ddppo_report(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    ws = ctx.worker_set(node.params.workers)

    def report(results: list[Any]) -> TrainInfo:
        metrics = get_metrics()
        trained = [r for r in results if r.trained]
        count = sum(r.count for r in trained)
        metrics.counters[TRAINED] += count
        keys = sorted(set().union(*(r.stats for r in trained))) if trained else []
        stats = {k: float(np.mean([r.stats[k] for r in trained if k in r.stats])) for k in keys}
        if trained:
            metrics.info["learner"] = stats
        rank0 = next((r for r in trained if r.weights is not None), None)
        if rank0 is not None:  # every rank holds these weights
            ws.local_policy.set_weights(rank0.weights)
        ws.local_policy.set_global_vars(ctx.run_state.global_vars())
        return TrainInfo(stats, count)

    return report


@register_lowering("MetaUpdate")
def _meta_update(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    import ray

    from plangraph.errors import BuildError
    from plangraph.flow import deadlines
    from plangraph.rl.meta_adaptation import (
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
