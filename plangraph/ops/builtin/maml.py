"""MAML's operators (Finn et al. 2017; RLlib 1.x ``rllib/agents/maml/maml.py``).

``MAMLInnerAdaptation`` runs on the rollout workers: each adapts its own copy of the
policy to its own task (``plangraph.algorithms.maml.adaptation.inner_adaptation``);
``MetaUpdate`` runs on the driver: the outer step through the inner one, the weight
broadcast and the next tasks. Implementations: ``plangraph/runtime/ops/maml.py``.
"""

from __future__ import annotations

from pydantic import Field

from plangraph.ops.builtin._shared import WORKERS_READ, WORKERS_WRITE, ResourceRef, workers_field
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams

__all__ = [
    "MAMLInnerAdaptation",
    "MAMLInnerAdaptationParams",
    "MetaUpdate",
    "MetaUpdateParams",
]


class MAMLInnerAdaptationParams(OpParams):
    """Each rollout worker adapts its copy of the MAML policy to its own task.

    One item is one round: every rollout worker samples a fragment ``D^0`` with the
    meta-policy on the task the driver set, takes ``inner_adaptation_steps`` inner SGD
    steps of size ``inner_lr`` on its own copy of the policy, each followed by a fresh
    fragment ``D^j`` of the adapted policy, and restores the meta-weights; all of this
    inside the worker's actor (``plangraph.algorithms.maml.adaptation.inner_adaptation``,
    a per-shard ``fn(worker, item)``). The driver receives ``list[AdaptedTask]``, one per
    worker in worker order, and adds all their env steps to ``num_env_steps_sampled`` and
    the episodes of the adapted policy (``D^k``) to the episode window. With
    ``num_workers == 0`` the local worker adapts in the driver.
    """

    workers: ResourceRef = workers_field()


MAMLInnerAdaptation = register_op(
    "MAMLInnerAdaptation",
    category="source",
    apply="source",
    output="list[AdaptedTask]",
    params=MAMLInnerAdaptationParams,
    resources=WORKERS_READ,
    placement="actors",
    builtin=True,
)


class MetaUpdateParams(OpParams):
    """MAML's outer step on the driver (Finn et al. 2017, Algorithm 3, line 10).

    Collects rounds of ``AdaptedTask`` until it holds ``meta_batch_size`` tasks or more,
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
