"""Stream item types that are not ``SampleBatch``: what the train operators emit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plangraph.rl.advantage_norm import AdvantageNormTerms


@dataclass(frozen=True)
class GradInfo:
    """Gradients of the learner loss on one batch, not yet applied (``ComputeGradients``,
    or ``AsyncGradients``: computed on a rollout worker).

    Attributes:
        grads: one float32 array per policy parameter, in ``parameters()`` order.
        count: env steps of the batch the gradients were computed on.
        stats: learner stats of that batch (scalars).
        adv_norm: for a loss that standardises advantages (A2C ``normalize_advantages``),
            the batch's split gradient and advantage moments, so ``AverageGradients`` can
            standardise by the statistics of the whole train batch; else ``None``.
        source: the rollout-worker actor that computed the gradients (``AsyncGradients``),
            where ``ApplyGradients(update_workers="source")`` sends the new weights;
            ``None`` for gradients computed in the driver.
        policy_version: the version of the weights the gradients were computed with
            (learner updates applied before; ``AsyncGradients`` only, else 0).
    """

    grads: list[np.ndarray]
    count: int
    stats: dict[str, Any] = field(default_factory=dict)
    adv_norm: AdvantageNormTerms | None = None
    source: Any = None
    policy_version: int = 0


@dataclass(frozen=True)
class ReplayPriorities:
    """The TD errors of a trained batch replayed from ``ReplayActors``, keyed by where each
    row came from, for ``UpdatePriorities`` (Ape-X).

    Attributes:
        shards: int64 ``[B]``, the replay shard of each row (``replay_shard``).
        batch_indexes: int64 ``[B]``, each row's insertion id in its shard.
        td_errors: float32 ``[B]``, ``Q(s, a) - y`` of each row after the update's loss.
    """

    shards: np.ndarray
    batch_indexes: np.ndarray
    td_errors: np.ndarray

    @classmethod
    def of(cls, batch: Any, stats: dict[str, Any]) -> ReplayPriorities | None:
        """The priorities of a trained ``batch`` from its learner ``stats``; ``None`` unless
        the batch came from a replay shard (``replay_shard``, ``batch_indexes``) and the
        loss reported per-row ``td_error`` (DQN)."""
        td = stats.get("td_error")
        if td is None or "replay_shard" not in batch or "batch_indexes" not in batch:
            return None
        td = np.asarray(td, dtype=np.float32).reshape(-1)
        if td.shape[0] != batch.count:
            return None  # the stats of a minibatch, not of the whole batch
        return cls(
            np.asarray(batch["replay_shard"], dtype=np.int64),
            np.asarray(batch["batch_indexes"], dtype=np.int64),
            td,
        )


@dataclass(frozen=True)
class TrainInfo:
    """The outcome of one learner update (``TrainOneStep``, ``ApplyGradients``, ``Dequeue``).

    Attributes:
        stats: learner stats (scalars; e.g. ``policy_loss``, ``vf_loss``, ``kl``).
        count: env steps trained on (once per batch, not once per minibatch pass).
        replay: for a batch replayed from ``ReplayActors`` and trained by a learner thread,
            its rows' TD errors keyed by shard and slot (``UpdatePriorities``); else None.
    """

    stats: dict[str, Any]
    count: int
    replay: ReplayPriorities | None = None


def scalar_stats(stats: dict[str, Any]) -> dict[str, float]:
    """The scalar entries of learner ``stats`` as floats (arrays of size 1 included; other
    arrays, e.g. DQN's per-row ``td_error``, left out)."""
    out: dict[str, float] = {}
    for key, value in stats.items():
        if isinstance(value, (int, float, np.floating, np.integer)):
            out[key] = float(value)
        elif isinstance(value, np.ndarray) and value.size == 1:
            out[key] = float(value.item())
    return out
