"""What every algorithm shares: ``SampleBatch``, postprocessing, the learner bases, rollout
workers, replay. The public learner API for writing an algorithm (``docs/extending.md``):
``TorchPolicy`` and ``ActorCriticPolicy`` (the learner bases), ``Fragment`` (what the
``postprocess_fragment`` hook sees) with ``gae_columns``, ``segment_columns``,
``transition_columns`` (with the ``TRANSITION_LOSS_COLUMNS`` a replay learner reads) and
``compute_returns``, ``bounded_box`` (a squashed actor's action space), ``SampleBatch``,
``Stats``, ``inference``,
``soft_update``, ``mlp`` and ``build_encoder`` (a registered model type's torch module),
``explained_variance`` (a stat) and ``AdvantageNormTerms`` (the split gradient a policy
returns from ``advantage_norm_terms`` so that microbatches standardise advantages by
their whole train batch).

Import-light: importing ``plangraph.rl`` loads neither torch, ray nor gymnasium; each name
below is imported from its module on first attribute access. The built-in algorithms'
learners live in ``plangraph/algorithms/<name>/policy.py``.

Modules: ``sample_batch`` (SampleBatch), ``postprocessing`` (Fragment, GAE, returns),
``seeding``, ``models`` (encoders, heads), ``policy`` (TorchPolicy), ``actor_critic``
(ActorCriticPolicy), ``policies`` (make_policy), ``registrations`` (user algorithms and
models carried to workers), ``distributions`` (action distributions),
``env_state`` (env snapshots for checkpoints), ``rollout_worker`` (RolloutWorker),
``worker_set`` (WorkerSet, ResumeWarning), ``sum_tree``, multi-agent: ``multi_agent_env``
(MultiAgentCartPole, PettingZoo envs by name), ``multi_agent_batch`` (MultiAgentBatch),
``multi_agent_worker`` (MultiAgentRolloutWorker), ``multi_agent_worker_set``
(MultiAgentWorkerSet),
``replay_buffer`` (ReplayBuffer, PrioritizedReplayBuffer, SequenceReplayBuffer,
make_replay_buffer).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "SampleBatch": "plangraph.rl.sample_batch",
    "compute_gae": "plangraph.rl.postprocessing",
    "compute_returns": "plangraph.rl.postprocessing",
    "compute_advantages": "plangraph.rl.postprocessing",
    "derive_seeds": "plangraph.rl.seeding",
    "TorchPolicy": "plangraph.rl.policy",
    "Stats": "plangraph.rl.policy",
    "inference": "plangraph.rl.policy",
    "ActorCriticPolicy": "plangraph.rl.actor_critic",
    "explained_variance": "plangraph.rl.actor_critic",
    "AdvantageNormTerms": "plangraph.rl.advantage_norm",
    "Fragment": "plangraph.rl.postprocessing",
    "gae_columns": "plangraph.rl.postprocessing",
    "segment_columns": "plangraph.rl.postprocessing",
    "transition_columns": "plangraph.rl.postprocessing",
    "TRANSITION_LOSS_COLUMNS": "plangraph.rl.postprocessing",
    "TRANSITION_OPTIONAL_COLUMNS": "plangraph.rl.postprocessing",
    "bounded_box": "plangraph.rl.action_layout",
    "soft_update": "plangraph.rl.models",
    "mlp": "plangraph.rl.models",
    "build_encoder": "plangraph.rl.models",
    "make_policy": "plangraph.rl.policies",
    "RolloutWorker": "plangraph.rl.rollout_worker",
    "WorkerSet": "plangraph.rl.worker_set",
    "ResumeWarning": "plangraph.rl.worker_set",
    "ReplayBuffer": "plangraph.rl.replay_buffer",
    "PrioritizedReplayBuffer": "plangraph.rl.replay_buffer",
    "SequenceReplayBuffer": "plangraph.rl.replay_buffer",
    "make_replay_buffer": "plangraph.rl.replay_buffer",
    "SumTree": "plangraph.rl.sum_tree",
    "MultiAgentBatch": "plangraph.rl.multi_agent_batch",
    "MultiAgentCartPole": "plangraph.rl.multi_agent_env",
    "MultiAgentRolloutWorker": "plangraph.rl.multi_agent_worker",
    "MultiAgentWorkerSet": "plangraph.rl.multi_agent_worker_set",
}

__all__ = [
    "TRANSITION_LOSS_COLUMNS",
    "TRANSITION_OPTIONAL_COLUMNS",
    "ActorCriticPolicy",
    "AdvantageNormTerms",
    "Fragment",
    "MultiAgentBatch",
    "MultiAgentCartPole",
    "MultiAgentRolloutWorker",
    "MultiAgentWorkerSet",
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "ResumeWarning",
    "RolloutWorker",
    "SampleBatch",
    "SequenceReplayBuffer",
    "Stats",
    "SumTree",
    "TorchPolicy",
    "WorkerSet",
    "bounded_box",
    "build_encoder",
    "compute_advantages",
    "compute_gae",
    "compute_returns",
    "derive_seeds",
    "explained_variance",
    "gae_columns",
    "inference",
    "make_policy",
    "make_replay_buffer",
    "mlp",
    "segment_columns",
    "soft_update",
    "transition_columns",
]

if TYPE_CHECKING:
    from plangraph.rl.action_layout import bounded_box
    from plangraph.rl.actor_critic import ActorCriticPolicy, explained_variance
    from plangraph.rl.advantage_norm import AdvantageNormTerms
    from plangraph.rl.models import build_encoder, mlp, soft_update
    from plangraph.rl.multi_agent_batch import MultiAgentBatch
    from plangraph.rl.multi_agent_env import MultiAgentCartPole
    from plangraph.rl.multi_agent_worker import MultiAgentRolloutWorker
    from plangraph.rl.multi_agent_worker_set import MultiAgentWorkerSet
    from plangraph.rl.policies import make_policy
    from plangraph.rl.policy import Stats, TorchPolicy, inference
    from plangraph.rl.postprocessing import (
        TRANSITION_LOSS_COLUMNS,
        TRANSITION_OPTIONAL_COLUMNS,
        Fragment,
        compute_advantages,
        compute_gae,
        compute_returns,
        gae_columns,
        segment_columns,
        transition_columns,
    )
    from plangraph.rl.replay_buffer import (
        PrioritizedReplayBuffer,
        ReplayBuffer,
        SequenceReplayBuffer,
        make_replay_buffer,
    )
    from plangraph.rl.rollout_worker import RolloutWorker
    from plangraph.rl.sample_batch import SampleBatch
    from plangraph.rl.seeding import derive_seeds
    from plangraph.rl.sum_tree import SumTree
    from plangraph.rl.worker_set import ResumeWarning, WorkerSet


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'plangraph.rl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
