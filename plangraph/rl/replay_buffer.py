"""Experience replay: uniform ``ReplayBuffer`` and ``PrioritizedReplayBuffer``.

Storage is one numpy array per column, ``[rows, ...]``, created on the first ``add`` with
that batch's dtypes and shapes (a ``uint8`` observation is stored as ``uint8``). It grows
with the data: ``rows`` starts at ``min(capacity, max(1024, first batch))`` and doubles (up
to ``capacity``) when a write needs more, so a large buffer reserves memory only as it
fills (``replay_nbytes`` is the size once full; the build refuses a plan whose buffers
cannot fit). An item is one row = one transition = one env step, so capacity is in env
steps. Rows are written into a ring in insertion order: the row with insertion id ``i``
(0, 1, 2, ... over the buffer's life) goes to slot ``i % capacity``, evicting the oldest
row (FIFO). A batch larger than the capacity keeps only its last ``capacity`` rows.

``sample(n)`` draws ``n`` rows with replacement and returns them as a ``SampleBatch`` with
``batch_indexes`` (int64 ``[n]``) holding their insertion ids. Because slot = id % capacity,
``update_priorities`` can tell whether a slot still holds the sampled row: priorities for
rows overwritten since they were sampled are ignored.

``SequenceReplayBuffer`` (R2D2) stores the same rows and samples whole sequences of
them, prioritized per sequence.

Prioritized replay follows Schaul et al. 2016 (proportional variant):

* priority ``p_i = |td_error_i| + eps``; stored as ``p_i^alpha`` in a sum tree;
* ``P(i) = p_i^alpha / sum_k p_k^alpha``; each of the ``n`` rows is drawn independently;
* new rows get the largest priority seen so far (``max_priority``, starting at 1.0), so
  every transition is replayed at least with the probability of the current best;
* importance weights ``w_i = (N * P(i))^-beta / max_j (N * P(j))^-beta
  = (P(i) / P_min)^-beta`` with ``N`` the rows stored and ``P_min`` over all stored rows
  (so ``w <= 1``), returned as float32 column ``weights``;
* ``beta`` anneals linearly from ``beta`` to ``beta_final`` over ``beta_annealing_steps``
  rows *sampled from the buffer*; a ``sample`` call uses the value reached before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.sum_tree import MinTree, SumTree

if TYPE_CHECKING:
    from plangraph.ops.resources import ReplayBufferParams

_SB = SampleBatch
_NOT_STORED = (_SB.WEIGHTS, _SB.BATCH_INDEXES, _SB.REPLAY_SHARD)
#: rows allocated before the storage first grows
_INITIAL_ROWS = 1024


class ReplayBuffer:
    """Uniform FIFO replay of transitions; capacity in env steps.

    Args:
        capacity: rows (env steps) kept (>= 1).
        seed: seeds the sampling RNG.

    Raises:
        ValueError: ``capacity < 1``.
    """

    def __init__(self, capacity: int, seed: int | None = 0) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1 env step, got {capacity}")
        self.capacity = int(capacity)
        self._rng = np.random.default_rng(seed)
        self._storage: dict[str, np.ndarray] | None = None
        # insertion id held by each allocated slot (-1: empty); grows with the storage
        self._ids = np.full(min(self.capacity, _INITIAL_ROWS), -1, dtype=np.int64)
        self._size = 0
        self.num_added = 0  # rows ever added == insertion id of the next row
        self.num_sampled = 0  # rows ever sampled

    def __len__(self) -> int:
        """Rows (env steps) currently stored."""
        return self._size

    # --- writing ----------------------------------------------------------------------
    def add(self, batch: SampleBatch) -> np.ndarray:
        """Append the batch's rows (FIFO eviction); returns their insertion ids int64 ``[k]``.

        ``weights`` and ``batch_indexes`` columns are not stored.

        Raises:
            ValueError: the batch's columns, shapes or dtypes differ from the first batch.
        """
        cols = {k: v for k, v in batch.items() if k not in _NOT_STORED}
        n = batch.count
        if n == 0:
            return np.empty(0, dtype=np.int64)
        if self._storage is None:
            rows = min(self.capacity, max(_INITIAL_ROWS, n))
            self._storage = {
                k: np.empty((rows, *v.shape[1:]), dtype=v.dtype) for k, v in cols.items()
            }
        self._check_columns(cols)
        # Until the ring wraps, slots are 0 .. num_added - 1: grow to cover this write.
        self._reserve(min(self.capacity, self.num_added + n))
        keep = min(n, self.capacity)
        first_id = self.num_added + n - keep
        ids = np.arange(first_id, first_id + keep, dtype=np.int64)
        slots = ids % self.capacity
        for k, v in cols.items():
            self._storage[k][slots] = v[n - keep :]
        self._ids[slots] = ids
        self.num_added += n
        self._size = min(self.capacity, self._size + n)
        self._on_write(slots)
        return ids

    def _reserve(self, rows: int) -> None:
        """Grow the storage (doubling, at most ``capacity``) to hold ``rows`` slots."""
        assert self._storage is not None
        have = len(self._ids)
        if rows <= have and all(len(v) >= rows for v in self._storage.values()):
            return
        new = max(have, 1)
        while new < rows:
            new *= 2
        new = min(new, self.capacity)
        for k, v in self._storage.items():
            if len(v) < new:
                grown = np.empty((new, *v.shape[1:]), dtype=v.dtype)
                grown[: len(v)] = v
                self._storage[k] = grown
        if have < new:
            ids = np.full(new, -1, dtype=np.int64)
            ids[:have] = self._ids
            self._ids = ids

    def _check_columns(self, cols: Mapping[str, np.ndarray]) -> None:
        assert self._storage is not None
        if set(cols) != set(self._storage):
            raise ValueError(
                f"replay buffer stores columns {sorted(self._storage)}, batch has "
                f"{sorted(cols)}; add batches from the same worker set"
            )
        for k, v in cols.items():
            s = self._storage[k]
            if v.shape[1:] != s.shape[1:] or v.dtype != s.dtype:
                raise ValueError(
                    f"column {k!r}: batch rows are {v.dtype}{list(v.shape[1:])}, the buffer "
                    f"stores {s.dtype}{list(s.shape[1:])}"
                )

    def _on_write(self, slots: np.ndarray) -> None:
        """Hook for subclasses: rows were written to ``slots``."""

    # --- reading ----------------------------------------------------------------------
    def _sample_slots(self, num_items: int) -> np.ndarray:
        return self._rng.integers(0, self._size, size=num_items)

    def _gather(self, slots: np.ndarray) -> SampleBatch:
        assert self._storage is not None
        out = SampleBatch({k: v[slots] for k, v in self._storage.items()})
        out[_SB.BATCH_INDEXES] = self._ids[slots]
        return out

    def sample(self, num_items: int) -> SampleBatch:
        """``num_items`` rows drawn uniformly with replacement, plus ``batch_indexes``.

        Raises:
            ValueError: the buffer is empty or ``num_items < 1``.
        """
        self._check_sample(num_items)
        slots = self._sample_slots(num_items)
        self.num_sampled += num_items
        return self._gather(slots)

    def _check_sample(self, num_items: int) -> None:
        if num_items < 1:
            raise ValueError(f"num_items must be >= 1, got {num_items}")
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer; add a batch first")

    def _live(self, batch_indexes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(slots, mask)``: mask is True where the slot still holds that insertion id."""
        ids = np.asarray(batch_indexes, dtype=np.int64).reshape(-1)
        slots = ids % self.capacity
        allocated = slots < len(self._ids)  # a slot not allocated yet holds no row
        held = self._ids[np.where(allocated, slots, 0)]
        return slots, (ids >= 0) & allocated & (held == ids)

    def holds(self, batch_indexes: np.ndarray) -> np.ndarray:
        """bool ``[k]``: True where the row with that insertion id is still stored (not
        evicted by FIFO since it was added; negative ids are never stored)."""
        return self._live(batch_indexes)[1]

    def update_priorities(self, batch_indexes: np.ndarray, td_errors: np.ndarray) -> int:
        """Uniform replay has no priorities: a no-op kept so plans can switch buffers.

        Returns:
            0 (no priorities applied).
        """
        return 0

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays allocated now (storage, insertion ids and, for PER, the
        trees); ``replay_nbytes`` of the buffer's layout once it is full."""
        storage = 0 if self._storage is None else sum(v.nbytes for v in self._storage.values())
        return storage + self._ids.nbytes

    @property
    def row_nbytes(self) -> int:
        """Bytes one stored env step takes: its columns' row plus its int64 insertion id
        (0 before the first ``add``); the trees of a prioritized buffer are not in it."""
        if self._storage is None:
            return 0
        return (
            sum(
                v.itemsize * int(np.prod(v.shape[1:], dtype=np.int64))
                for v in self._storage.values()
            )
            + 8
        )

    def stats(self) -> dict[str, float]:
        """Size and throughput counters (env steps)."""
        return {
            "num_entries": float(self._size),
            "num_added": float(self.num_added),
            "num_sampled": float(self.num_sampled),
        }

    # --- checkpoints ------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Stored rows (the populated part), ids, counters and RNG state."""
        n = self._size
        return {
            "capacity": self.capacity,
            "storage": None
            if self._storage is None
            else {k: v[:n].copy() for k, v in self._storage.items()},
            "ids": self._ids[:n].copy(),
            "size": n,
            "num_added": self.num_added,
            "num_sampled": self.num_sampled,
            "rng": self._rng.bit_generator.state,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_state()`` of a buffer with the same capacity.

        Raises:
            ValueError: capacities differ.
        """
        if state["capacity"] != self.capacity:
            raise ValueError(
                f"state is for capacity {state['capacity']}, this buffer has {self.capacity}"
            )
        n = int(state["size"])
        rows = min(self.capacity, max(_INITIAL_ROWS, n))
        self._storage = None
        if state["storage"] is not None:
            self._storage = {}
            for k, v in state["storage"].items():
                arr = np.empty((rows, *v.shape[1:]), dtype=v.dtype)
                arr[:n] = v
                self._storage[k] = arr
        self._ids = np.full(rows, -1, dtype=np.int64)
        self._ids[:n] = state["ids"]
        self._size = n
        self.num_added = int(state["num_added"])
        self.num_sampled = int(state["num_sampled"])
        self._rng.bit_generator.state = state["rng"]


class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016); see the module docstring.

    Args:
        capacity: rows (env steps) kept.
        alpha: priority exponent (> 0).
        beta: initial importance-sampling exponent in ``[0, 1]``.
        beta_final: exponent reached after ``beta_annealing_steps`` sampled rows.
        beta_annealing_steps: rows sampled over which beta anneals (0 = ``beta_final``).
        eps: added to ``|td_error|`` so every priority is positive.
        seed: seeds the sampling RNG.
    """

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_annealing_steps: int = 100_000,
        eps: float = 1e-6,
        seed: int | None = 0,
    ) -> None:
        super().__init__(capacity, seed)
        if alpha <= 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        if not (0.0 <= beta <= 1.0 and 0.0 <= beta_final <= 1.0):
            raise ValueError(f"beta and beta_final must be in [0, 1], got {beta}, {beta_final}")
        if eps <= 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        self.alpha = float(alpha)
        self.beta_initial = float(beta)
        self.beta_final = float(beta_final)
        self.beta_annealing_steps = int(beta_annealing_steps)
        self.eps = float(eps)
        self.max_priority = 1.0
        self._sum = SumTree(self.capacity)
        self._min = MinTree(self.capacity)

    @property
    def beta(self) -> float:
        """IS exponent after ``num_sampled`` sampled rows (linear annealing)."""
        if self.beta_annealing_steps <= 0:
            return self.beta_final
        frac = min(1.0, self.num_sampled / self.beta_annealing_steps)
        return self.beta_initial + frac * (self.beta_final - self.beta_initial)

    def _set_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        scaled = np.power(priorities, self.alpha)
        self._sum.set(slots, scaled)
        self._min.set(slots, scaled)

    def _on_write(self, slots: np.ndarray) -> None:
        self._set_priorities(slots, np.full(slots.shape, self.max_priority))

    def sample(self, num_items: int) -> SampleBatch:
        """``num_items`` rows drawn with ``P(i)`` ∝ ``p_i^alpha``, plus ``batch_indexes`` and
        ``weights`` (float32 ``[n]``, max-normalised IS weights).

        Raises:
            ValueError: the buffer is empty or ``num_items < 1``.
        """
        self._check_sample(num_items)
        total = self._sum.total
        masses = self._rng.random(num_items) * total
        slots = np.minimum(self._sum.find_prefix_sum(masses), self._size - 1)
        probs = self._sum[slots] / total
        p_min = self._min.min / total
        beta = self.beta
        weights = np.power(probs / p_min, -beta).astype(np.float32)
        self.num_sampled += num_items
        out = self._gather(slots)
        out[_SB.WEIGHTS] = weights
        return out

    def probabilities(self) -> np.ndarray:
        """``P(i)`` of every stored row, in slot order; float64 ``[len(self)]``."""
        leaves = self._sum.leaves()[: self._size]
        return leaves / leaves.sum()

    def update_priorities(self, batch_indexes: np.ndarray, td_errors: np.ndarray) -> int:
        """Set ``p = |td_error| + eps`` for rows still stored; returns how many were applied.

        Rows evicted since they were sampled (their slot now holds a newer insertion id) are
        ignored. For duplicate indexes the last value wins.

        Raises:
            ValueError: lengths differ or a TD error is not finite.
        """
        ids = np.asarray(batch_indexes, dtype=np.int64).reshape(-1)
        td = np.asarray(td_errors, dtype=np.float64).reshape(-1)
        if ids.shape != td.shape:
            raise ValueError(f"batch_indexes has {ids.size} entries but td_errors has {td.size}")
        if not np.all(np.isfinite(td)):
            raise ValueError("td_errors must be finite (got NaN or inf); check the loss")
        slots, live = self._live(ids)
        if not live.any():
            return 0
        priorities = np.abs(td[live]) + self.eps
        self._set_priorities(slots[live], priorities)
        self.max_priority = max(self.max_priority, float(priorities.max()))
        return int(live.sum())

    def priorities(self, batch_indexes: np.ndarray) -> np.ndarray:
        """float64 ``[k]``: the priority ``p_i = |td_error_i| + eps`` (or the max priority it
        was added with) of each row still stored, NaN for rows evicted since."""
        slots, live = self._live(batch_indexes)
        out = np.full(live.shape, np.nan)
        if live.any():
            out[live] = np.power(self._sum[slots[live]], 1.0 / self.alpha)
        return out

    @property
    def nbytes(self) -> int:
        return super().nbytes + self._sum.nbytes + self._min.nbytes

    def stats(self) -> dict[str, float]:
        out = super().stats()
        out.update({"max_priority": self.max_priority, "beta": self.beta})
        return out

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state.update(
            {
                "priorities": self._sum.get_state(),
                "max_priority": self.max_priority,
            }
        )
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        super().set_state(state)
        # Leaves past the stored rows were never written (0): restoring only the stored
        # ones keeps the trees as small as the data, also from a full-length old state.
        leaves = np.asarray(state["priorities"], dtype=np.float64)[: self._size]
        self._sum.set_state(leaves)
        mins = leaves.copy()
        mins[self._size :] = np.inf
        self._min.set_state(mins)
        self.max_priority = float(state["max_priority"])


