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

Offline data: ``num_env_steps_read`` (ReadExperiences: rows read from a dataset),
``num_dataset_epochs`` (complete passes over it), ``num_env_steps_recorded``
(WriteExperiences and ``--record``: rows written; ``plangraph.runtime.recording``).

Multi-agent plans add ``num_agent_steps_sampled`` and ``num_agent_steps_trained`` (one per
agent per env step it acted in) and, per policy id, ``num_agent_steps_sampled/<id>`` and
``num_agent_steps_trained/<id>`` (:func:`policy_counter`): each policy's schedules
(``global_vars``) advance with its own agent steps sampled only.
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
READ: Final = "num_env_steps_read"
DATASET_EPOCHS: Final = "num_dataset_epochs"
AGENT_SAMPLED: Final = "num_agent_steps_sampled"
AGENT_TRAINED: Final = "num_agent_steps_trained"


def policy_counter(counter: str, policy_id: str) -> str:
    """The per-policy counter ``"<counter>/<policy id>"`` (``num_agent_steps_sampled/dqn``)."""
    return f"{counter}/{policy_id}"
