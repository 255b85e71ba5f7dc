"""DDPG (Lillicrap et al. 2016: deterministic actor, one critic, target networks) on
Pendulum-v1.

The shape of ``plans/sac_pendulum.py``: two branches driven round-robin by one
``Concurrently``; rollouts are stored into the replay buffer, replayed batches train the
critic and the actor, and the target actor and critic follow the online ones by Polyak
averaging after every update (``UpdateTarget(freq=0, unit="trained", tau)``: the trained
counter moves with each update). Only the training branch's items (``output_indexes=[1]``)
reach metrics::

    store_op = ParallelRollouts(workers, mode="bulk_sync").for_each(StoreToReplay(buffer))
    replay_op = Replay(buffer).for_each(TrainOneStep(workers))
                              .for_each(UpdateTarget(workers, freq=0, unit="trained", tau=tau))
    train_op = Concurrently([store_op, replay_op], mode="round_robin", output_indexes=[1],
                            round_robin_weights=[1, k])

Settings (``tools/train_all.py`` prints the learning table; solved = mean return of the
last 100 training episodes >= -200, within 50,000 env steps): rounds of 32 env steps (2
workers x 1 env x 16) then 32 updates on 256 replayed transitions, so one update per env
step as in the paper; tau 0.005 (the paper: 0.001); Gaussian exploration noise 0.1 of the
half-range (the paper: an Ornstein-Uhlenbeck process); lr 1e-3 for the actor and the
critic (the RL Zoo's Pendulum DDPG; the paper's actor 1e-4 learns more slowly here);
64x64 ReLU networks instead of the paper's 400x300 (as ``sac_pendulum``); the first 1000
env steps act uniformly at random and fill the buffer before learning.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    Concurrently,
    LocalReplay,
    ParallelRollouts,
    StandardMetricsReporting,
    StoreToReplay,
    TrainOneStep,
    UpdateTarget,
    replay_buffer,
    worker_set,
)

cfg = PlanConfig(
    env="Pendulum-v1",
    num_workers=2,
    num_envs_per_worker=1,
    rollout_fragment_length=16,  # 2 x 1 x 16 = 32 env steps per rollout round
    train_batch_size=256,  # transitions per replayed train batch
    train_steps_per_rollout=32,  # round-robin weight of the replay branch: one update per step
    buffer_size=100_000,  # replay capacity, env steps
    learning_starts=1_000,  # env steps stored before replay starts
    random_timesteps=1_000,  # env steps of uniform random actions
    tau=0.005,  # Polyak averaging of the target networks, after every update
    actor_lr=1e-3,
    critic_lr=1e-3,
    gamma=0.99,
    hiddens=[64, 64],
    exploration_noise=0.1,  # action half-ranges
    min_env_steps_per_iter=1_000,
)

store_op = ParallelRollouts(mode="bulk_sync", id="rollouts").for_each(
    StoreToReplay(buffer="@replay", id="store")
)
replay_op = (
    LocalReplay(buffer="@replay", batch_size=cfg.train_batch_size, id="replay_batches")
    # The workers only sample between rounds: one broadcast after the round's last update.
    .for_each(TrainOneStep(update_workers_every=cfg.train_steps_per_rollout, id="train"))
    .for_each(UpdateTarget(freq=0, unit="trained", tau=cfg.tau, id="target"))
)
train_op = Concurrently(
    [store_op, replay_op],
    mode="round_robin",
    output_indexes=[1],
    weights=[1, cfg.train_steps_per_rollout],
    id="concurrently",
)
metrics = StandardMetricsReporting(
    train_op, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="ddpg",
    description=(
        "DDPG on Pendulum-v1: StoreToReplay and LocalReplay -> TrainOneStep -> "
        "UpdateTarget(soft, tau) under Concurrently(round_robin, output_indexes=[1])."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "ddpg",
                "actor_lr": cfg.actor_lr,
                "critic_lr": cfg.critic_lr,
                "gamma": cfg.gamma,
                "hiddens": cfg.hiddens,
                "random_timesteps": cfg.random_timesteps,
                "exploration_noise": cfg.exploration_noise,
            },
        ),
        "replay": replay_buffer(capacity=cfg.buffer_size, learning_starts=cfg.learning_starts),
    },
)
