"""TD3 (Fujimoto et al. 2018: twin critics, delayed actor updates, target policy smoothing)
on Pendulum-v1.

The shape of ``plans/sac_pendulum.py``: two branches driven round-robin by one
``Concurrently``; rollouts are stored into the replay buffer, replayed batches train the
critics (every update) and the actor (every ``policy_delay``-th update), and the target
networks follow the online ones by Polyak averaging after every actor update, as in the
paper's Algorithm 1 (``UpdateTarget(freq=train_batch_size * policy_delay,
unit="trained", tau)``: the trained counter passes a multiple of ``freq`` on each actor
update). Only the training branch's items (``output_indexes=[1]``) reach metrics::

    store_op = ParallelRollouts(workers, mode="bulk_sync").for_each(StoreToReplay(buffer))
    replay_op = Replay(buffer).for_each(TrainOneStep(workers))
                              .for_each(UpdateTarget(workers, freq=512, unit="trained", tau=tau))
    train_op = Concurrently([store_op, replay_op], mode="round_robin", output_indexes=[1],
                            round_robin_weights=[1, k])

Settings (``tools/train_all.py`` prints the learning table; solved = mean return of the
last 100 training episodes >= -200, within 30,000 env steps): rounds of 32 env steps (2
workers x 1 env x 16) then 64 updates on 256 replayed transitions, so two updates per env
step (the paper: one; with one, seed 0 solved at 25,600 env steps, with two at 22,528,
and the 100-episode window cannot close before about 20,000); tau 0.005, exploration noise
0.1, target noise 0.2 clipped to 0.5, policy delay 2 (the paper's); lr 1e-3 (the paper's
first version; the RL Zoo's Pendulum TD3; gamma 0.98 as there made no difference at seed
0); 64x64 ReLU networks instead of 256x256 (as ``sac_pendulum``: Pendulum's observations
have 3 dimensions, and an update costs a fraction of the CPU); the first 1000 env steps act
uniformly at random and fill the buffer before learning.
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
    train_steps_per_rollout=64,  # round-robin weight of the replay branch: two updates per step
    buffer_size=100_000,  # replay capacity, env steps
    learning_starts=1_000,  # env steps stored before replay starts
    random_timesteps=1_000,  # env steps of uniform random actions
    policy_delay=2,  # updates per actor update
    target_update_freq=512,  # env steps trained between target updates: batch x delay
    tau=0.005,  # Polyak averaging of the target networks
    lr=1e-3,
    gamma=0.99,
    hiddens=[64, 64],
    exploration_noise=0.1,  # action half-ranges
    target_noise=0.2,  # action half-ranges
    target_noise_clip=0.5,  # action half-ranges
    min_env_steps_per_iter=1_000,
)

store_op = ParallelRollouts(mode="bulk_sync", id="rollouts").for_each(
    StoreToReplay(buffer="@replay", id="store")
)
replay_op = (
    LocalReplay(buffer="@replay", batch_size=cfg.train_batch_size, id="replay_batches")
    # The workers only sample between rounds: one broadcast after the round's last update.
    .for_each(TrainOneStep(update_workers_every=cfg.train_steps_per_rollout, id="train"))
    .for_each(UpdateTarget(freq=cfg.target_update_freq, unit="trained", tau=cfg.tau, id="target"))
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
    name="td3",
    description=(
        "TD3 on Pendulum-v1: StoreToReplay and LocalReplay -> TrainOneStep (actor every "
        "policy_delay-th update) -> UpdateTarget(soft, tau, after each actor update) under "
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
                "algo": "td3",
                "lr": cfg.lr,
                "gamma": cfg.gamma,
                "hiddens": cfg.hiddens,
                "random_timesteps": cfg.random_timesteps,
                "exploration_noise": cfg.exploration_noise,
                "policy_delay": cfg.policy_delay,
                "target_noise": cfg.target_noise,
                "target_noise_clip": cfg.target_noise_clip,
            },
        ),
        "replay": replay_buffer(capacity=cfg.buffer_size, learning_starts=cfg.learning_starts),
    },
)
