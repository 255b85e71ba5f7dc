"""``SampleBatch``: columnar experience, one row per env step.

A batch is a dict of numpy arrays that share their first dimension ``B`` (rows = env steps
of one sub-env each). Column dtypes are kept as given: observations keep the dtype of the
observation space (a ``uint8`` image stays ``uint8``), discrete actions are ``int64``.

Standard columns (all ``[B, ...]``):

==================== ============ ===========================================================
column               dtype        meaning
==================== ============ ===========================================================
``obs``              space dtype  observation ``s_t`` ``[B, *obs_shape]``
``actions``          int64        action ``a_t``: ``[B]`` (Discrete), ``[B, K]`` (MultiDiscrete)
                     float32      ``[B, D]`` (Box): the unclipped Gaussian sample; the env
                                  stepped with it clipped to the bounds
``rewards``          float32      reward ``r_t`` ``[B]``
``terminateds``      bool         ``s_{t+1}`` is terminal (MDP end: bootstrap with 0)
``truncateds``       bool         episode cut by a time limit after this step (not terminal)
``next_obs``         space dtype  ``s_{t+1}``; the final observation at an episode end
                                  (DQN, IMPALA, APPO)
``n_steps``          int64        DQN with ``n_step > 1``: env steps ``k`` the row spans;
                                  ``rewards`` is then the discounted sum of those ``k``
                                  rewards and ``next_obs``/``terminateds``/``truncateds``
                                  belong to the last of them (bootstrap with ``gamma**k``)
``action_logp``      float32      ``log pi(a_t | s_t)`` of the behaviour policy
``action_dist_inputs`` float32    behaviour distribution inputs ``[B, num_dist_inputs]``:
                                  logits, or a Gaussian's ``[mean, log_std]``
``vf_preds``         float32      ``V(s_t)`` of the behaviour policy
``bootstrap_values`` float32      value of ``s_{t+1}`` used in the TD error of row ``t``:
                                  0 if terminated, ``V(final obs)`` if truncated,
                                  ``V(s_{t+1})`` otherwise (also at a fragment cut)
``advantages``       float32      GAE(lambda) advantage ``A_t``
``value_targets``    float32      ``A_t + V(s_t)`` (the lambda-return)
``segment_ends``     bool         IMPALA/APPO: last row of a trajectory segment (episode
                                  end or fragment cut); V-trace never crosses it and
                                  bootstraps from ``next_obs`` there (0 if terminated)
``policy_version``   int64        IMPALA/APPO: version of the behaviour weights that
                                  sampled the row (``global_vars["policy_version"]``)
``eps_id``           int64        episode id, unique within a run
``t``                int64        step index of the row inside its episode (0-based)
``weights``          float32      importance-sampling weights (prioritized replay)
``batch_indexes``    int64        replay-buffer insertion ids (prioritized replay)
``replay_shard``     int64        index of the replay shard a row was sampled from
                                  (``ReplayActors``; ``UpdatePriorities`` reads it)
``seq_len``          int32        R2D2: at a replay sequence's first row its length in
                                  rows, 0 elsewhere (``SequenceReplayBuffer``)
==================== ============ ===========================================================

Completed-episode statistics ride along as metadata, not as columns: ``episode_returns``
(float64 ``[E]``, undiscounted sum of rewards) and ``episode_lengths`` (int64 ``[E]``, env
steps) of the episodes that *ended* while the batch was sampled. They survive
``concat_samples`` and ``copy``; slicing, row selection and shuffling drop them (a slice is
rows, not episodes, and reporting them per minibatch would count an episode twice).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

_RowIndex = slice | np.ndarray | Sequence[int]


class SampleBatch:
    """Columnar numpy experience; ``count`` rows, each one env step.

    Args:
        columns: column name -> array ``[B, ...]``; every array must have the same ``B``.
        episode_returns: float64 ``[E]`` returns of episodes completed in this batch.
        episode_lengths: int64 ``[E]`` lengths (env steps) of those episodes.

    Raises:
        ValueError: a column is not at least 1-D, or the columns disagree on ``B``.
    """

    OBS = "obs"
    ACTIONS = "actions"
    REWARDS = "rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    NEXT_OBS = "next_obs"
    N_STEPS = "n_steps"
    ACTION_LOGP = "action_logp"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    VF_PREDS = "vf_preds"
    BOOTSTRAP_VALUES = "bootstrap_values"
    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"
    SEGMENT_ENDS = "segment_ends"
    POLICY_VERSION = "policy_version"
    EPS_ID = "eps_id"
    T = "t"
    WEIGHTS = "weights"
    BATCH_INDEXES = "batch_indexes"
    REPLAY_SHARD = "replay_shard"
    SEQ_LEN = "seq_len"

    __slots__ = ("_columns", "_count", "episode_lengths", "episode_returns")

    def __init__(
        self,
        columns: Mapping[str, np.ndarray] | None = None,
        *,
        episode_returns: np.ndarray | Sequence[float] | None = None,
        episode_lengths: np.ndarray | Sequence[int] | None = None,
    ) -> None:
        self._columns: dict[str, np.ndarray] = {}
        self._count = 0
        for key, value in (columns or {}).items():
            self[key] = value
        self.episode_returns = np.asarray(
            episode_returns if episode_returns is not None else (), dtype=np.float64
        )
        self.episode_lengths = np.asarray(
            episode_lengths if episode_lengths is not None else (), dtype=np.int64
        )
        if self.episode_returns.shape != self.episode_lengths.shape:
            raise ValueError(
                f"episode_returns {self.episode_returns.shape} and episode_lengths "
                f"{self.episode_lengths.shape} must have the same length"
            )

    # --- size -------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Number of rows (env steps)."""
        return self._count

    def env_steps(self) -> int:
        """Env steps in this batch: one per row (each row is one sub-env step)."""
        return self._count

    def __len__(self) -> int:
        return self._count

    def size_bytes(self) -> int:
        """Bytes held by the columns."""
        return int(sum(v.nbytes for v in self._columns.values()))

    # --- columns ----------------------------------------------------------------------
    def keys(self) -> list[str]:
        return list(self._columns)

    def items(self) -> Iterable[tuple[str, np.ndarray]]:
        return self._columns.items()

    def __contains__(self, key: object) -> bool:
        return key in self._columns

    def get(self, key: str, default: Any = None) -> Any:
        return self._columns.get(key, default)

    def __getitem__(self, key: str | _RowIndex) -> Any:
        """``batch["obs"]`` -> column; ``batch[2:5]`` or ``batch[index_array]`` -> rows."""
        if isinstance(key, str):
            try:
                return self._columns[key]
            except KeyError:
                raise KeyError(
                    f"SampleBatch has no column {key!r}; columns: {sorted(self._columns)}"
                ) from None
        return self.select(key)

    def __setitem__(self, key: str, value: np.ndarray) -> None:
        arr = np.asarray(value)
        if arr.ndim == 0:
            raise ValueError(f"column {key!r} must be at least 1-D ([B, ...]), got a scalar")
        if self._columns and not (len(self._columns) == 1 and key in self._columns):
            if arr.shape[0] != self._count:
                raise ValueError(
                    f"column {key!r} has {arr.shape[0]} rows but the batch has {self._count}"
                )
        self._columns[key] = arr
        self._count = int(arr.shape[0])

    def __delitem__(self, key: str) -> None:
        del self._columns[key]
        if not self._columns:
            self._count = 0

    # --- rows -------------------------------------------------------------------------
    def select(self, rows: _RowIndex) -> SampleBatch:
        """Rows by slice (views, no copy) or index array (copies); episode stats dropped."""
        if not isinstance(rows, slice):
            rows = np.asarray(rows)
        return SampleBatch({k: v[rows] for k, v in self._columns.items()})

    def slice(self, start: int, end: int) -> SampleBatch:
        """Rows ``[start, end)`` as views; episode stats dropped."""
        return self.select(slice(start, end))

    def copy(self) -> SampleBatch:
        """Deep copy (writable arrays), keeping episode stats."""
        return SampleBatch(
            {k: v.copy() for k, v in self._columns.items()},
            episode_returns=self.episode_returns.copy(),
            episode_lengths=self.episode_lengths.copy(),
        )

    def shuffle(self, rng: np.random.Generator | int | None = None) -> SampleBatch:
        """A new batch with the rows in a uniformly random order (episode stats dropped)."""
        rng = np.random.default_rng(rng)
        return self.select(rng.permutation(self._count))

    def minibatch_indices(
        self, size: int, rng: np.random.Generator | int | None = None, shuffle: bool = True
    ) -> Iterator[np.ndarray]:
        """Row indices of consecutive minibatches of ``size`` rows covering every row once.

        The last minibatch holds the remainder (``count % size`` rows) when ``size`` does not
        divide ``count``. ``size <= 0`` means one minibatch of all rows.
        """
        order = (
            np.random.default_rng(rng).permutation(self._count)
            if shuffle
            else np.arange(self._count)
        )
        if size <= 0 or size >= self._count:
            yield order
            return
        for start in range(0, self._count, size):
            yield order[start : start + size]

    def minibatches(
        self, size: int, rng: np.random.Generator | int | None = None, shuffle: bool = True
    ) -> Iterator[SampleBatch]:
        """Minibatches of ``size`` rows (shuffled rows by default), every row exactly once."""
        for idx in self.minibatch_indices(size, rng=rng, shuffle=shuffle):
            yield self.select(idx)

    # --- combining --------------------------------------------------------------------
    @staticmethod
    def concat_samples(batches: Sequence[SampleBatch]) -> SampleBatch:
        """Concatenate rows of batches with identical columns; episode stats concatenated.

        Raises:
            ValueError: no batches, or the batches have different columns.
        """
        batches = [b for b in batches if b.count > 0 or b.episode_returns.size > 0]
        if not batches:
            return SampleBatch()
        nonempty = [b for b in batches if b.count > 0]
        keys = set(nonempty[0]._columns) if nonempty else set()
        for i, b in enumerate(nonempty[1:], start=1):
            if set(b._columns) != keys:
                raise ValueError(
                    f"cannot concatenate SampleBatches with different columns: batch 0 has "
                    f"{sorted(keys)}, batch {i} has {sorted(b._columns)}"
                )
        if len(nonempty) <= 1:
            columns = dict(nonempty[0]._columns) if nonempty else {}
        else:
            columns = {
                k: np.concatenate([b._columns[k] for b in nonempty]) for k in nonempty[0]._columns
            }
        return SampleBatch(
            columns,
            episode_returns=np.concatenate([b.episode_returns for b in batches]),
            episode_lengths=np.concatenate([b.episode_lengths for b in batches]),
        )

    def concat(self, other: SampleBatch) -> SampleBatch:
        """``concat_samples([self, other])``."""
        return SampleBatch.concat_samples([self, other])

    # --- as data (checkpoints) --------------------------------------------------------
    def to_data(self) -> dict[str, Any]:
        """The batch as a plain data tree (copies): ``{"columns": {name: array [B, ...]},
        "episode_returns": float64 [E], "episode_lengths": int64 [E]}``."""
        return {
            "columns": {k: np.array(v, copy=True) for k, v in self._columns.items()},
            "episode_returns": self.episode_returns.copy(),
            "episode_lengths": self.episode_lengths.copy(),
        }

    @staticmethod
    def from_data(data: Mapping[str, Any]) -> SampleBatch:
        """The batch ``to_data()`` described (dtypes kept).

        Raises:
            ValueError: the columns disagree on ``B`` (as the constructor).
        """
        return SampleBatch(
            {k: np.asarray(v) for k, v in data["columns"].items()},
            episode_returns=data["episode_returns"],
            episode_lengths=data["episode_lengths"],
        )

    def __repr__(self) -> str:
        cols = ", ".join(f"{k}: {v.dtype}{list(v.shape[1:])}" for k, v in self._columns.items())
        return f"SampleBatch(count={self._count}, episodes={self.episode_returns.size}, {{{cols}}})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (self._columns, self.episode_returns, self.episode_lengths),
        )


def _rebuild(
    columns: dict[str, np.ndarray], episode_returns: np.ndarray, episode_lengths: np.ndarray
) -> SampleBatch:
    return SampleBatch(columns, episode_returns=episode_returns, episode_lengths=episode_lengths)
