"""RL parts the operators move: ``SampleBatch``, GAE, torch policies, rollout workers, replay.

Import-light: importing ``plangraph.rl`` loads neither torch, ray nor gymnasium; each name
below is imported from its module on first attribute access.

Modules: ``sample_batch`` (SampleBatch), ``postprocessing`` (GAE, returns), ``seeding``,
``models`` (MLPs), ``policy`` (TorchPolicy), ``policies`` (make_policy), ``a2c``, ``ppo``, ``dqn``,
``vtrace`` (V-trace), ``impala`` (IMPALAPolicy), ``appo`` (APPOPolicy), ``sac`` (SACPolicy),
``distributions`` (action distributions),
``env_state`` (env snapshots for checkpoints), ``rollout_worker`` (RolloutWorker),
``worker_set`` (WorkerSet, ResumeWarning), ``sum_tree``,
``replay_buffer`` (ReplayBuffer, PrioritizedReplayBuffer, make_replay_buffer).
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
    "make_policy": "plangraph.rl.policies",
    "A2CPolicy": "plangraph.rl.a2c",
    "PPOPolicy": "plangraph.rl.ppo",
    "DQNPolicy": "plangraph.rl.dqn",
    "IMPALAPolicy": "plangraph.rl.impala",
    "APPOPolicy": "plangraph.rl.appo",
    "SACPolicy": "plangraph.rl.sac",
    "RolloutWorker": "plangraph.rl.rollout_worker",
    "WorkerSet": "plangraph.rl.worker_set",
    "ResumeWarning": "plangraph.rl.worker_set",
    "ReplayBuffer": "plangraph.rl.replay_buffer",
    "PrioritizedReplayBuffer": "plangraph.rl.replay_buffer",
    "make_replay_buffer": "plangraph.rl.replay_buffer",
    "SumTree": "plangraph.rl.sum_tree",
}

__all__ = [
    "A2CPolicy",
    "APPOPolicy",
    "DQNPolicy",
    "IMPALAPolicy",
    "PPOPolicy",
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "ResumeWarning",
    "RolloutWorker",
    "SACPolicy",
    "SampleBatch",
    "SumTree",
    "TorchPolicy",
    "WorkerSet",
    "compute_advantages",
    "compute_gae",
    "compute_returns",
    "derive_seeds",
    "make_policy",
    "make_replay_buffer",
]

if TYPE_CHECKING:
    from plangraph.rl.a2c import A2CPolicy
    from plangraph.rl.appo import APPOPolicy
    from plangraph.rl.dqn import DQNPolicy
    from plangraph.rl.impala import IMPALAPolicy
    from plangraph.rl.policies import make_policy
    from plangraph.rl.policy import TorchPolicy
    from plangraph.rl.postprocessing import compute_advantages, compute_gae, compute_returns
    from plangraph.rl.ppo import PPOPolicy
    from plangraph.rl.replay_buffer import (
        PrioritizedReplayBuffer,
        ReplayBuffer,
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
