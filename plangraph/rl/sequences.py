"""Sequences of a recurrent policy's batch: where they start, how minibatches keep them
whole, and how the learner pads them.

The layout (``docs/recurrent.md``). A recurrent policy's rollout worker records, for every
row ``t`` (one env step of one sub-env), the inputs its model had at that step besides
the observation:

==================== ============ ===========================================================
column               dtype        meaning
==================== ============ ===========================================================
``state_in_<name>``  float32      the model's state before step ``t``, one column per entry
                                  of ``initial_state`` (the LSTM: ``state_in_h`` and
                                  ``state_in_c``, ``[B, lstm_cell_size]``); the initial
                                  state at an episode's first step
``prev_actions``     action dtype the action of step ``t - 1`` of the same episode
                                  ``[B, *action_shape]``; zero at an episode's first step
``prev_rewards``     float32      the reward of step ``t - 1`` ``[B]``; zero at an episode's
                                  first step
==================== ============ ===========================================================

A *sequence* is at most ``max_seq_len`` consecutive rows of one episode: the learner
(:func:`sequence_layout`) cuts the batch's trajectory pieces (``continues_flat``: an
episode end, a fragment seam of another sub-env) into chunks of ``max_seq_len`` from each
piece's first row, so a sequence never crosses an episode boundary. The state at a
sequence's start is the ``state_in_*`` of its first row: what the worker's model held
there. ``seq_begin`` (bool ``[B]``, added by the learner, never stored) marks every
sequence's first row; ``seq_lens`` (int32 ``[S]``) are the row counts between them.

Minibatches (:func:`sequence_minibatch_indices`) are whole sequences in random order,
each sequence's rows kept in time order; the learner pads the sequences of a minibatch
to the longest (:func:`pad_index`), runs the model once over ``[S, L]`` from each
sequence's stored state, and keeps the valid steps only, so every loss mean is over real
rows (padding and masking).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from plangraph.rl.postprocessing import continues_flat
from plangraph.rl.sample_batch import SampleBatch

if TYPE_CHECKING:
    import torch

__all__ = [
    "PREV_ACTIONS",
    "PREV_REWARDS",
    "SEQ_BEGIN",
    "STATE_PREFIX",
    "pad_index",
    "seq_begin",
    "sequence_layout",
    "sequence_minibatch_indices",
]

STATE_PREFIX = "state_in_"
"""Prefix of the batch columns holding a recurrent model's state before each row."""
PREV_ACTIONS = "prev_actions"
PREV_REWARDS = "prev_rewards"
SEQ_BEGIN = "seq_begin"
"""bool ``[B]``: the row starts a sequence (the learner adds it to a minibatch's tensors)."""


def sequence_layout(batch: SampleBatch, max_seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """The sequences of ``batch``: ``(starts int64 [S], seq_lens int32 [S])``, in row
    order, covering every row once.

    A sequence starts at every row that does not continue the row before it
    (``postprocessing.continues_flat``: an episode's first row in the batch, the first row
    after another sub-env's or fragment's rows) and after every ``max_seq_len`` rows of
    the same piece.

    Raises:
        ValueError: ``max_seq_len < 1``.
    """
    if max_seq_len < 1:
        raise ValueError(f"max_seq_len must be >= 1, got {max_seq_len}")
    n = batch.count
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    piece_start = np.ones(n, dtype=bool)
    piece_start[1:] = ~continues_flat(batch)[:-1]
    rows = np.arange(n)
    first = np.maximum.accumulate(np.where(piece_start, rows, 0))
    starts = np.flatnonzero((rows - first) % max_seq_len == 0)
    lens = np.diff(np.append(starts, n)).astype(np.int32)
    return starts.astype(np.int64), lens


def seq_begin(batch: SampleBatch, max_seq_len: int) -> np.ndarray:
    """bool ``[B]``: True at the first row of every sequence (``sequence_layout``)."""
    out = np.zeros(batch.count, dtype=bool)
    out[sequence_layout(batch, max_seq_len)[0]] = True
    return out


def sequence_minibatch_indices(
    starts: np.ndarray, lens: np.ndarray, size: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Row indices (int64) of one epoch's minibatches of whole sequences.

    The sequences are shuffled (``rng``); minibatch ``g`` holds those whose first row,
    in the shuffled order, falls in rows ``[g * size, (g + 1) * size)``, so a minibatch
    holds about ``size`` rows (up to one sequence more) and no sequence is ever split.
    Each sequence's rows stay contiguous and in time order. ``size <= 0``: one minibatch.
    """
    order = rng.permutation(len(starts))
    s, ln = starts[order], lens[order].astype(np.int64)
    cum = np.cumsum(ln)
    offsets = cum - ln  # first row of each sequence in the shuffled layout
    total = int(cum[-1]) if len(cum) else 0
    rows = np.repeat(s, ln) + (np.arange(total) - np.repeat(offsets, ln))
    if size <= 0 or size >= total:
        yield rows
        return
    group = offsets // size
    cuts = offsets[np.flatnonzero(np.diff(group)) + 1]
    yield from np.split(rows, cuts)


def pad_index(begin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pad the sequences of a minibatch whose rows are whole sequences in order.

    Args:
        begin: bool ``[B]``, ``seq_begin`` of the rows (``begin[0]`` must be True).

    Returns:
        ``(starts int64 [S], index int64 [S, L], mask bool [S, L])``: ``L`` is the longest
        sequence; ``rows[index]`` lays the rows out as ``[S, L, ...]`` (padding repeats row
        0), and ``padded[mask]`` gives back ``[B, ...]`` in the rows' order.

    Raises:
        ValueError: ``begin`` is empty or does not start a sequence at row 0.
    """
    import torch

    n = int(begin.shape[0])
    if n == 0 or not bool(begin[0]):
        raise ValueError("a minibatch of sequences must start with a sequence's first row")
    starts = torch.nonzero(begin).squeeze(-1)
    ends = torch.cat([starts[1:], torch.tensor([n], device=starts.device)])
    lens = ends - starts
    steps = torch.arange(int(lens.max()), device=starts.device)
    mask = steps[None, :] < lens[:, None]
    index = torch.where(
        mask, starts[:, None] + steps[None, :], torch.zeros_like(mask, dtype=torch.long)
    )
    return starts, index, mask
