"""Gradients computed on a rollout worker from its own fresh sample (A3C's worker step).

A3C (Mnih et al. 2016, Algorithm S3) has each actor-learner sample a short rollout,
compute the gradient of the actor-critic loss on it with its own copy of the weights, and
send that gradient (not the samples) to the shared parameters; the learner applies it and
sends the new weights back to that actor alone.
``RolloutWorker.sample_and_compute_gradients`` is the worker's part: one
``RolloutWorker.sample()`` (postprocessed on the worker: GAE with the worker's value head),
then ``policy.compute_gradients`` on it, with no optimizer step (the worker's policy copy
never steps its optimizer). What travels back to the driver is a :class:`WorkerGradients`:
float32 arrays, which Ray's object store moves without pickling their data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["WorkerGradients"]


@dataclass(frozen=True)
class WorkerGradients:
    """One rollout worker's gradients on one fragment it sampled.

    Attributes:
        grads: the raw (unclipped) loss gradients, one float32 array per policy parameter,
            in ``model.parameters()`` order (clipping happens where they are applied).
        stats: learner stats of the fragment (scalars only: ``policy_loss``, ``vf_loss``,
            ``entropy``, ``grad_gnorm``, ...).
        count: env steps of the fragment (``num_envs x rollout_fragment_length``).
        episode_returns: float64 ``[E]``, undiscounted returns of the episodes that ended
            in the fragment.
        episode_lengths: int64 ``[E]``, their lengths in env steps.
        policy_version: version of the weights the worker sampled and differentiated with
            (as last sent by ``set_weights(..., {"policy_version": v})``; 0 before any).
        worker_index: the worker's ``worker_index`` (1..num_workers; 0 = local).
    """

    grads: list[np.ndarray]
    stats: dict[str, float]
    count: int
    episode_returns: np.ndarray
    episode_lengths: np.ndarray
    policy_version: int
    worker_index: int
