"""A2C, synchronous advantage actor-critic (Mnih et al. 2016), as in RLlib Flow.

Bulk-sync rollouts from every worker, concatenated into train batches of at least
``train_batch_size`` env steps, one optimizer step per batch, weights broadcast after each
step::

    rollouts = ParallelRollouts(workers, mode="bulk_sync")
    train_op = rollouts.combine(ConcatBatches(min_batch_size=config["train_batch_size"]))
                       .for_each(TrainOneStep(workers))
    return StandardMetricsReporting(train_op, workers, config)
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ConcatBatches,
    ParallelRollouts,
    StandardMetricsReporting,
    TrainOneStep,
    worker_set,
)

cfg = PlanConfig(
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=32,  # env steps per sub-env: 2 x 8 x 32 = 512 per rollout item
    train_batch_size=512,  # env steps per optimizer step
    lr=1e-3,
    gamma=0.99,
    gae_lambda=1.0,
    entropy_coeff=0.01,
    vf_loss_coeff=0.5,
    min_iter_time_s=0.0,
)

rollouts = ParallelRollouts(mode="bulk_sync", id="rollouts")
train = rollouts.combine(ConcatBatches(min_batch_size=cfg.train_batch_size, id="concat")).for_each(
    TrainOneStep(id="train")
)
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="a2c",
    description="A2C: bulk-sync rollouts -> ConcatBatches -> TrainOneStep (one step per batch).",
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "a2c",
                "lr": cfg.lr,
                "gamma": cfg.gamma,
                "gae_lambda": cfg.gae_lambda,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
            },
        )
    },
)
