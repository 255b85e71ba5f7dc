"""Advantages and returns: GAE(lambda) (Schulman et al. 2016, eq. 11-16), discounted returns.

Everything here is numpy, time-major: arrays are ``[T, ...]`` and the recursion loops over
``T`` only, vectorised over any trailing axes (e.g. the ``N`` sub-envs of a vector env).

Conventions (the places where peers got it wrong):

* ``bootstrap_values[t]`` is the value of the *successor* state of transition ``t``:
  0 when ``s_{t+1}`` is terminal, ``V(final observation)`` when the episode was truncated
  by a time limit, ``V(s_{t+1})`` otherwise -- including at a fragment cut.
* ``continues[t]`` is True iff row ``t + 1`` is the next step of the *same* trajectory.
  It is False at every episode end (terminated or truncated), at the last row of a
  fragment, and wherever a concatenated batch switches episode. The recursion never
  carries an advantage across a False.

With these, for every row:

    delta_t = r_t + gamma * bootstrap_values[t] - V(s_t)
    A_t     = delta_t + gamma * lambda * continues[t] * A_{t+1}
    G_t     = r_t + gamma * (continues[t] ? G_{t+1} : bootstrap_values[t])

and ``A_t + V(s_t) == G_t`` exactly when ``lambda == 1``.
"""

from __future__ import annotations

import numpy as np

from plangraph.rl.sample_batch import SampleBatch


def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    bootstrap_values: np.ndarray,
    continues: np.ndarray,
    gamma: float,
    lambda_: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) advantages and lambda-return value targets.

    Args:
        rewards: float ``[T, ...]`` rewards ``r_t``.
        values: float ``[T, ...]`` ``V(s_t)`` of the behaviour policy.
        bootstrap_values: float ``[T, ...]`` value of the successor of row ``t`` (module doc).
        continues: bool ``[T, ...]``: row ``t + 1`` continues the trajectory of row ``t``.
        gamma: discount factor in ``[0, 1]``.
        lambda_: GAE lambda in ``[0, 1]``.

    Returns:
        ``(advantages, value_targets)``, both float32 ``[T, ...]``; value targets are
        ``advantages + values``.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    deltas = rewards + gamma * np.asarray(bootstrap_values, dtype=np.float64) - values
    carry = gamma * lambda_ * np.asarray(continues, dtype=np.float64)
    adv = np.empty_like(deltas)
    last = np.zeros(deltas.shape[1:], dtype=np.float64)
    for t in range(deltas.shape[0] - 1, -1, -1):
        last = deltas[t] + carry[t] * last
        adv[t] = last
    return adv.astype(np.float32), (adv + values).astype(np.float32)


def compute_returns(
    rewards: np.ndarray,
    bootstrap_values: np.ndarray,
    continues: np.ndarray,
    gamma: float,
) -> np.ndarray:
    """Discounted returns ``G_t``, bootstrapped at every trajectory end; float32 ``[T, ...]``.

    Args mean the same as in ``compute_gae``.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    boot = np.asarray(bootstrap_values, dtype=np.float64)
    cont = np.asarray(continues, dtype=bool)
    out = np.empty_like(rewards)
    nxt = np.zeros(rewards.shape[1:], dtype=np.float64)
    for t in range(rewards.shape[0] - 1, -1, -1):
        nxt = rewards[t] + gamma * np.where(cont[t], nxt, boot[t])
        out[t] = nxt
    return out.astype(np.float32)


def compute_n_step_returns(
    rewards: np.ndarray, continues: np.ndarray, n: int, gamma: float
) -> tuple[np.ndarray, np.ndarray]:
    """n-step returns for n-step Q-learning targets (Sutton & Barto 2018, sec. 7.1).

    For row ``t`` the return sums the rewards of rows ``t .. t + k - 1`` of the same
    trajectory, ``k = min(n, rows up to and including the trajectory's end in this
    fragment)``:

        R_t = sum_{i < k} gamma^i r_{t+i}

    so the target is ``R_t + gamma^k (1 - terminated_{t+k-1}) Q'(next_obs_{t+k-1})``. The
    sum stops at every ``continues == False`` (episode end or fragment cut), so it never
    crosses a reset; rows near a cut bootstrap earlier (``k < n``) from the observation
    after the cut.

    Args:
        rewards: float ``[T, ...]`` one-step rewards ``r_t``.
        continues: bool ``[T, ...]`` (module doc); False at the last row of a fragment.
        n: the largest number of rewards per return (>= 1).
        gamma: discount factor.

    Returns:
        ``(returns float32 [T, ...], steps int64 [T, ...])``: ``R_t`` and ``k``; row
        ``t + steps[t] - 1`` holds the transition's ``next_obs`` and ``terminateds``.

    Raises:
        ValueError: ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"n-step returns need n >= 1, got {n}")
    rewards = np.asarray(rewards, dtype=np.float64)
    cont = np.asarray(continues, dtype=bool)
    horizon = rewards.shape[0]
    returns = rewards.copy()
    steps = np.ones(rewards.shape, dtype=np.int64)
    # chain[t]: the row after the last one summed for row t continues t's trajectory.
    chain = cont.copy()
    discount = 1.0
    for i in range(1, min(n, horizon)):
        discount *= gamma
        add = chain[: horizon - i]
        returns[: horizon - i] += np.where(add, discount * rewards[i:], 0.0)
        steps[: horizon - i] += add
        chain[: horizon - i] = add & cont[i:]
        chain[horizon - i :] = False
    return returns.astype(np.float32), steps


def continues_flat(batch: SampleBatch) -> np.ndarray:
    """``continues`` for a flat (row-major) batch; bool ``[B]``.

    Row ``i + 1`` continues row ``i`` iff row ``i`` did not end its episode, both rows have
    the same ``eps_id`` and ``t[i + 1] == t[i] + 1``. So episodes, fragment cuts and the
    seams of concatenated batches all break the chain.
    """
    n = batch.count
    done = np.asarray(batch[SampleBatch.TERMINATEDS]) | np.asarray(batch[SampleBatch.TRUNCATEDS])
    cont = np.zeros(n, dtype=bool)
    if n > 1:
        eps = batch[SampleBatch.EPS_ID]
        ts = batch[SampleBatch.T]
        cont[:-1] = (~done[:-1]) & (eps[1:] == eps[:-1]) & (ts[1:] == ts[:-1] + 1)
    return cont


def compute_advantages(batch: SampleBatch, gamma: float, lambda_: float) -> SampleBatch:
    """Add ``advantages`` and ``value_targets`` to a flat batch, in place; returns it.

    Needs the columns ``rewards``, ``vf_preds``, ``bootstrap_values``, ``terminateds``,
    ``truncateds``, ``eps_id`` and ``t``. Trajectory pieces are found with
    ``continues_flat``, so this is safe on any concatenation of worker fragments.

    Raises:
        KeyError: a required column is missing.
    """
    adv, targets = compute_gae(
        batch[SampleBatch.REWARDS],
        batch[SampleBatch.VF_PREDS],
        batch[SampleBatch.BOOTSTRAP_VALUES],
        continues_flat(batch),
        gamma,
        lambda_,
    )
    batch[SampleBatch.ADVANTAGES] = adv
    batch[SampleBatch.VALUE_TARGETS] = targets
    return batch
