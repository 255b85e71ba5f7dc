"""IMPALA with replay mixed in (Espeholt et al. 2018), as RLlib 1.x IMPALA with
``replay_proportion=1.0`` and ``replay_buffer_num_slots``: ``plans/impala`` with RLlib's
``MixInReplay`` between the per-actor weight sync and ``ConcatBatches``::

    batches = ParallelRollouts(mode="async").for_each(UpdateWorkerWeights())
                                            .combine(MixInReplay(num_slots, replay_proportion))
                                            .combine(ConcatBatches(train_batch_size))
    enqueue_op = batches.for_each(Enqueue(learner))
    dequeue_op = Dequeue(learner)
    merged = Concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1])

Each rollout fragment (8 sub-envs x 32 steps = 256 env steps, whole trajectory segments)
is stored in a buffer of ``replay_buffer_num_slots`` fragments and emitted together with,
on average, ``replay_proportion`` fragments replayed uniformly from it (with 1.0: exactly
one), so each train batch of 512 env steps is one fresh and one replayed fragment and the
learner trains twice the env steps that are sampled (``num_env_steps_trained`` ~ 2 x
``num_env_steps_sampled``; the replayed ones are counted in ``num_env_steps_replayed``). A
replayed fragment keeps its segments whole and the behaviour log-probs it was sampled
with, so V-trace corrects for its age as for any policy lag (``policy_lag`` reports it).

Settings are ``plans/impala``'s (CartPole-v1, 2 rollout workers) but for the learning rate,
halved to 5e-4 (RLlib's IMPALA default): with replay the learner makes twice the updates per
sampled env step, and at ``plans/impala``'s 1e-3 seed 0 collapsed to a one-action policy
(return 325 -> 9 near 316k env steps, never recovered within 1M; seeds 1 and 2 solved), where
5e-4 solved seeds 0-4 (the learning table). ``tools/train_all.py`` prints the learning table.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ConcatBatches,
    Concurrently,
    Dequeue,
    Enqueue,
    MixInReplay,
    ParallelRollouts,
    StandardMetricsReporting,
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
    lr=5e-4,  # half plans/impala's: twice the learner updates per sampled env step
    gamma=0.99,
    entropy_coeff=0.01,
    vf_loss_coeff=0.5,
    replay_proportion=1.0,  # replayed fragments per sampled fragment, on average
    replay_buffer_num_slots=16,  # fragments the replay buffer holds (4,096 env steps)
    min_env_steps_per_iter=5_000,
)

batches = (
    ParallelRollouts(mode="async", num_async=cfg.num_async, id="rollouts")
    .for_each(UpdateWorkerWeights(max_weight_sync_delay=cfg.max_weight_sync_delay, id="sync"))
    .combine(
        MixInReplay(
            num_slots=cfg.replay_buffer_num_slots,
            replay_proportion=cfg.replay_proportion,
            id="mixin",
        )
    )
    .combine(ConcatBatches(min_batch_size=cfg.train_batch_size, id="concat"))
)
enqueue_op = batches.for_each(Enqueue(queue="@learner", id="enqueue"))
dequeue_op = Dequeue(queue="@learner", id="dequeue")
merged = Concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1], id="concurrently")
metrics = StandardMetricsReporting(
    merged, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="impala_mixin",
    description=(
        "IMPALA with replay: async rollouts -> per-actor weight sync -> MixInReplay "
        "(replay_proportion 1.0) -> ConcatBatches -> Enqueue to a learner thread (V-trace), "
        "Dequeue its results, under Concurrently(async)."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "impala",
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