class SequenceReplayBuffer(PrioritizedReplayBuffer):
    """Replay of sequences (R2D2, Kapturowski et al. 2019, sec. 3), stored as rows.

    Storage, capacity (env steps), FIFO eviction and insertion ids are the row buffer's:
    every row of a rollout batch is stored, with the recurrent state its worker had
    before it (``state_in_*``). The batch's column ``seq_len`` (int32 ``[B]``, added by
    the writer's postprocessing: ``plangraph.algorithms.r2d2.sequences``) marks the
    sequences: at a sequence's first row its length in rows, 0 elsewhere; a sequence's
    rows are consecutive in the batch (one sub-env's episode), so they are in
    consecutive slots of the ring. Sequences may overlap.

    The sum tree holds a priority at each sequence's first row and 0 at every other row
    (the min tree ``+inf`` there), so sampling draws sequences: ``P(i) = p_i^alpha /
    sum_k p_k^alpha`` over the stored sequences, importance weights as in
    ``PrioritizedReplayBuffer`` with ``N`` and ``P_min`` over sequences. With
    ``prioritized=False`` every sequence has priority 1 (uniform over sequences, no
    ``weights`` column, ``update_priorities`` a no-op). A new sequence gets the largest
    priority so far. A sequence is live while its first row is: FIFO evicts a sequence's
    first row before its others.

    ``sample(n)`` returns the ``n`` sequences' rows back to back, each in time order
    (``sum(len_i)`` rows), with ``seq_len`` rewritten to mark exactly the sampled
    sequences' first rows, ``batch_indexes`` (int64, each row: its sequence's first
    row's insertion id) and ``weights`` (float32, each row: its sequence's IS weight).
    ``update_priorities(batch_indexes, td_errors)`` takes one value per row, the same for
    every row of a sequence (R2D2's ``eta * max + (1 - eta) * mean`` of its TD errors):
    ``p = |value| + eps``.

    Args: as ``PrioritizedReplayBuffer``, plus ``prioritized``.
    """

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_annealing_steps: int = 100_000,
        eps: float = 1e-6,
        seed: int | None = 0,
        prioritized: bool = True,
    ) -> None:
        super().__init__(capacity, alpha, beta, beta_final, beta_annealing_steps, eps, seed)
        self.prioritized = bool(prioritized)
        self.num_sequences_sampled = 0

    def add(self, batch: SampleBatch) -> np.ndarray:
        """Append the batch's rows (FIFO); its ``seq_len`` column marks the sequences.

        Raises:
            ValueError: the batch has no ``seq_len`` column, or a sequence runs past the
                batch's last row.
        """
        if batch.count and _SB.SEQ_LEN not in batch:
            raise ValueError(
                "a replay buffer of item 'sequence' stores batches whose column seq_len marks "
                f"the sequences (R2D2's postprocessing); this batch has {sorted(batch.keys())}"
            )
        if batch.count:
            lens = np.asarray(batch[_SB.SEQ_LEN])
            if np.any(np.flatnonzero(lens) + lens[lens > 0] > batch.count):
                raise ValueError("a sequence marked in seq_len runs past the batch's last row")
        return super().add(batch)

    def _on_write(self, slots: np.ndarray) -> None:
        assert self._storage is not None
        first = self._storage[_SB.SEQ_LEN][slots] > 0
        p = self.max_priority if self.prioritized else 1.0
        scaled = np.where(first, p**self.alpha, 0.0)
        self._sum.set(slots, scaled)
        self._min.set(slots, np.where(first, scaled, np.inf))

    def sample(self, num_items: int) -> SampleBatch:
        """``num_items`` sequences drawn with ``P(i)`` (with replacement), their rows back
        to back; see the class docstring.

        Raises:
            ValueError: no sequence is stored, or ``num_items < 1``.
        """
        self._check_sample(num_items)
        total = self._sum.total
        if total <= 0.0:
            raise ValueError("the replay buffer holds no sequence (no row with seq_len > 0)")
        masses = self._rng.random(num_items) * total
        slots = self._sum.find_prefix_sum(masses)
        bad = (slots >= self._size) | (self._sum[np.minimum(slots, self._size - 1)] <= 0.0)
        if bad.any():  # rounding at the top of the range: the last sequence
            slots[bad] = np.flatnonzero(self._sum.leaves()[: self._size] > 0.0)[-1]
        assert self._storage is not None
        lens = self._storage[_SB.SEQ_LEN][slots].astype(np.int64)
        rows = int(lens.sum())
        first = np.cumsum(lens) - lens  # each sequence's first row in the output
        step = np.arange(rows) - np.repeat(first, lens)
        row_slots = (np.repeat(slots, lens) + step) % self.capacity
        out = SampleBatch({k: v[row_slots] for k, v in self._storage.items()})
        marks = np.zeros(rows, dtype=self._storage[_SB.SEQ_LEN].dtype)
        marks[first] = lens
        out[_SB.SEQ_LEN] = marks
        out[_SB.BATCH_INDEXES] = np.repeat(self._ids[slots], lens)
        if self.prioritized:
            probs = self._sum[slots] / total
            p_min = self._min.min / total
            weights = np.power(probs / p_min, -self.beta).astype(np.float32)
            out[_SB.WEIGHTS] = np.repeat(weights, lens)
        self.num_sampled += rows
        self.num_sequences_sampled += num_items
        return out

    def update_priorities(self, batch_indexes: np.ndarray, td_errors: np.ndarray) -> int:
        """As ``PrioritizedReplayBuffer.update_priorities`` (per row; every row of a
        sequence carries its first row's id and the sequence's value); uniform: none."""
        if not self.prioritized:
            return 0
        return super().update_priorities(batch_indexes, td_errors)

    def stats(self) -> dict[str, float]:
        out = super().stats()
        out["num_sequences_sampled"] = float(self.num_sequences_sampled)
        return out

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["num_sequences_sampled"] = self.num_sequences_sampled
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        super().set_state(state)
        leaves = np.asarray(state["priorities"], dtype=np.float64)[: self._size]
        mins = np.where(leaves > 0.0, leaves, np.inf)
        self._min.set_state(mins)
        self.num_sequences_sampled = int(state.get("num_sequences_sampled", 0))


