"""Standardising batch columns (RLlib's ``StandardizeFields``, ``rllib/execution``).

``x' = (x - mean(x)) / max(std(x), 1e-4)`` per column over the rows of one batch, the
population std (``ddof=0``) as RLlib's ``standardized``; the floor keeps a constant column
finite (it becomes 0). Used by the ``StandardizeFields`` operator, on the driver or, moved
there by the compiler, on the rollout workers (then over each worker's fragment).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plangraph.rl.sample_batch import SampleBatch

__all__ = ["STD_FLOOR", "standardize_fields"]

STD_FLOOR = 1e-4
"""Smallest std divided by (RLlib's ``max(1e-4, std)``)."""


def standardize_fields(batch: SampleBatch, fields: Sequence[str]) -> SampleBatch:
    """A new batch whose ``fields`` columns are standardised over its rows.

    Args:
        batch: ``B >= 1`` rows; each named column numeric (e.g. ``advantages: float32 [B]``).
        fields: column names; the others are shared with ``batch`` (not copied).

    Returns:
        The same rows, episode stats kept; each named column in its own dtype (float32
        stays float32), mean 0 and std 1 over the ``B`` rows (0 where it was constant).

    Raises:
        KeyError: a named column is missing (the message lists the batch's columns).
        ValueError: the batch has no rows.
    """
    if batch.count == 0:
        raise ValueError("StandardizeFields: the batch has no rows to standardise over")
    out = SampleBatch(
        dict(batch.items()),
        episode_returns=batch.episode_returns,
        episode_lengths=batch.episode_lengths,
    )
    for name in fields:
        col = batch[name]
        x = col.astype(np.float64)
        std = max(float(x.std()), STD_FLOOR)
        out[name] = ((x - x.mean()) / std).astype(col.dtype, copy=False)
    return out
