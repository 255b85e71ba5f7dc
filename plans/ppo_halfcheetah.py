"""PPO with a diagonal Gaussian policy on HalfCheetah-v5 (MuJoCo; needs the ``mujoco`` extra).

The plan of ``plans/ppo.py`` (bulk-sync rollouts -> ConcatBatches -> TrainOneStep with SGD
epochs) on a 17-dimensional observation and a 6-dimensional torque action
(Box(-1, 1, (6,))); observations are standardised on the rollout workers by the
``normalize_observation`` wrapper (running mean and std pooled over the workers at each
weight broadcast, saved in checkpoints)::

    rollouts.combine(ConcatBatches(min_batch_size=train_batch_size))
            .for_each(TrainOneStep(workers, num_sgd_iter, sgd_minibatch_size))

Settings: the MuJoCo settings of Schulman et al. 2017 (PPO, table 3): 2048 env steps per
train batch (2 workers x 4 envs x 256), 10 epochs of 64-row minibatches, Adam lr 3e-4,
gamma 0.99, GAE lambda 0.95, clip 0.2, separate 64x64 tanh policy and value networks,
a state-independent log-std starting at 0. No gradient clipping (see
``plans/ppo_pendulum.py``: the value loss would scale the policy's step down with it).
``tools/train_all.py`` knows its task (mean return of the last 100 training episodes
>= 1500 within 1,000,000 env steps); it is not trained to that score on the project's
2-core machine (hours); ``tools/bench_throughput.py`` measures its env steps/s.
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
    env="HalfCheetah-v5",
    num_workers=2,
    num_envs_per_worker=4,
    rollout_fragment_length=256,  # 2 x 4 x 256 = 2048 env steps per rollout round
    train_batch_size=2048,  # env steps per train batch
    num_sgd_iter=10,  # epochs per train batch
    sgd_minibatch_size=64,  # rows per minibatch: 320 Adam steps per batch
    lr=3e-4,
    gamma=0.99,
    gae_lambda=0.95,
    clip_param=0.2,
    entropy_coeff=0.0,
    vf_loss_coeff=0.5,
    log_std_init=0.0,
    min_iter_time_s=0.0,
)

rollouts = ParallelRollouts(mode="bulk_sync", id="rollouts")
train = rollouts.combine(ConcatBatches(min_batch_size=cfg.train_batch_size, id="concat")).for_each(
    TrainOneStep(
        num_sgd_iter=cfg.num_sgd_iter, sgd_minibatch_size=cfg.sgd_minibatch_size, id="train"
    )
)
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="ppo_halfcheetah",
    description=(
        "PPO with a diagonal Gaussian policy on HalfCheetah-v5 (MuJoCo), observations "
        "normalised on the workers: bulk-sync rollouts -> ConcatBatches -> TrainOneStep with "
        "SGD epochs."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            wrappers=[{"name": "normalize_observation"}],
            policy={
                "algo": "ppo",
                "lr": cfg.lr,
                "gamma": cfg.gamma,
                "gae_lambda": cfg.gae_lambda,
                "clip_param": cfg.clip_param,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
                "log_std_init": cfg.log_std_init,
                "grad_clip": None,
                "model": {"type": "mlp", "hiddens": [64, 64], "activation": "tanh"},
            },
        )
    },
)
