"""Built-in train operators: learner updates, gradients, and target-network syncs.

Implementations: ``plangraph/runtime/ops/train.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from plangraph.ops.builtin._shared import (
    WORKERS_READ,
    WORKERS_WRITE,
    PolicyIds,
    ResourceRef,
    policies_field,
    workers_field,
)
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams
from plangraph.ops.sizes import MAX_BATCH, MAX_PASSES, MAX_WINDOW

__all__ = [
    "ApplyGradients",
    "ApplyGradientsParams",
    "AverageGradients",
    "AverageGradientsParams",
    "ComputeGradients",
    "ComputeGradientsParams",
    "DDPPOReport",
    "DDPPOReportParams",
    "DDPPOTrainOnShard",
    "DDPPOTrainOnShardParams",
    "Dequeue",
    "DequeueParams",
    "Enqueue",
    "EnqueueParams",
    "MetaUpdate",
    "MetaUpdateParams",
    "TrainOneStep",
    "TrainOneStepParams",
    "UpdateKL",
    "UpdateKLParams",
    "UpdateTarget",
    "UpdateTargetParams",
    "UpdateWorkerWeights",
    "UpdateWorkerWeightsParams",
]


class TrainOneStepParams(OpParams):
    """Update the learner policy on a batch, then broadcast weights to the rollout workers.

    ``num_sgd_iter == 1`` and ``sgd_minibatch_size == 0``: exactly one optimizer step on the
    whole batch (A2C). Otherwise ``num_sgd_iter`` epochs over shuffled minibatches of
    ``sgd_minibatch_size`` rows (PPO); stats are the last epoch's mean. Adds the batch's
    env steps once to counter ``num_env_steps_trained``.

    The broadcast follows every update by default. A replay plan that runs ``k`` updates
    between two rollout rounds (DQN: round-robin weight ``k``) may set
    ``update_workers_every=k``: the workers then receive the weights once, after the last
    update of the round, which is what their next rollout would have used anyway.

    Multi-agent: a ``MultiAgentBatch`` trains each policy of ``policies`` (every policy in
    the batch when empty) on its own rows, with its own global vars; a ``SampleBatch``
    (replayed rows of one policy) trains the one policy ``policies`` names. Adds each
    policy's rows to ``num_agent_steps_trained/<id>`` (and ``num_agent_steps_trained``),
    the env steps once to ``num_env_steps_trained``, and broadcasts only the trained
    policies' weights; the learner stats are per policy
    (``policies/<id>/learner`` in the result).
    """

    workers: ResourceRef = workers_field()
    policies: PolicyIds = policies_field(
        "the policies trained (empty: every policy in the batch; exactly one for a "
        "SampleBatch of replayed rows)"
    )
    num_sgd_iter: int = Field(1, ge=1, le=MAX_PASSES, description="Epochs over each train batch.")
    sgd_minibatch_size: int = Field(
        0, ge=0, le=MAX_BATCH, description="Rows (env steps) per minibatch; 0 = the whole batch."
    )
    update_workers_every: int = Field(
        1,
        ge=1,
        le=MAX_WINDOW,
        description=(
            "Broadcast the weights after every n-th update (1: after each update). Rollouts "
            "that run between two broadcasts use weights up to n - 1 updates old."
        ),
    )


TrainOneStep = register_op(
    "TrainOneStep",
    category="train",
    apply="for_each",
    inputs=["SampleBatch | MultiAgentBatch"],
    output="TrainInfo",
    params=TrainOneStepParams,
    resources=WORKERS_WRITE,
    learns=True,
    builtin=True,
)


class ComputeGradientsParams(OpParams):
    """Compute the learner's gradients on a batch without applying them.

    Emits ``GradInfo``: the gradient arrays, the learner stats, and the batch's env steps.
    Touches no counter.
    """

    workers: ResourceRef = workers_field()


ComputeGradients = register_op(
    "ComputeGradients",
    category="train",
    apply="for_each",
    inputs=["SampleBatch"],
    output="GradInfo",
    params=ComputeGradientsParams,
    resources=WORKERS_READ,
    learns=True,
    builtin=True,
)


class AverageGradientsParams(OpParams):
    """Combine a list of ``GradInfo`` into one: the **mean** of the gradients weighted by
    env steps, and the sum of their env steps.

    ``g = sum_k (n_k / N) * g_k`` with ``n_k`` the env steps of microbatch ``k`` and
    ``N = sum_k n_k``: for a per-row-mean loss this is exactly the gradient of the
    concatenated train batch, also when the microbatches differ in size. With A2C's
    ``normalize_advantages`` the advantages are standardised by the mean and std of all
    ``N`` rows (each microbatch sends its advantage moments and a split gradient;
    ``plangraph/rl/advantage_norm.py``), never per microbatch. Learner stats are
    row-weighted means.

    Deliberate deviation from RLlib 1.x, which summed the gradients: a mean keeps the
    step size independent of the number of microbatches (DESIGN.md).
    """


AverageGradients = register_op(
    "AverageGradients",
    category="train",
    apply="for_each",
    inputs=["list[GradInfo]"],
    output="GradInfo",
    params=AverageGradientsParams,
    builtin=True,
)


class ApplyGradientsParams(OpParams):
    """One optimizer step with the given gradients, then (by default) a weight broadcast.

    Adds the gradients' env steps to counter ``num_env_steps_trained``.

    ``update_workers="source"`` (A3C, RLlib's ``update_all=False``): the new weights go
    only to the rollout worker that computed the gradients (``AsyncGradients``), one
    ``ray.put`` and one call, tagged with the learner's version (the updates applied so
    far, counter ``num_updates/<node id>``); counts ``num_weight_syncs`` and reports
    ``policy_lag``, the updates applied between the weights the worker differentiated
    with and the ones its gradients are applied to. Gradients computed on the driver
    (``ComputeGradients``, ``AverageGradients``) have no source worker: PG182.
    """

    workers: ResourceRef = workers_field()
    update_workers: bool | Literal["source"] = Field(
        True,
        description=(
            "Send the new weights to every rollout worker (true), to none (false), or only "
            'to the worker that computed the gradients ("source", A3C).'
        ),
    )


ApplyGradients = register_op(
    "ApplyGradients",
    category="train",
    apply="for_each",
    inputs=["GradInfo"],
    output="TrainInfo",
    params=ApplyGradientsParams,
    resources=WORKERS_WRITE,
    learns=True,
    builtin=True,
)


class UpdateTargetParams(OpParams):
    """Sync the target network (DQN, APPO) with the online network every ``freq`` env steps.

    SAC's target critics are synced the same way. Fires each time the chosen counter
    (``num_env_steps_sampled`` or ``num_env_steps_trained``) passes a multiple of ``freq``;
    ``freq == 0`` syncs after every item that saw progress. ``tau == 1`` copies the online
    network (a hard update, as DQN); ``tau < 1`` moves the target towards it,
    ``target <- (1 - tau) target + tau online`` (Polyak averaging, as SAC with ``freq = 0``
    and ``unit = "trained"``: after every train step). Counts syncs in
    ``num_target_updates``. Passes its input through.

    Multi-agent: syncs the policies of ``policies`` (every policy with a target network
    when empty), each when its own counter (``num_agent_steps_sampled/<id>`` or
    ``num_agent_steps_trained/<id>``, agent steps) passes a multiple of ``freq``.
    """

    workers: ResourceRef = workers_field()
    policies: PolicyIds = policies_field(
        "the policies whose target networks are synced (empty: all that have one)"
    )
    freq: int = Field(500, ge=0, description="Env steps between target-network syncs.")
    unit: Literal["sampled", "trained"] = Field(
        "sampled", description="Which env-step counter `freq` is measured in."
    )
    tau: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="Fraction of the way the target moves to the online network at each "
        "sync: 1 = copy (hard update), e.g. 0.005 = Polyak averaging (SAC).",
    )


UpdateTarget = register_op(
    "UpdateTarget",
    category="train",
    apply="for_each",
    inputs=["TrainInfo"],
    output="TrainInfo",
    params=UpdateTargetParams,
    resources=WORKERS_WRITE,
    builtin=True,
)


class UpdateKLParams(OpParams):
    """Adapt the learner policy's KL penalty coefficient after each training step (RLlib
    1.x PPO's ``UpdateKL``, ``rllib/agents/ppo/ppo.py``, and the policy's ``update_kl``).

    Reads the mean ``kl`` = KL(pi_old || pi) the training step measured (the learner stats
    of its ``TrainInfo``: the last SGD epoch's mean over minibatches) and moves the
    coefficient as RLlib does (the adaptive KL penalty of Schulman et al. 2017, sec. 4)::

        if kl > 2 * kl_target:   kl_coeff *= 1.5
        elif kl < 0.5 * kl_target: kl_coeff *= 0.5

    with ``kl_target`` the policy's setting. The coefficient lives on the learner policy
    (``kl_coeff`` in its state, saved in checkpoints); rollout workers only act, so nothing
    is broadcast (a loss computed on the rollout workers, ``AsyncGradients``, would use
    their copies' initial coefficient: not supported yet). Reports it as learner stat
    ``kl_coeff`` (the value the next step trains with). Passes its input through. The
    policy needs a KL penalty (PPO; PG170 otherwise); with ``kl_coeff = 0`` it stays 0, as
    in RLlib.

    Multi-agent: each policy of ``policies`` (every trained policy with a KL penalty when
    empty) is adapted from its own ``<id>/kl``; a policy not trained in this step is left
    as it is.
    """

    workers: ResourceRef = workers_field()
    policies: PolicyIds = policies_field(
        "the policies whose KL coefficient is adapted (empty: every trained one with a KL penalty)"
    )


UpdateKL = register_op(
    "UpdateKL",
    category="train",
    apply="for_each",
    inputs=["TrainInfo"],
    output="TrainInfo",
    params=UpdateKLParams,
    resources=WORKERS_WRITE,
    builtin=True,
)

# -- asynchronous learning (IMPALA/APPO) ----------------------------------------------------

_QUEUE_DESC = 'The LearnerThread resource, "@id".'


class EnqueueParams(OpParams):
    """Put each train batch on a learner thread's in-queue and pass it through.

    The learner thread trains on it in the background (IMPALA's ``Enqueue``). A full queue
    applies back-pressure: the operator yields not-ready and offers the *same* batch again
    on the next pull, so no batch is ever dropped. Adds the batch's env steps to counter
    ``num_env_steps_enqueued``.
    """

    queue: ResourceRef = Field(description=_QUEUE_DESC)


Enqueue = register_op(
    "Enqueue",
    category="train",
    apply="for_each",
    inputs=["SampleBatch"],
    output="SampleBatch",
    params=EnqueueParams,
    resources={"queue": ("LearnerThread", "write")},
    learns=True,
    builtin=True,
)


class DequeueParams(OpParams):
    """Stream the learner thread's results: one ``TrainInfo`` per trained batch.

    A source (IMPALA's ``Dequeue``): not-ready while the out-queue is empty, so a
    ``Concurrently(mode="async")`` keeps driving the sampling branch. Adds each batch's env
    steps once to counter ``num_env_steps_trained`` and reports the learner stats,
    including ``policy_lag`` (learner version minus the batch's behaviour version). Raises
    the learner thread's error, naming this node, if the thread died.
    """

    queue: ResourceRef = Field(description=_QUEUE_DESC)


Dequeue = register_op(
    "Dequeue",
    category="train",
    apply="source",
    output="TrainInfo",
    params=DequeueParams,
    resources={"queue": ("LearnerThread", "read")},
    builtin=True,
)


class UpdateWorkerWeightsParams(OpParams):
    """Send the learner's current weights to the rollout worker that produced each batch.

    Per-actor weight sync (RLlib's ``zip_with_source_actor`` + ``UpdateWorkerWeights``):
    after every ``max_weight_sync_delay`` batches *of one worker*, that worker alone gets
    the weights of the current learner version (one ``ray.put`` per version, shared by all
    workers). A batch here is one rollout fragment (``rollout_fragment_length`` x
    ``num_envs_per_worker`` env steps): place it right after an ``async``
    ``ParallelRollouts``, before ``ConcatBatches``. Counts ``num_weight_syncs``; passes the
    batch through.
    """

    workers: ResourceRef = workers_field()
    max_weight_sync_delay: int = Field(
        1,
        ge=1,
        le=MAX_WINDOW,
        description="Rollout fragments of one worker between two weight syncs to it.",
    )


UpdateWorkerWeights = register_op(
    "UpdateWorkerWeights",
    category="train",
    apply="for_each",
    inputs=["SampleBatch"],
    output="SampleBatch",
    params=UpdateWorkerWeightsParams,
    resources=WORKERS_WRITE,
    builtin=True,
)


class DDPPOTrainOnShardParams(OpParams):
    """DD-PPO's per-shard step (Wijmans et al. 2020; RLlib 1.x ``ddppo.py``): runs inside
    each rollout worker on the fragments it samples (``ParallelRollouts(mode="raw")``),
    and trains the worker's own policy on them; there is no learner in the driver.

    The workers form a ``torch.distributed`` process group (backend ``gloo``) among
    themselves: rank ``worker_index - 1``, rank 0 finds its node's address and a free port
    and publishes it through a small rendezvous actor, every worker calls
    ``init_process_group(init_method="tcp://HOST:PORT")`` and rank 0's weights and optimizer
    state are broadcast. Per item, the worker runs its policy's ``num_sgd_iter`` epochs of
    ``sgd_minibatch_size``-row minibatches on its own rows, and before each optimizer step
    all-reduces (averages) the minibatch's gradients with its peers, so every worker takes
    the same step and keeps the same weights. Emits one ``ShardTrainResult`` per item (its
    learner stats, env steps, episodes; rank 0 adds its weights). A worker that dies stops
    the round: the survivors roll back, return their rows untrained and leave the group;
    the replacement (``GatherShards``' restart of the dead shard) sits that round out, and
    on the next item all workers form a new group in which a survivor's state is
    broadcast. The group is destroyed when the run stops. Gather it with
    ``GatherShards(mode="batch")`` (a barrier: one round of every worker) into
    ``DDPPOReport``. Needs the ``ddppo`` algorithm and ``num_workers >= 1``.
    """

    workers: ResourceRef = workers_field()


DDPPOTrainOnShard = register_op(
    "DDPPOTrainOnShard",
    category="train",
    apply="for_each",
    inputs=["Shard[SampleBatch]"],
    output="Shard[ShardTrainResult]",
    params=DDPPOTrainOnShardParams,
    resources=WORKERS_WRITE,
    placement="shard",
    learns=True,
    builtin=True,
)


class DDPPOReportParams(OpParams):
    """What the driver does in DD-PPO: gathers metrics. Takes one round of
    ``DDPPOTrainOnShard`` results (``GatherShards(mode="batch")``) and emits one
    ``TrainInfo``: the workers' learner stats averaged, the env steps they trained on
    (added to ``num_env_steps_trained``; rows of a stopped round count as sampled, not
    trained). Copies rank 0's weights into the driver's copy of the policy (what
    checkpoints save and evaluation acts with); the driver never steps an optimizer.
    """

    workers: ResourceRef = workers_field()


DDPPOReport = register_op(
    "DDPPOReport",
    category="train",
    apply="for_each",
    inputs=["list[ShardTrainResult]"],
    output="TrainInfo",
    params=DDPPOReportParams,
    resources=WORKERS_WRITE,
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
    learns=True,
    builtin=True,
)
