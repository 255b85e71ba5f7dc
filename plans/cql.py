"""CQL (Kumar et al. 2020: conservative Q-learning, the CQL(H) variant on SAC, as RLlib's
CQL) on Pendulum-v1, trained only on a recorded dataset, evaluated online.

The shape of ``plans/bc.py`` with SAC's target update: batches of recorded transitions
streamed from the dataset by Ray Data (shuffled, epoch after epoch), one update of the
critics, the actor and the entropy temperature per batch, then the target critics move
towards the online ones by Polyak averaging::

    batches = ReadExperiences(dataset="@offline", batch_size=config["train_batch_size"])
    train_op = batches.for_each(TrainOneStep(workers))
                      .for_each(UpdateTarget(workers, freq=0, unit="trained", tau=tau))
    return StandardMetricsReporting(train_op, workers, config)

Each critic's loss adds ``min_q_weight * (logsumexp_a Q(s, a) - Q(s, a_data))``, the
logsumexp estimated from 10 uniform actions and 10 from the policy at ``s`` and at ``s'``;
the actor clones the recorded actions for its first ``bc_iters`` updates. The dataset
needs ``next_obs``: record it from a SAC (or TD3, DDPG) run, e.g.
``plangraph run plans/sac_pendulum.json --record DIR``, and point ``dataset`` at it
(``--set dataset=DIR``). Networks as ``plans/sac_pendulum.py`` (64x64 ReLU).
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ReadExperiences,
    StandardMetricsReporting,
    TrainOneStep,
    UpdateTarget,
    offline_data,
    worker_set,
)

cfg = PlanConfig(
    env="Pendulum-v1",
    dataset="datasets/pendulum-sac",  # a recorded dataset folder or URI (with next_obs)
    train_batch_size=256,  # transitions per update
    lr=1e-3,  # as plans/sac_pendulum.py (the RL Zoo's Pendulum SAC)
    gamma=0.99,
    tau=0.005,  # Polyak averaging of the target critics, after every update
    hiddens=[64, 64],
    min_q_weight=5.0,  # weight of the conservative term
    bc_iters=1_000,  # updates of behaviour cloning for the actor first
    shuffle_buffer_size=20_000,  # rows
    min_iter_time_s=0.0,
)

batches = ReadExperiences(dataset="@offline", batch_size=cfg.train_batch_size, id="read")
train = batches.for_each(TrainOneStep(id="train")).for_each(
    UpdateTarget(freq=0, unit="trained", tau=cfg.tau, id="target")
)
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="cql",
    description="CQL (conservative Q-learning on SAC): ReadExperiences (Ray Data) -> "
    "TrainOneStep -> UpdateTarget(soft, tau).",
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=0,
            num_envs_per_worker=1,
            policy={
                "algo": "cql",
                "lr": cfg.lr,
                "gamma": cfg.gamma,
                "hiddens": cfg.hiddens,
                "min_q_weight": cfg.min_q_weight,
                "bc_iters": cfg.bc_iters,
            },
        ),
        "offline": offline_data(
            path=cfg.dataset, shuffle_buffer_size=cfg.shuffle_buffer_size, num_readers=1
        ),
    },
)
