"""A2C, synchronous advantage actor-critic (Mnih et al. 2016), as in RLlib Flow.

Bulk-sync rollouts from every worker, concatenated into train batches of at least
``train_batch_size`` env steps, one optimizer step per batch, weights broadcast after each
step::

    rollouts = ParallelRollouts(workers, mode="bulk_sync")
    train_op = rollouts.combine(ConcatBatches(min_batch_size=config["train_batch_size"]))
                       .for_each(TrainOneStep(workers))
    return StandardMetricsReporting(train_op, workers, config)

Settings (tuned for CartPole-v1 with 2 rollout workers; ``tools/train_all.py`` prints the
learning table): one Adam step per 1024 env steps (16 sub-envs x 64 steps, so GAE runs
over 64-step pieces), lr 5e-3 annealed linearly to 0 over 400k env steps, gamma 0.98 and
GAE lambda 0.95. Higher lr or larger batches learn faster in wall time but collapse on
some seeds (the critic gets one step per batch and falls behind).
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
    rollout_fragment_length=64,  # 2 x 8 x 64 = 1024 env steps per rollout item
    train_batch_size=1024,  # env steps per optimizer step
    lr=5e-3,  # at env step 0, annealed linearly ...
    lr_final=0.0,  # ... to this
    lr_anneal_steps=400_000,  # ... at this many env steps sampled, then held
    gamma=0.98,
    gae_lambda=0.95,
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
                "lr_schedule": [[0, cfg.lr], [cfg.lr_anneal_steps, cfg.lr_final]],
                "gamma": cfg.gamma,
                "gae_lambda": cfg.gae_lambda,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
            },
        )
    },
)
