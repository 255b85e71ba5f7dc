"""Stream item types that are not ``SampleBatch``: what the train operators emit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class GradInfo:
    """Gradients of the learner loss on one batch, not yet applied (``ComputeGradients``).

    Attributes:
        grads: one float32 array per policy parameter, in ``parameters()`` order.
        count: env steps of the batch the gradients were computed on.
        stats: learner stats of that batch (scalars).
    """

    grads: list[np.ndarray]
    count: int
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainInfo:
    """The outcome of one learner update (``TrainOneStep``, ``ApplyGradients``).

    Attributes:
        stats: learner stats (scalars; e.g. ``policy_loss``, ``vf_loss``, ``kl``).
        count: env steps trained on (once per batch, not once per minibatch pass).
    """

    stats: dict[str, Any]
    count: int
