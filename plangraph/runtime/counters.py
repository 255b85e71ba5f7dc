"""Names of the counters the built-in operators keep (env steps, RLlib Flow semantics).

``num_env_steps_sampled``: ParallelRollouts, every sub-env step once;
``num_env_steps_trained``: TrainOneStep / ApplyGradients, once per train batch (not per
minibatch pass); ``num_target_updates``: UpdateTarget syncs; ``num_worker_restarts``:
dead rollout workers replaced (ParallelRollouts; absent from the counters until one is);
``num_env_steps_enqueued`` and ``num_enqueue_retries`` (Enqueue: rows put on a learner
thread's in-queue, and pulls that found it full), ``num_weight_syncs`` (UpdateWorkerWeights).
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
