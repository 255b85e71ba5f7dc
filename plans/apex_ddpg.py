"""Ape-X DDPG (Horgan et al. 2018, "Distributed Prioritized Experience Replay", sec. 3 and
appendix: Ape-X DPG), as ``plans/apex.py`` with the DDPG algorithm on Pendulum-v1.

Distributed prioritized replay: rollout workers explore with per-worker Gaussian noise and
sample asynchronously; each fragment goes to one replay shard (a Ray actor) as an object
ref, and its worker gets the learner's current weights. The learner pulls prioritized
batches from the shards asynchronously, trains on a learner thread (the critic's TD errors
become the rows' new priorities, sent back to the shard and slot each row came from), and
the target actor and critic follow the online ones by Polyak averaging after every update.
``Concurrently(mode="async", output_indexes=[2])`` drives the three branches and emits the
learner's results::

    store_op = ParallelRollouts(mode="async").for_each(StoreToReplay(replay_actors))
                                            .for_each(UpdateWorkerWeights())
    replay_op = ParallelReplay(replay_actors).for_each(Enqueue(learner))
    update_op = Dequeue(learner).for_each(UpdatePriorities(replay_actors))
                                .for_each(UpdateTarget(freq=0, unit="trained", tau=tau))
    merged = Concurrently([store_op, replay_op, update_op], mode="async", output_indexes=[2])

Exploration: rollout worker i of N acts with noise std ``0.4 ** (1 + 7 i / (N - 1))``
action half-ranges (DQN Ape-X's per-worker epsilons, sec. 4.1, applied to the noise std as
RLlib's Ape-X DDPG does to its noise scale; with 2 workers: 0.4 and 0.00066, one explorer
and one nearly greedy). The replay ratio is fixed by the replay actors'
``training_intensity``: 256 env steps replayed per env step stored past
``learning_starts``, i.e. one update of 256 rows per env step, as ``plans/ddpg``. The other
settings are ``plans/ddpg``'s (64x64 networks, lr 1e-3, tau 0.005) with Ape-X's
prioritization (alpha 0.6, constant beta 0.4). Not tuned for learning: no learning budget.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    Concurrently,
    Dequeue,
    Enqueue,
    ParallelReplay,
    ParallelRollouts,
    StandardMetricsReporting,
    StoreToReplay,
    UpdatePriorities,
    UpdateTarget,
    UpdateWorkerWeights,
    learner_thread,
    replay_actors,
    worker_set,
)

cfg = PlanConfig(
    env="Pendulum-v1",
    num_workers=2,
    num_envs_per_worker=4,
    rollout_fragment_length=16,  # 4 x 16 = 64 env steps per fragment
    num_async=2,  # sample requests in flight per rollout worker
    max_weight_sync_delay=1,  # fragments of one worker between two weight syncs to it
    num_replay_shards=4,
    buffer_size=100_000,  # replay capacity over all shards, env steps
    learning_starts=1_000,  # env steps stored (over all shards) before replay starts
    prioritized_replay=True,
    prioritized_replay_alpha=0.6,
    prioritized_replay_beta=0.4,  # IS exponent, constant as in Ape-X
    train_batch_size=256,  # transitions per replayed train batch
    replay_num_async=4,  # sample requests in flight per shard
    training_intensity=256.0,  # env steps replayed per env step stored past learning_starts
    learner_queue_size=16,  # replayed batches waiting for the learner, at most
    tau=0.005,  # Polyak averaging of the target networks, after every update
    actor_lr=1e-3,
    critic_lr=1e-3,
    gamma=0.99,
    hiddens=[64, 64],
    random_timesteps=1_000,  # env steps of uniform random actions
    exploration_noise=0.4,  # base noise std, action half-ranges
    worker_noise_alpha=7.0,  # std_i = std ** (1 + alpha * i / (N - 1))
    min_env_steps_per_iter=1_000,
)

store_op = (
    ParallelRollouts(mode="async", num_async=cfg.num_async, id="rollouts")
    .for_each(StoreToReplay(buffer="@replay", id="store"))
    .for_each(UpdateWorkerWeights(max_weight_sync_delay=cfg.max_weight_sync_delay, id="sync"))
)
replay_op = ParallelReplay(
    buffer="@replay",
    batch_size=cfg.train_batch_size,
    num_async=cfg.replay_num_async,
    id="replay_batches",
).for_each(Enqueue(queue="@learner", id="enqueue"))
update_op = (
    Dequeue(queue="@learner", id="dequeue")
    .for_each(UpdatePriorities(buffer="@replay", id="priorities"))
    .for_each(UpdateTarget(freq=0, unit="trained", tau=cfg.tau, id="target"))
)
merged = Concurrently(
    [store_op, replay_op, update_op], mode="async", output_indexes=[2], id="concurrently"
)
metrics = StandardMetricsReporting(
    merged, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="apex_ddpg",
    description=(
        "Ape-X DDPG: async rollouts (per-worker exploration noise) -> StoreToReplay(replay "
        "actors) -> UpdateWorkerWeights; ParallelReplay -> Enqueue(learner); "
        "Dequeue(learner) -> UpdatePriorities -> UpdateTarget(soft, tau); under "
        "Concurrently(async, output_indexes=[2])."
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
                "per_worker_noise_alpha": cfg.worker_noise_alpha,
            },
        ),
        "replay": replay_actors(
            num_shards=cfg.num_replay_shards,
            capacity=cfg.buffer_size,
            learning_starts=cfg.learning_starts,
            prioritized=cfg.prioritized_replay,
            alpha=cfg.prioritized_replay_alpha,
            beta=cfg.prioritized_replay_beta,
            beta_final=cfg.prioritized_replay_beta,
            training_intensity=cfg.training_intensity,
        ),
        "learner": learner_thread(inqueue_size=cfg.learner_queue_size),
    },
)
