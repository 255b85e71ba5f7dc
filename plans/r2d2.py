"""R2D2 (Kapturowski et al. 2019) on StatelessCartPole, with a local prioritized replay
buffer of sequences.

DQN's dataflow (``plans/dqn.py``): two branches driven round-robin by one
``Concurrently``; rollouts are stored into the replay buffer, replayed batches train the
learner and the target network is synced every ``target_network_update_freq`` env steps
sampled::

    store_op = ParallelRollouts(workers, mode="bulk_sync").for_each(StoreToReplay(buffer))
    replay_op = Replay(buffer).for_each(TrainOneStep(workers))
                              .for_each(UpdateTargetNetwork(workers, target_update_freq))
    train_op = Concurrently([store_op, replay_op], mode="round_robin", output_indexes=[1],
                            round_robin_weights=[1, k])

What R2D2 changes is in the policy (``{"algo": "r2d2"}``) and the buffer's item
(``"sequence"``): each rollout worker carries every sub-env's LSTM state and cuts its
fragments into sequences of ``sequence_length`` env steps overlapping by
``sequence_overlap`` that never cross an episode end, each replayed from the state the
worker had at its first step; the learner unrolls the first ``burn_in`` steps without
loss or gradient, then trains on n-step double-Q targets under the value rescaling
``h``; each sequence's priority is ``0.9 max + 0.1 mean`` of its |TD errors|.

Settings (tuned for StatelessCartPole with 2 rollout workers): rounds of 1,024 env steps
(2 workers x 8 sub-envs x 64), then ``train_steps_per_rollout`` updates of
``train_batch_size`` sequences each; sequences of 40 env steps (burn-in 10, overlap 20);
5-step targets, gamma 0.99; prioritized replay alpha 0.9, beta 0.6 (constant, as in the
paper) over 100,000 env steps; target sync every 2,048 env steps sampled (64 updates);
lr 1e-3; epsilon 1.0 -> 0.02 over 50,000 env steps; an LSTM of 64 units on a 64-unit
ReLU layer, reading the previous action. ``model`` is a config key: ``tools/train_all.py``
also measures the plan with an MLP (``r2d2_mlp``), which cannot see the velocities.
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
    env="StatelessCartPole",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=64,  # 2 x 8 x 64 = 1024 env steps per rollout round
    train_batch_size=16,  # sequences per replayed train batch
    train_steps_per_rollout=32,  # round-robin weight of the replay branch: updates per round
    buffer_size=100_000,  # replay capacity, env steps
    learning_starts=5_000,  # env steps stored before replay starts
    prioritized_replay=True,
    prioritized_replay_alpha=0.9,
    prioritized_replay_beta=0.6,  # IS exponent, constant as in R2D2
    target_network_update_freq=2_048,  # env steps sampled between target syncs (64 updates)
    lr=1e-3,
    gamma=0.99,
    n_step=5,
    sequence_length=40,  # env steps per replayed sequence, burn-in included
    sequence_overlap=20,  # env steps adjacent sequences of an episode share
    burn_in=10,  # steps that only unroll the stored state
    exploration_steps=50_000,  # env steps over which epsilon anneals 1.0 -> 0.02
    model={
        "type": "lstm",
        "hiddens": [64],
        "activation": "relu",
        "lstm_cell_size": 64,
        "lstm_use_prev_action": True,
        "lstm_use_prev_reward": False,
    },
    min_env_steps_per_iter=2_048,
)

store_op = ParallelRollouts(mode="bulk_sync", id="rollouts").for_each(
    StoreToReplay(buffer="@replay", id="store")
)
replay_op = (
    LocalReplay(buffer="@replay", batch_size=cfg.train_batch_size, id="replay_sequences")
    .for_each(TrainOneStep(id="train"))
    .for_each(UpdateTarget(freq=cfg.target_network_update_freq, unit="sampled", id="target"))
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
    name="r2d2",
    description=(
        "R2D2 on StatelessCartPole: rollouts carrying each sub-env's LSTM state -> "
        "StoreToReplay(sequences); LocalReplay(sequences) -> TrainOneStep (burn-in, "
        "n-step double-Q, value rescaling) -> UpdateTarget under Concurrently(round_robin)."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "r2d2",
                "lr": cfg.lr,
                "gamma": cfg.gamma,
                "n_step": cfg.n_step,
                "replay_sequence_length": cfg.sequence_length,
                "replay_sequence_overlap": cfg.sequence_overlap,
                "burn_in": cfg.burn_in,
                "epsilon_timesteps": cfg.exploration_steps,
                "model": cfg.model,
            },
        ),
        "replay": replay_buffer(
            capacity=cfg.buffer_size,
            learning_starts=cfg.learning_starts,
            prioritized=cfg.prioritized_replay,
            alpha=cfg.prioritized_replay_alpha,
            beta=cfg.prioritized_replay_beta,
            beta_final=cfg.prioritized_replay_beta,
            item="sequence",
        ),
    },
)
