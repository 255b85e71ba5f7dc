"""Vectorised segment trees (numpy) for prioritized replay.

A complete binary tree stored in an array of ``2 * P`` float64 slots (``P`` = the next
power of two >= capacity): leaf ``i`` lives at ``P + i``, node ``j`` has children ``2j``,
``2j + 1``, the root is node 1. Updates of ``k`` leaves recompute only their ancestors,
level by level, as whole numpy arrays (``O(k log P)``); parents are always recomputed from
their children, so repeated updates never accumulate rounding drift.
"""

from __future__ import annotations

import numpy as np


class SegmentTree:
    """Reduction tree over ``capacity`` leaves with a binary numpy ufunc (``np.add``, ...).

    Args:
        capacity: number of leaves (>= 1).
        op: associative ufunc combining two children.
        neutral: identity of ``op``; the value of unused leaves.
    """

    def __init__(self, capacity: int, op: np.ufunc, neutral: float) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self._p = 1 << max(0, (self.capacity - 1).bit_length())
        self._depth = self._p.bit_length() - 1
        self._op = op
        self._neutral = float(neutral)
        self._tree = np.full(2 * self._p, self._neutral, dtype=np.float64)

    @property
    def root(self) -> float:
        """``op`` over all leaves."""
        return float(self._tree[1])

    def __getitem__(self, idx: np.ndarray | int) -> np.ndarray:
        return self._tree[self._p + np.asarray(idx, dtype=np.int64)]

    def set(self, idx: np.ndarray, values: np.ndarray) -> None:
        """Set leaves ``idx`` (int ``[k]``) to ``values`` (float ``[k]``); last write wins."""
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        if idx.size == 0:
            return
        if idx.min() < 0 or idx.max() >= self.capacity:
            raise IndexError(f"leaf index out of range [0, {self.capacity})")
        pos = idx + self._p
        self._tree[pos] = np.broadcast_to(np.asarray(values, dtype=np.float64), pos.shape)
        pos = np.unique(pos >> 1)
        for _ in range(self._depth):
            self._tree[pos] = self._op(self._tree[2 * pos], self._tree[2 * pos + 1])
            pos = np.unique(pos >> 1)

    def leaves(self) -> np.ndarray:
        """All ``capacity`` leaf values (a view)."""
        return self._tree[self._p : self._p + self.capacity]

    def get_state(self) -> np.ndarray:
        return self.leaves().copy()

    def set_state(self, leaves: np.ndarray) -> None:
        self._tree[:] = self._neutral
        self.set(np.arange(self.capacity), np.asarray(leaves, dtype=np.float64))


class SumTree(SegmentTree):
    """Sum tree with batched prefix-sum search (proportional sampling, Schaul et al. 2016)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.add, 0.0)

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._tree[1])

    def find_prefix_sum(self, masses: np.ndarray) -> np.ndarray:
        """For each mass ``m`` the leaf ``i`` with ``sum(leaves[:i]) <= m < sum(leaves[:i+1])``.

        Args:
            masses: float ``[k]`` in ``[0, total)``.

        Returns:
            int64 ``[k]`` leaf indices. Rounding can push a mass at the very top of the range
            onto a trailing zero leaf; callers clamp to the populated range.
        """
        m = np.array(masses, dtype=np.float64).reshape(-1)
        node = np.ones(m.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = self._tree[2 * node]
            go_right = m >= left
            m -= np.where(go_right, left, 0.0)
            node = 2 * node + go_right
        return node - self._p


class MinTree(SegmentTree):
    """Minimum tree (unused leaves are +inf)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.minimum, np.inf)

    @property
    def min(self) -> float:
        return float(self._tree[1])
