"""APPO: asynchronous PPO on IMPALA's dataflow, as in RLlib Flow's ``appo.py``.

IMPALA's plan (below) with the APPO policy (V-trace advantages in the PPO clipped
surrogate against a target network) and an ``UpdateTarget`` after ``Dequeue`` that syncs
the target network every ``target_update_freq`` env steps trained (RLlib's
``UpdateTargetAndKL``; the KL coefficient adapts at each sync when ``use_kl_loss``).

IMPALA (Espeholt et al. 2018), as in RLlib Flow's ``impala.py`` execution plan.

Sampling and learning overlap: rollout workers sample asynchronously, each fragment's
worker gets the learner's current weights (per-actor sync), fragments are concatenated
into train batches and put on a learner thread's in-queue; the thread trains with V-trace
(the off-policy correction for the lag between behaviour and learner policy) while the
driver keeps sampling. ``Concurrently(mode="async", output_indexes=[1])`` drives both
branches and emits the learner's results::

    batches = ParallelRollouts(mode="async").for_each(UpdateWorkerWeights())
                                            .combine(ConcatBatches(train_batch_size))
    enqueue_op = batches.for_each(Enqueue(learner))
    dequeue_op = Dequeue(learner).for_each(UpdateTarget(target_update_freq, unit="trained"))
    merged = Concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1])

Deviation from RLlib: weights are synced per rollout fragment, before ConcatBatches, so
every worker is refreshed after each of its fragments (RLlib zips the source actor after
ConcatBatches, so only the worker that completed a train batch gets weights).

Settings (tuned for CartPole-v1 with 2 rollout workers; ``tools/train_all.py`` prints the
learning table).
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ConcatBatches,
    Concurrently,
    Dequeue,
    Enqueue,
    ParallelRollouts,
    StandardMetricsReporting,
    UpdateTarget,
    UpdateWorkerWeights,
    learner_thread,
    worker_set,
)

cfg = PlanConfig(
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=32,  # 8 x 32 = 256 env steps per fragment
    train_batch_size=512,  # env steps per learner update
    num_async=2,  # sample requests in flight per worker
    max_weight_sync_delay=1,  # fragments of one worker between two weight syncs to it
    learner_queue_size=16,  # train batches waiting for the learner, at most
    num_sgd_iter=1,  # passes over each train batch
    lr=1e-3,
    gamma=0.99,
    clip_param=0.4,
    target_update_freq=1_024,  # env steps trained between target-network syncs
    entropy_coeff=0.01,
    vf_loss_coeff=0.5,
    min_env_steps_per_iter=5_000,
)

batches = (
    ParallelRollouts(mode="async", num_async=cfg.num_async, id="rollouts")
    .for_each(UpdateWorkerWeights(max_weight_sync_delay=cfg.max_weight_sync_delay, id="sync"))
    .combine(ConcatBatches(min_batch_size=cfg.train_batch_size, id="concat"))
)
enqueue_op = batches.for_each(Enqueue(queue="@learner", id="enqueue"))
dequeue_op = Dequeue(queue="@learner", id="dequeue").for_each(
    UpdateTarget(freq=cfg.target_update_freq, unit="trained", id="target")
)
merged = Concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1], id="concurrently")
metrics = StandardMetricsReporting(
    merged, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="appo",
    description=(
        "APPO: IMPALA's async dataflow with the APPO policy (V-trace + clipped surrogate) "
        "and UpdateTarget(unit=trained) after Dequeue."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "appo",
                "clip_param": cfg.clip_param,
                "lr": cfg.lr,
                "gamma": cfg.gamma,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
            },
        ),
        "learner": learner_thread(
            inqueue_size=cfg.learner_queue_size, num_sgd_iter=cfg.num_sgd_iter
        ),
    },
)
