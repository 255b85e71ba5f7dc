"""R2D2 (Kapturowski et al. 2019) on StatelessCartPole with Ape-X's distributed replay:
the paper's own setting, with replay actors instead of a local buffer.

The dataflow is Ape-X's (``plans/apex.py``): rollout workers sample asynchronously and
each fragment goes to one replay shard (a Ray actor holding a ``SequenceReplayBuffer``);
the learner pulls prioritized batches of sequences from the shards, trains on a learner
thread and sends each sequence's new priority (``0.9 max + 0.1 mean`` of its |TD
errors|) back to the shard and slot it came from; the target network is synced every
``target_network_update_freq`` env steps trained::

    store_op = ParallelRollouts(mode="async").for_each(StoreToReplay(replay_actors))
                                            .for_each(UpdateWorkerWeights())
    replay_op = ParallelReplay(replay_actors).for_each(Enqueue(learner))
    update_op = Dequeue(learner).for_each(UpdatePriorities(replay_actors))
                                .for_each(UpdateTarget(unit="trained"))
    merged = Concurrently([store_op, replay_op, update_op], mode="async", output_indexes=[2])

The policy and sequences are ``plans/r2d2.py``'s (LSTM of 64 units, sequences of 40 env
steps with burn-in 10 and overlap 20, 5-step targets, value rescaling); exploration is
per worker as in Ape-X and R2D2 (worker i of N: epsilon ** (1 + 7 i / (N - 1)), the base
epsilon annealed 1.0 -> 0.1 over 20,000 env steps). ``training_intensity`` fixes the
replay ratio (env steps replayed per env step stored), so the run learns the same on a
fast and a loaded machine. Not tuned beyond ``plans/r2d2``'s settings: seeds 0-2 reach a
mean return of 300 within 343,552-401,920 env steps (``tools/train_all.py --plans
r2d2_apex``), about 5 times the local plan's, which replays more env steps (about 13
against 8 per env step sampled) and explores less; an asynchronous plan is not
reproducible bit for bit, so these vary from run to run.
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
    env="StatelessCartPole",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=64,  # 8 x 64 = 512 env steps per fragment
    num_async=2,  # sample requests in flight per rollout worker
    max_weight_sync_delay=1,  # fragments of one worker between two weight syncs to it
    num_replay_shards=2,
    buffer_size=100_000,  # replay capacity over all shards, env steps
    learning_starts=5_000,  # env steps stored (over all shards) before replay starts
    prioritized_replay=True,
    prioritized_replay_alpha=0.9,
    prioritized_replay_beta=0.6,  # IS exponent, constant as in R2D2
    train_batch_size=32,  # sequences per replayed train batch
    replay_num_async=2,  # sample requests in flight per shard
    training_intensity=8.0,  # env steps replayed per env step stored past learning_starts
    learner_queue_size=8,  # replayed batches waiting for the learner, at most
    target_network_update_freq=65_536,  # env steps trained between target syncs
    lr=1e-3,
    gamma=0.99,
    n_step=5,
    sequence_length=40,
    sequence_overlap=20,
    burn_in=10,
    exploration_epsilon=0.1,  # base epsilon after annealing from 1.0
    exploration_steps=20_000,  # env steps over which the base epsilon anneals
    worker_epsilon_alpha=7.0,  # epsilon_i = epsilon ** (1 + alpha * i / (N - 1))
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

store_op = (
    ParallelRollouts(mode="async", num_async=cfg.num_async, id="rollouts")
    .for_each(StoreToReplay(buffer="@replay", id="store"))
    .for_each(UpdateWorkerWeights(max_weight_sync_delay=cfg.max_weight_sync_delay, id="sync"))
)
replay_op = ParallelReplay(
    buffer="@replay",
    batch_size=cfg.train_batch_size,
    num_async=cfg.replay_num_async,
    id="replay_sequences",
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
    name="r2d2_apex",
    description=(
        "R2D2 with Ape-X replay actors: async rollouts -> StoreToReplay(sequence shards) -> "
        "UpdateWorkerWeights; ParallelReplay -> Enqueue(learner); Dequeue(learner) -> "
        "UpdatePriorities -> UpdateTarget; under Concurrently(async, output_indexes=[2])."
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
                "epsilon_final": cfg.exploration_epsilon,
                "epsilon_timesteps": cfg.exploration_steps,
                "per_worker_epsilon_alpha": cfg.worker_epsilon_alpha,
                "model": cfg.model,
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
            item="sequence",
        ),
        "learner": learner_thread(inqueue_size=cfg.learner_queue_size),
    },
)
