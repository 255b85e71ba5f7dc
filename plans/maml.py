"""MAML (Finn, Abbeel & Levine 2017, Algorithm 3) on MAML's 2D navigation task family.

Each round, every rollout worker gets a task (a goal of ``Navigation2D``, which the agent
does not see), samples ``num_envs_per_worker`` episodes with the meta-policy, takes one
inner policy-gradient step (``inner_lr``) on its own copy of the policy and samples as
many episodes again with the adapted policy, all inside its actor
(``MAMLInnerAdaptation``, a per-shard operator); ``GatherShards(mode="batch")`` brings
each round's tasks to the driver. The driver collects ``meta_batch_size`` tasks, takes
``maml_optimizer_steps`` Adam steps on the outer loss (PPO's clipped surrogate on the
adapted policies' episodes, differentiated through the inner step), broadcasts the
meta-weights and sets new tasks (``MetaUpdate``), as RLlib 1.x's ``maml.py``::

    rollouts = ParallelRollouts(mode="raw")             # Shard[SampleBatch], each worker
    adapted = rollouts.for_each(MAMLInnerAdaptation())  # Shard[AdaptedTask], each worker
    rounds = GatherShards(adapted, mode="batch")        # list[AdaptedTask], the driver
    StandardMetricsReporting(rounds.combine(MetaUpdate(meta_batch_size)))

Settings: 2 workers x 10 episodes of 100 steps per task and adaptation step (the paper's
20 trajectories per task halved, to keep 3 seeds within ~30 minutes on 2 cores), meta
batches of 10 tasks (the paper: 20), one inner step of size 0.1 (the paper's alpha),
outer Adam at 3e-3 with 5 steps per meta-batch (RLlib's maml_optimizer_steps; its
lr 1e-3 moved the policy by a KL of 0.002-0.005 per meta-update here, so 3x that). The
measurement, on 10 held-out tasks and 3 seeds, is ``tools/eval_maml.py``;
``plangraph eval`` plays a checkpoint's meta-policy as saved, before any inner adaptation
(on the env's own task), and says so under its returns.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    GatherShards,
    MAMLInnerAdaptation,
    MetaUpdate,
    ParallelRollouts,
    StandardMetricsReporting,
    worker_set,
)

cfg = PlanConfig(
    env="Navigation2D",
    num_workers=2,  # one task per worker and round
    num_envs_per_worker=10,  # episodes per task and adaptation step
    rollout_fragment_length=100,  # the env's episode length: one episode per sub-env
    meta_batch_size=10,  # tasks per meta-update (5 rounds of 2 workers)
    inner_lr=0.1,
    inner_adaptation_steps=1,
    lr=3e-3,
    maml_optimizer_steps=5,
    clip_param=0.3,
    gamma=0.99,
    gae_lambda=1.0,
    log_std_init=-1.0,
    min_iter_time_s=0.0,
)

rollouts = ParallelRollouts(mode="raw", id="rollouts")
adapted = rollouts.for_each(MAMLInnerAdaptation(id="adapt"))
rounds = GatherShards(adapted, mode="batch", id="gather")
meta = rounds.combine(MetaUpdate(meta_batch_size=cfg.meta_batch_size, id="meta_update"))
metrics = StandardMetricsReporting(meta, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="maml",
    description=(
        "MAML on Navigation2D: raw rollouts -> MAMLInnerAdaptation in each worker (its "
        "policy copy adapted to its own task) -> GatherShards(batch) -> MetaUpdate through "
        "the inner step, new tasks."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "maml",
                "hiddens": [64, 64],
                "lr": cfg.lr,
                "inner_lr": cfg.inner_lr,
                "inner_adaptation_steps": cfg.inner_adaptation_steps,
                "maml_optimizer_steps": cfg.maml_optimizer_steps,
                "clip_param": cfg.clip_param,
                "gamma": cfg.gamma,
                "gae_lambda": cfg.gae_lambda,
                "log_std_init": cfg.log_std_init,
            },
        )
    },
)
