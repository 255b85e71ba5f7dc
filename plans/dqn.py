"""DQN (Mnih et al. 2015) with double-Q targets, as in RLlib Flow's ``dqn.py``.

Two branches driven round-robin by one ``Concurrently``: rollouts are stored into the
replay buffer; replayed batches train the learner and the target network is synced every
``target_network_update_freq`` env steps sampled. Only the training branch's items
(``output_indexes=[1]``) reach metrics::

    store_op = ParallelRollouts(workers, mode="bulk_sync").for_each(StoreToReplay(buffer))
    replay_op = Replay(buffer).for_each(TrainOneStep(workers))
                              .for_each(UpdateTargetNetwork(workers, target_update_freq))
    train_op = Concurrently([store_op, replay_op], mode="round_robin", output_indexes=[1],
                            round_robin_weights=[1, k])

Settings (tuned for CartPole-v1 with 2 rollout workers; ``tools/train_all.py`` prints the
learning table): rounds of 256 env steps then 16 updates on 128 replayed transitions
(8 replayed transitions per env step), 3-step targets, target sync every 1024 env steps
(64 updates), lr 3e-3, epsilon 1.0 -> 0.02 over 10k env steps, 64x64 ReLU Q-network.
More updates per env step (64 per round at lr 1e-3) solve in slightly fewer env steps but
take twice the wall time. The weights are broadcast once per round, after the last update
and before the next rollouts, instead of after each of the 16 updates: the compiler's pass
``broadcast-coalescing`` derives it from the round-robin weight (``plangraph explain``
shows the executed ``update_workers_every=16``). The rollouts use the same weights, with
one ``ray.put`` per round instead of 16.
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
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=16,  # 2 x 8 x 16 = 256 env steps per rollout round
    train_batch_size=128,  # transitions per replayed train batch
    train_steps_per_rollout=16,  # round-robin weight of the replay branch: updates per round
    buffer_size=100_000,  # replay capacity, env steps
    learning_starts=1_000,  # env steps stored before replay starts
    prioritized_replay=False,
    target_network_update_freq=1_024,  # env steps between target syncs (4 rounds, 64 updates)
    target_update_unit="sampled",  # ... counted as env steps "sampled" or "trained"
    lr=3e-3,
    gamma=0.99,
    n_step=3,  # n-step Q-learning targets
    exploration_steps=10_000,  # env steps over which epsilon anneals 1.0 -> 0.02
    min_env_steps_per_iter=1_000,  # RLlib timesteps_per_iteration
)

store_op = ParallelRollouts(mode="bulk_sync", id="rollouts").for_each(
    StoreToReplay(buffer="@replay", id="store")
)
replay_op = (
    LocalReplay(buffer="@replay", batch_size=cfg.train_batch_size, id="replay_batches")
    .for_each(TrainOneStep(id="train"))
    .for_each(
        UpdateTarget(freq=cfg.target_network_update_freq, unit=cfg.target_update_unit, id="target")
    )
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
    name="dqn",
    description=(
        "DQN: StoreToReplay and LocalReplay -> TrainOneStep -> UpdateTarget under "
        "Concurrently(round_robin, output_indexes=[1])."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "dqn",
                "lr": cfg.lr,
                "gamma": cfg.gamma,
                "epsilon_timesteps": cfg.exploration_steps,
                "n_step": cfg.n_step,
            },
        ),
        "replay": replay_buffer(
            capacity=cfg.buffer_size,
            learning_starts=cfg.learning_starts,
            prioritized=cfg.prioritized_replay,
        ),
    },
)
