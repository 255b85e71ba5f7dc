"""PPO with the adaptive KL penalty (Schulman et al. 2017, sec. 4), as RLlib 1.x's default
PPO: ``plans/ppo`` plus ``kl_coeff * KL(pi_old || pi)`` in the loss and the ``UpdateKL``
operator after ``TrainOneStep``, as in RLlib Flow's ``ppo.py``::

    rollouts.combine(ConcatBatches(min_batch_size=train_batch_size))
            .for_each(TrainOneStep(workers, num_sgd_iter, sgd_minibatch_size))
            .for_each(UpdateKL(workers))

After each training step ``UpdateKL`` reads the step's mean KL and adapts the learner
policy's coefficient (x1.5 above ``2 * kl_target``, x0.5 below ``kl_target / 2``); the
coefficient starts at ``kl_coeff`` = 0.2 with ``kl_target`` = 0.01 (RLlib's defaults), is
reported as learner stat ``kl_coeff`` and is saved in checkpoints with the policy.

The other settings are ``plans/ppo``'s (CartPole-v1, 2 rollout workers);
``tools/train_all.py`` prints the learning table. With them the measured KL mostly stays
below ``kl_target / 2`` (the clip range and the annealed learning rate keep the steps
small), so the coefficient halves towards 0 and the penalty matters early only: at seed 0,
``kl_coeff`` is 0.2 at 8k env steps, 0.0125 at 16k, 0.0003 at 33k and about 0 from 40k on.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ConcatBatches,
    ParallelRollouts,
    StandardMetricsReporting,
    TrainOneStep,
    UpdateKL,
    worker_set,
)

cfg = PlanConfig(
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=64,  # 2 x 8 x 64 = 1024 env steps per rollout item
    train_batch_size=1024,  # env steps per train batch
    num_sgd_iter=6,  # epochs per train batch
    sgd_minibatch_size=256,  # rows per minibatch: 24 Adam steps per batch
    lr=3e-3,  # at env step 0, annealed linearly ...
    lr_final=0.0,  # ... to this
    lr_anneal_steps=150_000,  # ... at this many env steps sampled, then held
    gamma=0.98,
    gae_lambda=0.9,
    clip_param=0.2,
    entropy_coeff=0.0,
    vf_loss_coeff=0.5,
    kl_coeff=0.2,  # initial weight of the KL penalty (RLlib's PPO default)
    kl_target=0.01,  # UpdateKL's target KL per training step (nats; RLlib's default)
    min_iter_time_s=0.0,
)

rollouts = ParallelRollouts(mode="bulk_sync", id="rollouts")
train = (
    rollouts.combine(ConcatBatches(min_batch_size=cfg.train_batch_size, id="concat"))
    .for_each(
        TrainOneStep(
            num_sgd_iter=cfg.num_sgd_iter, sgd_minibatch_size=cfg.sgd_minibatch_size, id="train"
        )
    )
    .for_each(UpdateKL(id="update_kl"))
)
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="ppo_kl",
    description=(
        "PPO with the adaptive KL penalty: bulk-sync rollouts -> ConcatBatches -> "
        "TrainOneStep with SGD epochs -> UpdateKL."
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
                "lr_schedule": [[0, cfg.lr], [cfg.lr_anneal_steps, cfg.lr_final]],
                "gamma": cfg.gamma,
                "gae_lambda": cfg.gae_lambda,
                "clip_param": cfg.clip_param,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
                "kl_coeff": cfg.kl_coeff,
                "kl_target": cfg.kl_target,
            },
        )
    },
)
