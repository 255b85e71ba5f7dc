"""Where R2D2's replay sequences lie in a rollout fragment (numpy only, no torch).

Kapturowski et al. 2019, sec. 3: the actors store fixed-length sequences of ``m`` steps,
adjacent ones overlapping by ``m / 2``, that never cross an episode boundary, each with
the recurrent state the actor had at its first step.

Here a fragment's rows are cut per *piece*: the consecutive rows of one sub-env's episode
inside the fragment (``Fragment.continues``: an episode end and the fragment's last row
end a piece). A piece of ``P <= length`` rows is one sequence (shorter than ``length``:
the learner pads and masks its tail). A longer piece gets the fewest sequences of
``length`` rows whose starts, evenly spaced, are at most ``length - overlap`` rows apart,
the first at the piece's first row and the last ending at its last row (so adjacent
sequences share at least ``overlap`` rows). A sequence that does not start an episode
(``t > 0``) and holds no more than ``burn_in`` rows would have no step to train on, so it
is not stored (only the first rows of a fragment's piece that continues an episode can be
in that case).

The result is the column ``seq_len`` (int32 ``[N, T]``): a sequence's length at its first
row, 0 elsewhere. Every row keeps the state the worker had before it (``state_in_*``), so
the state at a sequence's start is its first row's. The replay buffer
(``plangraph.rl.replay_buffer.SequenceReplayBuffer``) samples sequences by their first
rows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["piece_sequences", "replay_sequences"]


def piece_sequences(size: int, length: int, overlap: int) -> list[tuple[int, int]]:
    """``(offset, rows)`` of the sequences of one piece of ``size`` rows.

    Raises:
        ValueError: ``length < 1`` or ``overlap`` not in ``[0, length)``.
    """
    if length < 1 or not 0 <= overlap < length:
        raise ValueError(f"need length >= 1 and 0 <= overlap < length, got {length}, {overlap}")
    if size <= length:
        return [(0, size)] if size > 0 else []
    stride = length - overlap
    span = size - length  # the last sequence's offset
    k = -(-span // stride) + 1  # sequences, so that no two starts are more than stride apart
    return [(i * span // (k - 1), length) for i in range(k)]


def replay_sequences(
    continues: np.ndarray, t: np.ndarray, length: int, overlap: int, burn_in: int
) -> np.ndarray:
    """The sequences of a fragment, as the column ``seq_len``.

    Args:
        continues: bool ``[N, T]``: row ``(n, i + 1)`` is the next step of row ``(n, i)``'s
            episode (``Fragment.continues``: False at episode ends and at the last row).
        t: int64 ``[N, T]``: each row's step index in its episode (0: the episode's first).
        length: rows of a full sequence, burn-in included.
        overlap: rows two adjacent sequences of a piece share.
        burn_in: rows at a sequence's start that only warm the state up (none at an
            episode's first step).

    Returns:
        int32 ``[N, T]``: at each sequence's first row its number of rows, 0 elsewhere.
    """
    n, horizon = continues.shape
    out = np.zeros((n, horizon), dtype=np.int32)
    for k in range(n):
        ends = np.flatnonzero(~continues[k])  # last row of each piece
        start = 0
        for end in ends:
            size = int(end) - start + 1
            for offset, rows in piece_sequences(size, length, overlap):
                first = start + offset
                if t[k, first] > 0 and rows <= burn_in:
                    continue  # all burn-in: nothing to train on
                out[k, first] = rows
            start = int(end) + 1
    return out
