"""Ape-X DQN (Horgan et al. 2018), as in RLlib Flow's ``apex.py`` execution plan.

Distributed prioritized replay: rollout workers explore with per-worker epsilons and
sample asynchronously; each fragment goes to one replay shard (a Ray actor) as an object
ref, and its worker gets the learner's current weights. The learner pulls prioritized
batches from the shards asynchronously, trains on a learner thread, and sends the new
TD-error priorities back to the shard and slot each row came from; the target network is
synced every ``target_network_update_freq`` env steps trained. ``Concurrently(mode="async",
output_indexes=[2])`` drives the three branches and emits the learner's results::

    store_op = ParallelRollouts(mode="async").for_each(StoreToReplay(replay_actors))
                                            .for_each(UpdateWorkerWeights())
    replay_op = ParallelReplay(replay_actors).for_each(Enqueue(learner))
    update_op = Dequeue(learner).for_each(UpdatePriorities(replay_actors))
                                .for_each(UpdateTarget(unit="trained"))
    merged = Concurrently([store_op, replay_op, update_op], mode="async", output_indexes=[2])

Settings (tuned for CartPole-v1 with 2 rollout workers; ``tools/train_all.py`` prints the
learning table: 5/5 seeds within 300,000 env steps, median about 146,000): 4 prioritized
shards of 25,000 env steps, PER alpha 0.6 with a *constant* IS exponent beta 0.4 as in
Ape-X (annealing beta to 1 made the Q-values diverge past the 1 / (1 - gamma) bound, here
and in the DQN plan with prioritized replay), train batches of 128 replayed transitions,
lr 3e-3, 3-step targets, a target sync every 8,192 env steps trained (64 updates). The
base epsilon anneals 1.0 -> 0.1 over 10,000 env steps and worker i of N explores with
epsilon ** (1 + 7 i / (N - 1)) (with 2 workers: 0.1 and 1e-8; a smaller base than Ape-X's
constant 0.4, because the learning target averages the training episodes of every worker,
the most exploratory one's included; 0.4 was not tried). The replay ratio is fixed by
the replay actors' ``training_intensity``: 8 env steps replayed per env step stored past
``learning_starts``. Without it the learner trained as fast as it could while the workers
sampled as fast as they could, 1 to 6 env steps per env step sampled depending on the
machine's load, and the same seed solved in one run and failed in another (4 in 5 seeds
solve with 4, 5 in 5 with 8).
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
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=16,  # 8 x 16 = 128 env steps per fragment
    num_async=2,  # sample requests in flight per rollout worker
    max_weight_sync_delay=1,  # fragments of one worker between two weight syncs to it
    num_replay_shards=4,
    buffer_size=100_000,  # replay capacity over all shards, env steps
    learning_starts=1_000,  # env steps stored (over all shards) before replay starts
    prioritized_replay=True,
    prioritized_replay_alpha=0.6,
    prioritized_replay_beta=0.4,  # IS exponent, constant as in Ape-X
    train_batch_size=128,  # transitions per replayed train batch
    replay_num_async=4,  # sample requests in flight per shard
    training_intensity=8.0,  # env steps replayed per env step stored past learning_starts
    learner_queue_size=16,  # replayed batches waiting for the learner, at most
    target_network_update_freq=8_192,  # env steps trained between target syncs
    lr=3e-3,
    gamma=0.99,
    n_step=3,
    exploration_epsilon=0.1,  # base epsilon after annealing from 1.0
    exploration_steps=10_000,  # env steps over which the base epsilon anneals
    worker_epsilon_alpha=7.0,  # epsilon_i = epsilon ** (1 + alpha * i / (N - 1))
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
    .for_each(UpdateTarget(freq=cfg.target_network_update_freq, unit="trained", id="target"))
)
merged = Concurrently(
    [store_op, replay_op, update_op], mode="async", output_indexes=[2], id="concurrently"
)
metrics = StandardMetricsReporting(
    merged, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="apex",
    description=(
        "Ape-X DQN: async rollouts -> StoreToReplay(replay actors) -> UpdateWorkerWeights; "
        "ParallelReplay -> Enqueue(learner); Dequeue(learner) -> UpdatePriorities -> "
        "UpdateTarget; under Concurrently(async, output_indexes=[2])."
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
                "n_step": cfg.n_step,
                "epsilon_final": cfg.exploration_epsilon,
                "epsilon_timesteps": cfg.exploration_steps,
                "per_worker_epsilon_alpha": cfg.worker_epsilon_alpha,
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
