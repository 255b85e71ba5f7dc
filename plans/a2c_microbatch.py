"""A2C with microbatching, as in RLlib Flow's ``a2c.py`` when ``microbatch_size`` is set.

Gradients are computed on microbatches of ``microbatch_size`` env steps, ``n =
ceil(train_batch_size / microbatch_size)`` of them are averaged (mean weighted by env
steps, see AverageGradients; with ``normalize_advantages`` the advantages are standardised
over all ``n`` microbatches) and applied in one optimizer step::

    rollouts.combine(ConcatBatches(min_batch_size=microbatch_size))
            .for_each(ComputeGradients(workers))
            .batch(n)
            .for_each(AverageGradients())
            .for_each(ApplyGradients(workers))

Settings: the a2c plan's (lr 5e-3 annealed to 0 over 400k env steps, gamma 0.98, GAE
lambda 0.95, 1024 env steps per optimizer step) with two 512-step microbatches per step;
each microbatch is one rollout item of 2 workers x 8 sub-envs x 32 steps.
"""

import math

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ApplyGradients,
    AverageGradients,
    ComputeGradients,
    ConcatBatches,
    ParallelRollouts,
    StandardMetricsReporting,
    worker_set,
)

cfg = PlanConfig(
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=32,  # 2 x 8 x 32 = 512 env steps per rollout item
    train_batch_size=1024,  # env steps per optimizer step
    microbatch_size=512,  # env steps per gradient computation: n = 2 per step
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
grads = rollouts.combine(ConcatBatches(min_batch_size=cfg.microbatch_size, id="concat")).for_each(
    ComputeGradients(id="grads")
)
train = (
    # n = ceil(train_batch_size / microbatch_size) stays derived: the JSON holds the
    # expression "${ceil(train_batch_size / microbatch_size)}", re-evaluated under --set.
    grads.batch(math.ceil(cfg.train_batch_size / cfg.microbatch_size), id="batch")
    .for_each(AverageGradients(id="average"))
    .for_each(ApplyGradients(id="apply"))
)
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="a2c_microbatch",
    description=(
        "A2C with microbatches: ConcatBatches(microbatch) -> ComputeGradients -> Batch(n) "
        "-> AverageGradients -> ApplyGradients, n = ceil(train_batch_size / microbatch_size)."
    ),
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
