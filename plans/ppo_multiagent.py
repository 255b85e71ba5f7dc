"""PPO with one policy shared by every agent of a multi-agent env (parameter sharing).

``MultiAgentCartPole`` with 2 agents, both mapped to ``ppo_policy`` (``"agent_*"``): each
agent's trajectory is postprocessed on its own (GAE never crosses agents), and the
shared policy trains on the rows of both::

    ParallelRollouts(workers, mode="bulk_sync")
        .combine(ConcatBatches(min_batch_size, count_steps_by="agent_steps"))
        .for_each(TrainOneStep(num_sgd_iter, sgd_minibatch_size))

The train batch is counted in agent steps (both agents' rows), so one batch holds the
same number of rows as ``plans/ppo.py``'s; the settings are that plan's.
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
    env="MultiAgentCartPole",
    num_agents=2,
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=32,  # 2 x 8 x 32 = 512 env steps, up to 1024 agent steps
    train_batch_size=1024,  # agent steps per train batch
    num_sgd_iter=10,
    sgd_minibatch_size=256,
    lr=2e-3,
    lr_anneal_steps=300_000,  # agent steps of the shared policy
    gamma=0.98,
    gae_lambda=0.8,
    min_iter_time_s=0.0,
)

rollouts = ParallelRollouts(mode="bulk_sync", id="rollouts")
train = rollouts.combine(
    ConcatBatches(min_batch_size=cfg.train_batch_size, count_steps_by="agent_steps", id="concat")
).for_each(
    TrainOneStep(
        num_sgd_iter=cfg.num_sgd_iter, sgd_minibatch_size=cfg.sgd_minibatch_size, id="train"
    )
)
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="ppo_multiagent",
    description=(
        "PPO with one policy shared by all agents of MultiAgentCartPole: multi-agent "
        "rollouts -> ConcatBatches (agent steps) -> TrainOneStep."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            env_config={"num_agents": cfg.num_agents},
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policies={
                "ppo_policy": {
                    "algo": "ppo",
                    "lr": cfg.lr,
                    "lr_schedule": [[0, cfg.lr], [cfg.lr_anneal_steps, 0.0]],
                    "gamma": cfg.gamma,
                    "gae_lambda": cfg.gae_lambda,
                },
            },
            policy_mapping={"agent_*": "ppo_policy"},
        )
    },
)
