"""IMPALA with tree aggregation (Espeholt et al. 2018), as RLlib 1.x IMPALA with
``num_aggregation_workers=2`` (``rllib/execution/tree_agg.py``): ``plans/impala`` with the
weight sync and ``ConcatBatches`` moved onto two aggregation actors::

    train_batches = ParallelRollouts(mode="async")
                        .combine(AggregateBatches(train_batch_size, num_aggregation_workers=2))
    enqueue_op = train_batches.for_each(Enqueue(learner))
    dequeue_op = Dequeue(learner)
    merged = Concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1])

Each aggregator owns one of the two rollout workers (RLlib's round-robin assignment:
aggregator ``i`` owns workers ``i``, ``i + 2``, ...), keeps its sample requests in flight,
syncs the worker's weights after each of its fragments (the learner's current version,
which the driver hands the aggregator as an object ref once per version) and concatenates
the fragments (8 sub-envs x 32 steps = 256 env steps each) into train batches of 512 env
steps. The driver only receives whole train batches: the fragments go from worker to
aggregator.

Settings are ``plans/impala``'s (CartPole-v1, 2 rollout workers x 8 sub-envs, 512-step
train batches): the 2-core machine this was measured on runs 2 busy rollout workers (4
draw warning PG180), and the 2 aggregators reserve no CPU (they mostly wait). With more
cores, ``--set num_workers=4`` gives each aggregator 2 workers.
``tools/train_all.py`` prints the learning table.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    AggregateBatches,
    Concurrently,
    Dequeue,
    Enqueue,
    ParallelRollouts,
    StandardMetricsReporting,
    learner_thread,
    worker_set,
)

cfg = PlanConfig(
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=32,  # 8 x 32 = 256 env steps per fragment
    train_batch_size=512,  # env steps per learner update
    num_aggregation_workers=2,  # aggregation actors, one rollout worker each
    num_async=2,  # sample requests in flight per worker
    max_weight_sync_delay=1,  # fragments of one worker between two weight syncs to it
    learner_queue_size=16,  # train batches waiting for the learner, at most
    num_sgd_iter=1,  # passes over each train batch
    lr=1e-3,
    gamma=0.99,
    entropy_coeff=0.01,
    vf_loss_coeff=0.5,
    min_env_steps_per_iter=5_000,
)

train_batches = ParallelRollouts(mode="async", num_async=cfg.num_async, id="rollouts").combine(
    AggregateBatches(
        min_batch_size=cfg.train_batch_size,
        num_aggregation_workers=cfg.num_aggregation_workers,
        max_weight_sync_delay=cfg.max_weight_sync_delay,
        id="aggregate",
    )
)
enqueue_op = train_batches.for_each(Enqueue(queue="@learner", id="enqueue"))
dequeue_op = Dequeue(queue="@learner", id="dequeue")
merged = Concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1], id="concurrently")
metrics = StandardMetricsReporting(
    merged, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="impala_agg",
    description=(
        "IMPALA with 2 aggregation actors: async rollouts -> AggregateBatches (per-actor "
        "weight sync and concatenation on the aggregators) -> Enqueue to a learner thread "
        "(V-trace), Dequeue its results, under Concurrently(async)."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            # A dead worker stops the run under AggregateBatches (no replacement: PG217).
            max_worker_restarts=0,
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
