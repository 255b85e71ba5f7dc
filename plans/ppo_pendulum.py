"""PPO with a diagonal Gaussian policy on Pendulum-v1 (continuous torque, Box(-2, 2, (1,))).

The plan of ``plans/ppo.py`` (bulk-sync rollouts -> ConcatBatches -> TrainOneStep with SGD
epochs); only the env and the settings differ::

    rollouts.combine(ConcatBatches(min_batch_size=train_batch_size))
            .for_each(TrainOneStep(workers, num_sgd_iter, sgd_minibatch_size))

The policy samples ``a ~ N(mu(s), diag(exp(log_std))^2)`` with a state-independent
``log_std`` (Schulman et al. 2017); rollout workers clip a copy of each sample to the
torque bounds [-2, 2] to step the env, while the batch keeps the unclipped sample and its
log-probability, so the PPO ratio is that of the action the policy drew.

Settings (``tools/train_all.py`` prints the learning table; solved = mean return of the
last 100 training episodes >= -200): batches of 4096 env steps (2 workers x 8 envs x 256),
10 epochs of 256-row minibatches, lr 1e-3, gamma 0.95 and GAE lambda 0.95 (a short
horizon: swinging up and balancing pays off within tens of steps), no entropy bonus, and
no gradient clipping: Pendulum's returns are in the hundreds, so the value loss gradient
is large, and a clip of the *global* norm would scale the policy's gradient down with it
(Adam keeps the two separate networks' step sizes apart on its own).
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
    env="Pendulum-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=256,  # 2 x 8 x 256 = 4096 env steps per rollout round
    train_batch_size=4096,  # env steps per train batch
    num_sgd_iter=10,  # epochs per train batch
    sgd_minibatch_size=256,  # rows per minibatch: 160 Adam steps per batch
    lr=1e-3,
    gamma=0.95,
    gae_lambda=0.95,
    clip_param=0.2,
    entropy_coeff=0.0,
    vf_loss_coeff=0.5,
    log_std_init=0.0,  # initial std 1 (half the torque range)
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
    name="ppo_pendulum",
    description=(
        "PPO with a diagonal Gaussian policy on Pendulum-v1: bulk-sync rollouts -> "
        "ConcatBatches -> TrainOneStep with SGD epochs."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
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
            },
        )
    },
)
