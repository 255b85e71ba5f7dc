"""Names of the counters the built-in operators keep (env steps, RLlib Flow semantics).

``num_env_steps_sampled``: ParallelRollouts, every sub-env step once;
``num_env_steps_trained``: TrainOneStep / ApplyGradients, once per train batch (not per
minibatch pass); ``num_target_updates``: UpdateTarget syncs; ``num_worker_restarts``:
dead rollout workers replaced (ParallelRollouts; absent from the counters until one is);
``num_env_steps_enqueued`` and ``num_enqueue_retries`` (Enqueue: rows put on a learner
thread's in-queue, and pulls that found it full), ``num_weight_syncs`` (UpdateWorkerWeights);
replay actors (Ape-X): ``num_env_steps_stored`` (StoreToReplay: rows sent to the shards),
``num_env_steps_replayed`` (ParallelReplay: rows sampled from them), ``num_priorities_sent``,
``num_priorities_applied`` and ``num_priorities_stale`` (UpdatePriorities: rows whose TD
error went back, was applied, or found its slot overwritten), ``num_replay_shard_restarts``
(dead shards replaced; absent until one is).
"""

from __future__ import annotations

from typing import Final

SAMPLED: Final = "num_env_steps_sampled"
TRAINED: Final = "num_env_steps_trained"
TARGET_UPDATES: Final = "num_target_updates"
RESTARTS: Final = "num_worker_restarts"
ENQUEUED: Final = "num_env_steps_enqueued"
ENQUEUE_RETRIES: Final = "num_enqueue_retries"
WEIGHT_SYNCS: Final = "num_weight_syncs"
STORED: Final = "num_env_steps_stored"
REPLAYED: Final = "num_env_steps_replayed"
PRIORITIES_SENT: Final = "num_priorities_sent"
PRIORITIES_APPLIED: Final = "num_priorities_applied"
PRIORITIES_STALE: Final = "num_priorities_stale"
SHARD_RESTARTS: Final = "num_replay_shard_restarts"