def replay_nbytes(
    capacity: int,
    row_layout: Mapping[str, tuple[tuple[int, ...], Any]],
    prioritized: bool = False,
) -> int:
    """Bytes a buffer of ``capacity`` env steps holds once full.

    ``capacity * (sum over stored columns of prod(row shape) * itemsize + 8)`` (the 8 bytes
    are the int64 insertion id of each slot), plus for prioritized replay the sum and min
    trees, ``2 * (2 * P) * 8`` bytes with ``P`` the next power of two >= capacity.

    Args:
        capacity: rows (env steps).
        row_layout: ``column -> (row shape, dtype)`` of the batches the buffer will store
            (``plangraph.rl.rollout_worker.sample_row_layout``); ``weights`` and
            ``batch_indexes`` are not stored and not counted.
        prioritized: add the two segment trees.
    """
    row = 8 + sum(
        int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        for col, (shape, dtype) in row_layout.items()
        if col not in _NOT_STORED
    )
    total = int(capacity) * row
    if prioritized:
        p = 1 << max(0, (int(capacity) - 1).bit_length())
        total += 2 * 2 * p * np.dtype(np.float64).itemsize
    return total


def make_replay_buffer(
    params: ReplayBufferParams, seed: int | None = 0
) -> ReplayBuffer | PrioritizedReplayBuffer:
    """Build the buffer a plan's ``ReplayBufferParams`` resource declares (``item``
    ``"sequence"``: a ``SequenceReplayBuffer``).

    ``learning_starts`` is not a buffer property: the replay operator reads it.
    """
    if params.item == "sequence":
        return SequenceReplayBuffer(
            params.capacity,
            alpha=params.alpha,
            beta=params.beta,
            beta_final=params.beta_final,
            beta_annealing_steps=params.beta_annealing_steps,
            eps=params.eps,
            seed=seed,
            prioritized=params.prioritized,
        )
    if params.prioritized:
        return PrioritizedReplayBuffer(
            params.capacity,
            alpha=params.alpha,
            beta=params.beta,
            beta_final=params.beta_final,
            beta_annealing_steps=params.beta_annealing_steps,
            eps=params.eps,
            seed=seed,
        )
    return ReplayBuffer(params.capacity, seed=seed)
