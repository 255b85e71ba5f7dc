"""The operator catalog: signatures, ``Params`` models, and Python builders.

``from plangraph.ops import ParallelRollouts, ConcatBatches, TrainOneStep, ...`` gives
builders that record plan nodes (see :mod:`plangraph.ops.builder`); ``get_op(name)`` the
:class:`OpSignature`; ``register_op`` declares an operator (user operators, and the
built-ins in ``plangraph/ops/builtin/``, one module per category). Imports only pydantic and
``plangraph.ir`` (no ray, no torch).
"""

from __future__ import annotations

from plangraph.ops.algorithms import (
    AlgorithmSpec,
    algorithm,
    algorithms,
    register_algorithm,
    unregister_algorithm,
)
from plangraph.ops.builder import OpFactory, PendingOp, PlanBuildError, Stream, op_factory
from plangraph.ops.builtin.combine import (
    AggregateBatches,
    Batch,
    ConcatBatches,
    Flatten,
    GatherShards,
    MAMLInnerAdaptation,
    SelectExperiences,
    StandardizeFields,
    WaitUntilTimestepsElapsed,
)
from plangraph.ops.builtin.merge import Concurrently, Duplicate, Union
from plangraph.ops.builtin.replay import (
    LocalReplay,
    MixInReplay,
    ParallelReplay,
    StoreToReplay,
    UpdatePriorities,
    WriteExperiences,
)
from plangraph.ops.builtin.sink import StandardMetricsReporting
from plangraph.ops.builtin.sources import (
    AsyncGradients,
    ParallelRollouts,
    ReadExperiences,
)
from plangraph.ops.builtin.train import (
    ApplyGradients,
    AverageGradients,
    ComputeGradients,
    DDPPOReport,
    DDPPOTrainOnShard,
    Dequeue,
    Enqueue,
    MetaUpdate,
    TrainOneStep,
    UpdateKL,
    UpdateTarget,
    UpdateWorkerWeights,
)
from plangraph.ops.declare import register_op
from plangraph.ops.models import ModelSettings, model_types, register_model, unregister_model
from plangraph.ops.multi_agent_envs import register_multi_agent_env
from plangraph.ops.policies import ActorCriticConfig, AlgorithmConfig, ColumnLayout
from plangraph.ops.registry import (
    APPLY_MODES,
    CATEGORIES,
    OpParams,
    OpSignature,
    ResourceKind,
    ResourceParam,
    all_ops,
    all_resource_kinds,
    get_op,
    get_resource_kind,
    register_resource_kind,
    unregister_op,
)
from plangraph.ops.resources import (
    LearnerThreadParams,
    OfflineDataParams,
    ReplayActorsParams,
    ReplayBufferParams,
    WorkerSetParams,
    learner_thread,
    offline_data,
    replay_actors,
    replay_buffer,
    worker_set,
)

# The built-in algorithms register themselves on the same registry a user's use.
import plangraph.algorithms  # noqa: F401  (isort: skip)

__all__ = [
    "APPLY_MODES",
    "CATEGORIES",
    "ActorCriticConfig",
    "AggregateBatches",
    "AlgorithmConfig",
    "AlgorithmSpec",
    "ApplyGradients",
    "AsyncGradients",
    "AverageGradients",
    "Batch",
    "ColumnLayout",
    "ComputeGradients",
    "ConcatBatches",
    "Concurrently",
    "DDPPOReport",
    "DDPPOTrainOnShard",
    "Dequeue",
    "Duplicate",
    "Enqueue",
    "Flatten",
    "GatherShards",
    "LearnerThreadParams",
    "LocalReplay",
    "MAMLInnerAdaptation",
    "MetaUpdate",
    "MixInReplay",
    "ModelSettings",
    "OfflineDataParams",
    "OpFactory",
    "OpParams",
    "OpSignature",
    "ParallelReplay",
    "ParallelRollouts",
    "PendingOp",
    "PlanBuildError",
    "ReadExperiences",
    "ReplayActorsParams",
    "ReplayBufferParams",
    "ResourceKind",
    "ResourceParam",
    "SelectExperiences",
    "StandardMetricsReporting",
    "StandardizeFields",
    "StoreToReplay",
    "Stream",
    "TrainOneStep",
    "Union",
    "UpdateKL",
    "UpdatePriorities",
    "UpdateTarget",
    "UpdateWorkerWeights",
    "WaitUntilTimestepsElapsed",
    "WorkerSetParams",
    "WriteExperiences",
    "algorithm",
    "algorithms",
    "all_ops",
    "all_resource_kinds",
    "get_op",
    "get_resource_kind",
    "learner_thread",
    "model_types",
    "offline_data",
    "op_factory",
    "register_algorithm",
    "register_model",
    "register_multi_agent_env",
    "register_op",
    "register_resource_kind",
    "replay_actors",
    "replay_buffer",
    "unregister_algorithm",
    "unregister_model",
    "unregister_op",
    "worker_set",
]
