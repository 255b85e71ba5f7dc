"""DD-PPO: decentralized distributed PPO (Wijmans et al. 2020), as RLlib 1.x's ``ddppo.py``.

No learner in the driver: the rollout workers form a ``torch.distributed`` process group
(gloo) and each round every worker samples its own fragment, runs PPO's SGD epochs on its
own rows and all-reduces (averages) each minibatch's gradients with its peers before the
same optimizer step, so all workers keep identical weights; the driver gathers metrics.
Per-shard (the train step runs inside each rollout worker, on its own stream)::

    ParallelRollouts(mode="raw") -> DDPPOTrainOnShard -> GatherShards(mode="batch")
        -> DDPPOReport -> StandardMetricsReporting

Settings: PPO's CartPole plan (``plans/ppo.py``) cut per worker: each of the 2 workers
trains on its own 8 x 64 = 512 rows per round (1,024 env steps per round in all), 6 epochs
of 128-row minibatches per worker (one all-reduce each, so every optimizer step averages
256 rows, 24 steps per round as PPO's), gamma 0.98, GAE lambda 0.9, lr 3e-3 annealed
linearly to 0 over 150k env steps.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    DDPPOReport,
    DDPPOTrainOnShard,
    GatherShards,
    ParallelRollouts,
    StandardMetricsReporting,
    worker_set,
)

cfg = PlanConfig(
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=64,  # 8 x 64 = 512 env steps per worker per round
    num_sgd_iter=6,  # epochs over a worker's own rows per round
    sgd_minibatch_size=128,  # rows per worker per minibatch: 256 per averaged step
    lr=3e-3,  # at env step 0, annealed linearly ...
    lr_final=0.0,  # ... to this
    lr_anneal_steps=150_000,  # ... at this many env steps sampled, then held
    gamma=0.98,
    gae_lambda=0.9,
    clip_param=0.2,
    entropy_coeff=0.0,
    vf_loss_coeff=0.5,
    process_group_timeout_s=60.0,
    min_iter_time_s=0.0,
)

rollouts = ParallelRollouts(mode="raw", id="rollouts")  # Shard[SampleBatch]: each worker's
train = DDPPOTrainOnShard(rollouts, id="train")  # in each worker, on its own rows
rounds = GatherShards(train, mode="batch", id="gather")  # one list per round, to the driver
report = rounds.for_each(DDPPOReport(id="report"))  # stats, counters, rank 0's weights
metrics = StandardMetricsReporting(report, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="ddppo",
    description="DD-PPO: the rollout workers train themselves, all-reducing gradients.",
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "ddppo",
                "lr": cfg.lr,
                "lr_schedule": [[0, cfg.lr], [cfg.lr_anneal_steps, cfg.lr_final]],
                "gamma": cfg.gamma,
                "gae_lambda": cfg.gae_lambda,
                "clip_param": cfg.clip_param,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
                "num_sgd_iter": cfg.num_sgd_iter,
                "sgd_minibatch_size": cfg.sgd_minibatch_size,
                "process_group_timeout_s": cfg.process_group_timeout_s,
            },
        )
    },
)
