"""MAML's operators (Finn et al. 2017; RLlib 1.x ``rllib/agents/maml/maml.py``).

``MAMLInnerAdaptation`` is a per-shard operator, run inside each rollout worker: each
adapts its own copy of the policy to its own task
(``plangraph.algorithms.maml.adaptation.inner_adaptation``);
``MetaUpdate`` runs on the driver: the outer step through the inner one, the weight
broadcast and the next tasks. Implementations: ``plangraph/runtime/ops/maml.py``.
"""

from __future__ import annotations

from pydantic import Field

from plangraph.ops.builtin._shared import WORKERS_WRITE, ResourceRef, workers_field
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams

__all__ = [
    "MAMLInnerAdaptation",
    "MAMLInnerAdaptationParams",
    "MetaUpdate",
    "MetaUpdateParams",
]


class MAMLInnerAdaptationParams(OpParams):
    """Each rollout worker adapts its own copy of the MAML policy to its own task.

    A per-shard operator (``Shard[SampleBatch] -> Shard[AdaptedTask]``): it runs INSIDE
    every rollout worker actor, on each fragment ``D^0`` that worker sampled with the
    meta-policy on the task the driver set (``ParallelRollouts(mode="raw")``). It takes
    ``inner_adaptation_steps`` inner SGD steps of size ``inner_lr`` on the worker's copy
    of the policy, each followed by a fresh fragment ``D^j`` of the adapted policy,
    restores the meta-weights and emits an ``AdaptedTask`` (the task and ``D^0 .. D^k``;
    ``plangraph.algorithms.maml.adaptation.inner_adaptation``, a ``fn(worker, item)``).
    ``GatherShards`` brings them to the driver and counts them: all their env steps, and
    the episodes of the adapted policy (``D^k``), MAML's objective.
    """


MAMLInnerAdaptation = register_op(
    "MAMLInnerAdaptation",
    category="combine",
    inputs=["Shard[SampleBatch]"],
    output="Shard[AdaptedTask]",
    params=MAMLInnerAdaptationParams,
    placement="shard",
    builtin=True,
)


class MetaUpdateParams(OpParams):
    """MAML's outer step on the driver (Finn et al. 2017, Algorithm 3, line 10).

    Reads the rounds of ``GatherShards(mode="batch")`` (one ``AdaptedTask`` per worker) and
    collects them until it holds ``meta_batch_size`` tasks or more,
    then runs ``maml_optimizer_steps`` Adam steps on the outer loss
    (``MAMLPolicy.meta_update``: PPO's clipped surrogate on the adapted policies' rollouts,
    differentiated through the inner steps, which it recomputes with
    ``torch.func.functional_call`` and ``torch.autograd.grad(create_graph=True)``),
    broadcasts the new meta-weights and emits a ``TrainInfo`` (``num_env_steps_trained``:
    all the tasks' env steps). After every round it sets a new task on every rollout
    worker, drawn with the env's ``sample_tasks`` from this node's seeded RNG (the first
    ones before the first round). Learner stats add ``pre_adaptation_return_mean`` and
    ``post_adaptation_return_mean`` (mean episode return of ``D^0`` and ``D^k`` over the
    meta-batch's tasks) and ``adaptation_delta`` (their difference).
    """

    workers: ResourceRef = workers_field()
    meta_batch_size: int = Field(
        20, ge=1, le=10_000, description="Tasks per meta-update (rounds of num_workers tasks)."
    )


MetaUpdate = register_op(
    "MetaUpdate",
    category="train",
    apply="combine",
    inputs=["list[AdaptedTask]"],
    output="TrainInfo",
    params=MetaUpdateParams,
    resources=WORKERS_WRITE,
    builtin=True,
)
