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

    The array grows with the leaves in use: it starts at ``min(P, 1024)`` leaves and doubles
    (up to ``P``) when a leaf beyond it is set, so a large-capacity tree does not reserve
    ``16 * P`` bytes up front. A grown tree answers exactly as the full-size one: the full
    tree is the allocated one with extra levels above whose right subtrees hold only
    ``neutral`` (``x + 0.0 == x``, ``min(x, inf) == x``).

    Args:
        capacity: number of leaves (>= 1).
        op: associative ufunc combining two children.
        neutral: identity of ``op``; the value of unused leaves.

    Raises:
        ValueError: ``capacity < 1``.
    """

    #: leaves allocated up front (a power of two)
    INITIAL_LEAVES = 1024

    def __init__(self, capacity: int, op: np.ufunc, neutral: float) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self._p_full = 1 << max(0, (self.capacity - 1).bit_length())
        self._op = op
        self._neutral = float(neutral)
        self._allocate(min(self._p_full, self.INITIAL_LEAVES))

    def _allocate(self, p: int) -> None:
        self._p = p
        self._depth = p.bit_length() - 1
        self._tree = np.full(2 * p, self._neutral, dtype=np.float64)

    def _grow(self, leaves_needed: int) -> None:
        """Double the leaf array until it holds ``leaves_needed`` leaves (<= ``P``)."""
        p = self._p
        while p < leaves_needed:
            p *= 2
        old_p, old_leaves = self._p, self._tree[self._p : 2 * self._p].copy()
        self._allocate(min(p, self._p_full))
        self._tree[self._p : self._p + old_p] = old_leaves
        lo, hi = self._p >> 1, self._p  # recompute every internal level from its children
        while lo >= 1:
            self._tree[lo:hi] = self._op(
                self._tree[2 * lo : 2 * hi : 2], self._tree[2 * lo + 1 : 2 * hi : 2]
            )
            lo, hi = lo >> 1, lo

    @property
    def nbytes(self) -> int:
        """Bytes of the tree array allocated now (``16 * P`` once every leaf is in use)."""
        return int(self._tree.nbytes)

    @property
    def root(self) -> float:
        """``op`` over all leaves."""
        return float(self._tree[1])

    def __getitem__(self, idx: np.ndarray | int) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        inside = idx < self._p  # leaves not allocated yet hold ``neutral``
        return np.where(inside, self._tree[self._p + np.where(inside, idx, 0)], self._neutral)

    def set(self, idx: np.ndarray, values: np.ndarray) -> None:
        """Set leaves ``idx`` (int ``[k]``) to ``values`` (float ``[k]``); last write wins.

        Raises:
            IndexError: an index outside ``[0, capacity)``.
        """
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        if idx.size == 0:
            return
        if idx.min() < 0 or idx.max() >= self.capacity:
            raise IndexError(f"leaf index out of range [0, {self.capacity})")
        if int(idx.max()) >= self._p:
            self._grow(int(idx.max()) + 1)
        pos = idx + self._p
        self._tree[pos] = np.broadcast_to(np.asarray(values, dtype=np.float64), pos.shape)
        pos = np.unique(pos >> 1)
        for _ in range(self._depth):
            self._tree[pos] = self._op(self._tree[2 * pos], self._tree[2 * pos + 1])
            pos = np.unique(pos >> 1)

    def leaves(self) -> np.ndarray:
        """The allocated leaf values (a view; ``min(capacity, allocated)`` of them, the
        first leaves in order; leaves beyond hold ``neutral``)."""
        return self._tree[self._p : self._p + min(self._p, self.capacity)]

    def get_state(self) -> np.ndarray:
        """The allocated leaves (see ``leaves``), a copy."""
        return self.leaves().copy()

    def set_state(self, leaves: np.ndarray) -> None:
        """Restore ``get_state()`` (any length <= capacity; missing leaves are ``neutral``)."""
        leaves = np.asarray(leaves, dtype=np.float64).reshape(-1)
        self._allocate(min(self._p_full, self.INITIAL_LEAVES))
        self.set(np.arange(leaves.size), leaves)


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
