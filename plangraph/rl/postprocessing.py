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

Rollout workers hand each policy a :class:`Fragment` (``TorchPolicy.postprocess_fragment``,
the algorithm's hook); :func:`gae_columns`, :func:`segment_columns` and
:func:`transition_columns` are the postprocessings the built-in algorithms use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

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


# --- a fragment as the postprocessing hooks see it --------------------------------------


@dataclass
class Fragment:
    """One policy's rows of one ``sample()`` call, before flattening: ``N`` sequences of
    ``T`` steps each (a single-agent worker: its ``N`` sub-envs; a multi-agent worker: one
    sequence of each agent's pieces laid end to end).

    Attributes:
        columns: ``obs [N, T, *obs_shape]`` (the space's dtype), ``actions
            [N, T, *action_shape]``, ``rewards`` float32 ``[N, T]``, ``terminateds`` and
            ``truncateds`` bool ``[N, T]``, ``eps_id`` and ``t`` int64 ``[N, T]``, and each
            array of the policy's ``compute_actions`` extras, ``[N, T, ...]``.
        continues: bool ``[N, T]``: the next row of the sequence is the next step of the
            same episode (False at every episode end and at each sequence's last row).
        last_obs: ``[N, *obs_shape]``: the observation after each sequence's last row
            (where sampling continues from).
        successors: ``(n, t) -> observation`` after row ``(n, t)`` where that is not the
            next row's observation: an episode's final observation where it ended
            mid-sequence.
        policy_version: version of the weights that acted (``set_weights`` global vars).
        next_inputs: recurrent policies (``plangraph.rl.sequences``): what the model reads
            besides the observation at the step after each sequence's last row,
            ``{"state_in_<name>": float32 [N, ...], "prev_actions": [N, ...],
            "prev_rewards": float32 [N]}`` (where sampling continues from); ``{}``
            otherwise.
        successor_inputs: recurrent policies: ``(n, t) -> {name: [...]}``, the same for
            the final observation of an episode that ended at row ``(n, t)`` (the state
            after that step, before the reset), keyed as ``successors``.
    """

    columns: dict[str, np.ndarray]
    continues: np.ndarray
    last_obs: np.ndarray
    successors: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    policy_version: int = 0
    next_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    successor_inputs: dict[tuple[int, int], dict[str, np.ndarray]] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        """``(N, T)``."""
        n, t = self.continues.shape
        return int(n), int(t)

    @cached_property
    def next_obs(self) -> np.ndarray:
        """The observation after each step, ``[N, T, *obs_shape]``: the episode's final
        observation where it ended, otherwise the next step's (``last_obs`` at a
        sequence's last row unless an episode ended there)."""
        obs = self.columns[SampleBatch.OBS]
        out = np.empty_like(obs)
        out[:, :-1] = obs[:, 1:]
        out[:, -1] = self.last_obs
        for (k, t), value in self.successors.items():
            out[k, t] = value
        return out

    def next_obs_where(self, mask: np.ndarray) -> np.ndarray:
        """``next_obs[mask]`` for a bool ``[N, T]`` mask, rows in ``(n, t)`` order, without
        building all of ``next_obs``: a fragment of images need not be copied for a few
        bootstrap observations."""
        obs = self.columns[SampleBatch.OBS]
        _, horizon = self.shape
        rows = []
        for k, t in zip(*np.nonzero(mask), strict=True):
            key = (int(k), int(t))
            if key in self.successors:
                rows.append(self.successors[key])
            elif t == horizon - 1:
                rows.append(self.last_obs[k])
            else:
                rows.append(obs[k, t + 1])
        if not rows:
            return np.empty((0, *obs.shape[2:]), dtype=obs.dtype)
        return np.stack(rows).astype(obs.dtype, copy=False)


def gae_columns(
    fragment: Fragment,
    values: Callable[[np.ndarray], np.ndarray],
    gamma: float,
    lambda_: float,
) -> dict[str, np.ndarray]:
    """GAE(lambda) columns of a fragment (Schulman et al. 2016): ``vf_preds``,
    ``bootstrap_values``, ``advantages``, ``value_targets``, float32 ``[N, T]``.

    ``values(obs [B, *obs_shape]) -> float32 [B]`` is the policy's ``V``. It runs once on
    the fragment's observations and once on the successor observations that are not the
    next row's: each sequence's ``last_obs`` and the final observations of truncated
    episodes (in that order, ``successors`` in their order); a terminated step
    bootstraps from 0.
    """
    cols = fragment.columns
    n, horizon = fragment.shape
    obs = cols[SampleBatch.OBS]
    obs_shape = obs.shape[2:]
    vf = np.asarray(values(obs.reshape(n * horizon, *obs_shape)), dtype=np.float32)
    vf = vf.reshape(n, horizon)
    term = cols[SampleBatch.TERMINATEDS]
    truncated = [key for key in fragment.successors if not term[key]]
    boot_obs = [fragment.last_obs] + [fragment.successors[key][None] for key in truncated]
    boot_v = np.asarray(values(np.concatenate(boot_obs).astype(obs.dtype)), dtype=np.float32)
    return _gae_from_values(fragment, vf, boot_v, truncated, gamma, lambda_)


def recurrent_gae_columns(
    fragment: Fragment,
    values: Callable[[np.ndarray, dict[str, np.ndarray]], np.ndarray],
    gamma: float,
    lambda_: float,
) -> dict[str, np.ndarray]:
    """``gae_columns`` of a recurrent policy's fragment: ``vf_preds`` are the values the
    policy recorded while acting (its ``vf_preds`` column, float32 ``[N, T]``: each from
    the state the worker held at that step), and the bootstrap values come from
    ``values(obs [M, *obs_shape], inputs {name: [M, ...]}) -> float32 [M]``, one step of
    the model from the state after the step bootstrapped from (``Fragment.next_inputs``
    for each sequence's ``last_obs``, ``successor_inputs`` for a truncated episode's final
    observation); a terminated step bootstraps from 0.

    Raises:
        KeyError: the fragment has no ``vf_preds`` column or no ``next_inputs``.
    """
    cols = fragment.columns
    obs = cols[SampleBatch.OBS]
    vf = np.asarray(cols[SampleBatch.VF_PREDS], dtype=np.float32)
    if not fragment.next_inputs:
        raise KeyError("a recurrent fragment needs next_inputs (the state after its last row)")
    term = cols[SampleBatch.TERMINATEDS]
    truncated = [key for key in fragment.successors if not term[key]]
    boot_obs = [fragment.last_obs] + [fragment.successors[key][None] for key in truncated]
    boot_in = {
        name: np.concatenate(
            [first] + [np.asarray(fragment.successor_inputs[key][name])[None] for key in truncated]
        )
        for name, first in fragment.next_inputs.items()
    }
    boot_v = np.asarray(
        values(np.concatenate(boot_obs).astype(obs.dtype), boot_in), dtype=np.float32
    )
    return _gae_from_values(fragment, vf, boot_v, truncated, gamma, lambda_)


def _gae_from_values(
    fragment: Fragment,
    vf: np.ndarray,
    boot_v: np.ndarray,
    truncated: list[tuple[int, int]],
    gamma: float,
    lambda_: float,
) -> dict[str, np.ndarray]:
    """GAE columns from ``vf`` float32 ``[N, T]`` and ``boot_v`` float32 ``[N + len(
    truncated)]`` (the values of each sequence's ``last_obs``, then of the truncated
    episodes' final observations)."""
    cols = fragment.columns
    n, horizon = fragment.shape
    term = cols[SampleBatch.TERMINATEDS]
    bootstrap = np.empty((n, horizon), dtype=np.float32)
    bootstrap[:, :-1] = vf[:, 1:]
    bootstrap[:, -1] = boot_v[:n]
    for j, key in enumerate(truncated):
        bootstrap[key] = boot_v[n + j]
    bootstrap[term] = 0.0
    adv, targets = compute_gae(
        cols[SampleBatch.REWARDS].T, vf.T, bootstrap.T, fragment.continues.T, gamma, lambda_
    )
    return {
        SampleBatch.VF_PREDS: vf,
        SampleBatch.BOOTSTRAP_VALUES: bootstrap,
        SampleBatch.ADVANTAGES: np.ascontiguousarray(adv.T),
        SampleBatch.VALUE_TARGETS: np.ascontiguousarray(targets.T),
    }


def segment_columns(fragment: Fragment) -> dict[str, np.ndarray]:
    """The segment structure V-trace runs along (Espeholt et al. 2018): ``next_obs``,
    ``segment_ends`` (bool ``[N, T]``: an episode end or a sequence's last row) and
    ``policy_version`` (int64 ``[N, T]``)."""
    ends = ~fragment.continues
    return {
        SampleBatch.NEXT_OBS: fragment.next_obs,
        SampleBatch.SEGMENT_ENDS: ends,
        SampleBatch.POLICY_VERSION: np.full(ends.shape, fragment.policy_version, dtype=np.int64),
    }


TRANSITION_LOSS_COLUMNS: tuple[str, ...] = (
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.REWARDS,
    SampleBatch.NEXT_OBS,
    SampleBatch.TERMINATEDS,
    SampleBatch.WEIGHTS,
    SampleBatch.N_STEPS,
)
"""The columns a learner on replayed :func:`transition_columns` rows reads (DQN, SAC,
DDPG, TD3: a policy's ``loss_columns``); ``weights`` (prioritized replay's importance
weights) and ``n_steps`` are optional (:data:`TRANSITION_OPTIONAL_COLUMNS`)."""

TRANSITION_OPTIONAL_COLUMNS: tuple[str, ...] = (SampleBatch.WEIGHTS, SampleBatch.N_STEPS)
"""Of :data:`TRANSITION_LOSS_COLUMNS`, those a batch may lack: uniform replay has no
``weights``, 1-step postprocessing no ``n_steps``."""


def transition_columns(fragment: Fragment, n_step: int, gamma: float) -> dict[str, np.ndarray]:
    """Single transitions for replay: ``next_obs``; with ``n_step > 1`` each row becomes
    the transition from ``s_t`` over ``m <= n_step`` steps (Sutton & Barto 2018, sec.
    7.1): ``rewards`` the discounted sum of ``m`` rewards of the same episode within the
    sequence, ``next_obs``, ``terminateds`` and ``truncateds`` those of row ``t + m - 1``,
    and ``n_steps = m`` (int64), so the learner bootstraps with ``gamma ** m``."""
    if n_step <= 1:
        return {SampleBatch.NEXT_OBS: fragment.next_obs}
    cols = fragment.columns
    rew = cols[SampleBatch.REWARDS]
    returns, steps = compute_n_step_returns(rew.T, fragment.continues.T, n_step, gamma)
    steps = np.ascontiguousarray(steps.T)
    last = np.arange(rew.shape[1])[None, :] + steps - 1
    seq = np.arange(rew.shape[0])[:, None]
    return {
        SampleBatch.REWARDS: np.ascontiguousarray(returns.T),
        SampleBatch.NEXT_OBS: fragment.next_obs[seq, last],
        SampleBatch.TERMINATEDS: cols[SampleBatch.TERMINATEDS][seq, last],
        SampleBatch.TRUNCATEDS: cols[SampleBatch.TRUNCATEDS][seq, last],
        SampleBatch.N_STEPS: steps,
    }
