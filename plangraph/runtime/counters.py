"""Names of the counters the built-in operators keep (env steps, RLlib Flow semantics).

``num_env_steps_sampled``: ParallelRollouts, every sub-env step once;
``num_env_steps_trained``: TrainOneStep / ApplyGradients, once per train batch (not per
minibatch pass); ``num_target_updates``: UpdateTarget syncs; ``num_worker_restarts``:
dead rollout workers replaced (ParallelRollouts; absent from the counters until one is).
"""

from __future__ import annotations

from typing import Final

SAMPLED: Final = "num_env_steps_sampled"
TRAINED: Final = "num_env_steps_trained"
TARGET_UPDATES: Final = "num_target_updates"
RESTARTS: Final = "num_worker_restarts"
