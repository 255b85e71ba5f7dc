"""``RolloutWorker``: samples fixed-length fragments from a gymnasium vector env.

One worker = one ``gymnasium.vector.SyncVectorEnv`` of ``num_envs`` sub-envs + one torch
policy for inference: the learner's own policy class (``plangraph.rl.policies``), acting
under ``torch.inference_mode()`` with one forward pass per vector step for all sub-envs,
on one torch thread in a Ray actor (``torch_threads=1``). A remote worker's copy only
acts: it never builds an optimizer.

``sample()`` steps every sub-env ``rollout_fragment_length`` (``T``) times and returns one
postprocessed ``SampleBatch`` of exactly ``T * num_envs`` rows, so ``batch.env_steps()``
is the number of sub-env ``step`` calls made: counters can add it directly.

Autoreset. The vector env is created with ``autoreset_mode=SAME_STEP``: when a sub-env's
episode ends at step ``t``, the vector env resets it inside that same ``step`` call,
returns the *reset* observation in ``obs`` and the episode's final observation in
``infos["final_obs"]``. So every recorded row is a real transition (gymnasium's default
``NEXT_STEP`` mode would instead spend the following ``step`` on the reset and return a
reward-0 pseudo-transition that must be dropped, which makes fragments ragged); no row
ever crosses a reset, and episode lengths are exact.

Layout. Fragment buffers are sub-env-major ``[N, T, ...]``, so the flattened batch holds
sub-env ``k``'s rows at ``k*T .. k*T + T - 1`` in time order (row ``k*T + t``). Each
sub-env's trajectory pieces are contiguous; ``eps_id`` and ``t`` identify episodes.

Postprocessing (on the worker, before flattening) is the algorithm's: the worker records
every array of the policy's ``compute_actions`` extras as a column, then hands the
fragment to the policy's ``postprocess_fragment`` hook as a ``postprocessing.Fragment``
(columns ``[N, T, ...]``, ``continues``, the last observation and the final observations
of episodes that ended) and adds the columns it returns. The built-ins
(``plangraph/algorithms/<name>/policy.py``):

* ``a2c``/``ppo``: ``vf_preds = V(s_t)`` for the whole fragment in one forward pass (the
  weights do not change within a fragment), ``bootstrap_values`` (0 on termination,
  ``V(final obs)`` on truncation, ``V(s_{t+1})`` otherwise, ``V(last obs)`` at the fragment
  cut), then GAE(lambda) vectorised over sub-envs (``postprocessing.gae_columns``).
* ``impala``/``appo``: no advantages (V-trace runs on the learner, with the target
  policy's values). The segment structure is explicit (``postprocessing.segment_columns``):
  ``segment_ends`` marks the last row of every segment (episode end, terminated or
  truncated, or the fragment cut) and ``next_obs`` holds the observation to bootstrap from
  there (the final observation at an episode end, the next observation at the cut);
  ``policy_version`` stamps every row with the version of the weights that acted
  (``set_weights(..., {"policy_version": v})``).
* ``dqn``, ``sac``: ``next_obs`` (the final observation at an episode end). With ``n_step >
  1`` each row becomes an n-step transition (``postprocessing.transition_columns``):
  ``rewards`` holds the discounted sum of up to ``n_step`` rewards of the same episode
  within the fragment, ``next_obs``/``terminateds``/``truncateds`` are those of the last
  step summed and ``n_steps`` counts the steps, so the learner bootstraps with
  ``gamma ** n_steps``.

Episode statistics (undiscounted return, length in env steps) of every episode that ends
during ``sample()`` travel on the batch (``episode_returns``/``episode_lengths``). An
episode that spans fragments is reported once, in the fragment where it ends.

Worker-side maps: ``set_batch_transforms`` installs pure per-batch maps (plan nodes the
compiler moved here, pass ``worker-side-maps``) that ``sample()`` applies to the fragment
after postprocessing, in order, before returning it; each must keep the rows, and the
fragment's episode statistics stay with it.

Seeding: ``seeding.derive_seeds(seed, worker_index, num_envs)``; each sub-env is seeded on
its first reset only, then continues its own RNG stream across autoresets.

Checkpoints (``get_state``/``set_state``, a plain data tree). Between two ``sample()``
calls a worker's state is: each sub-env's state (``env_state.capture_env``: exact for
classic-control envs and gymnasium's common wrappers), the current observations, the
partial episodes' return and length accumulators and episode ids, the env steps sampled,
and its policy copy's sampling state (weights as last broadcast, which may lag the
learner's, global timestep, i.e. epsilon, and action RNG). A ``SAME_STEP`` vector env holds
nothing else between steps (its buffers are overwritten by every ``step``). A sub-env that
cannot be captured (e.g. one holding a renderer or a physics-engine handle) is instead
reset on restore with a seed derived from its own seed and the worker's env steps sampled
at the checkpoint (deterministic, but not the uninterrupted run): its partial episode is
dropped (never reported) and a new episode id starts; ``WorkerSet.get_state`` warns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from plangraph.ops.algorithms import as_policy_config
from plangraph.ops.policies import AlgorithmConfig
from plangraph.rl.env_state import capture_env, restore_env
from plangraph.rl.postprocessing import Fragment
from plangraph.rl.registrations import Registrations
from plangraph.rl.row_layout import action_row, sample_row_layout
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.seeding import derive_seeds
from plangraph.rl.sequences import PREV_ACTIONS, PREV_REWARDS
from plangraph.rl.worker_gradients import WorkerGradients
from plangraph.rl.wrappers import make_env

if TYPE_CHECKING:
    from plangraph.rl.policy import TorchPolicy

__all__ = [
    "UNSAVED_KEY",
    "EnvSpec",
    "RolloutWorker",
    "env_creator",
    "make_vector_env",
    "sample_row_layout",
    "unsaved_state",
]

UNSAVED_KEY = "unsaved"
"""Key of a worker's ``get_state()`` listing, in words, what it holds that the state does
not save (:func:`unsaved_state`); the worker set pops it and warns (``ResumeWarning``)."""


def unsaved_state(shard_state: Mapping[str, Any], policies: Sequence[Any]) -> list[str]:
    """What a rollout worker holds that its ``get_state()`` does not save, in words: the
    per-shard operators' ``shard_state`` (any entry: what it holds is the operator's own,
    and a restored worker starts without it), and the optimizer state of a policy copy
    that trains on the worker (DD-PPO's Adam moments; a copy saves only its sampling
    state). ``policies``: the copies whose sampling state is saved."""
    out = []
    if shard_state:
        keys = ", ".join(repr(k) for k in sorted(shard_state))
        out.append(f"per-shard operator state (worker.shard_state {keys})")
    if any(p.has_optimizer_state() for p in policies):
        out.append(
            "policy copy's optimizer state (it trains on the worker, as DD-PPO's: e.g. "
            "Adam's moments and step count)"
        )
    return out


EnvSpec = str | Callable[[], gym.Env]
"""A gymnasium env id (``"CartPole-v1"``) or a zero-argument creator of a ``gym.Env``."""
BatchTransform = tuple[str, Callable[[SampleBatch], SampleBatch]]
"""``(plan node id, pure per-batch map)``: a map ``sample()`` applies to each fragment."""

_SB = SampleBatch
# eps_id = worker_index * _EPS_STRIDE + per-worker episode counter (unique within a run).
_EPS_STRIDE = 1 << 40


def env_creator(env: EnvSpec) -> Callable[[], gym.Env]:
    """A zero-argument creator for ``env``.

    Raises:
        TypeError: ``env`` is neither a string nor callable.
    """
    if isinstance(env, str):
        env_id = env

        def _make() -> gym.Env:
            return make_env(env_id)

        return _make
    if callable(env):
        return env
    raise TypeError(f"env must be a gymnasium env id or a creator callable, got {env!r}")


def make_vector_env(env: EnvSpec, num_envs: int) -> gym.vector.SyncVectorEnv:
    """``SyncVectorEnv`` of ``num_envs`` copies in ``SAME_STEP`` autoreset mode, no obs copy."""
    creator = env_creator(env)
    return gym.vector.SyncVectorEnv(
        [creator] * num_envs,
        copy=False,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


class RolloutWorker:
    """Samples postprocessed fragments; usable in-process or as a Ray actor.

    Args:
        env: gymnasium env id or env creator (see ``EnvSpec``).
        num_envs: sub-envs ``N`` in the vector env (>= 1).
        rollout_fragment_length: env steps ``T`` per sub-env in one ``sample()`` (>= 1).
        policy_config: a ``PolicyConfig`` member (``A2CConfig``, ``PPOConfig``,
            ``DQNConfig``, ``IMPALAConfig``, ``APPOConfig``) or an equivalent dict.
        seed: the run seed; this worker's seeds derive from ``(seed, worker_index)``.
        worker_index: 0 for the local worker, ``1..num_workers`` for remote ones.
        policy: use this policy instead of building one (the local learner policy when
            sampling in-process); its spaces must match the env's.
        torch_threads: if set, ``torch.set_num_threads(torch_threads)`` (1 in Ray actors).
        num_workers: remote workers of the worker set this one belongs to (``worker_index``
            ``1..num_workers``); a DQN policy with ``per_worker_epsilon_alpha`` explores
            with this worker's Ape-X epsilon. ``None``: the only worker.
        registrations: the driver's user algorithms and model types
            (``plangraph.rl.registrations``), installed here first.

    Raises:
        ValueError: ``num_envs`` or ``rollout_fragment_length`` < 1, or unsupported spaces.
    """

    @property
    def index(self) -> int:
        """``worker_index``: 0 for the local worker, ``1..num_workers`` for remote ones
        (what a per-shard operator's ``fn(worker, item)`` reads as ``worker.index``)."""
        return self.worker_index

    def __init__(
        self,
        env: EnvSpec,
        num_envs: int,
        rollout_fragment_length: int,
        policy_config: Any,
        seed: int = 0,
        worker_index: int = 0,
        *,
        policy: TorchPolicy[AlgorithmConfig] | None = None,
        torch_threads: int | None = None,
        num_workers: int | None = None,
        registrations: Registrations | None = None,
    ) -> None:
        if registrations is not None:  # before the config: it may be a user algorithm's
            registrations.install()
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if rollout_fragment_length < 1:
            raise ValueError(f"rollout_fragment_length must be >= 1, got {rollout_fragment_length}")
        self.config = as_policy_config(policy_config)
        self.num_envs = int(num_envs)
        self.rollout_fragment_length = int(rollout_fragment_length)
        self.worker_index = int(worker_index)
        # What per-shard operators (placement="shard") keep between items on this worker,
        # by node id: they run inside it (plangraph.runtime.shards).
        self.shard_state: dict[str, Any] = {}
        self.policy_seed, self.sub_env_seeds = derive_seeds(seed, worker_index, num_envs)
        self.env = make_vector_env(env, num_envs)
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        if torch_threads is not None:
            import torch

            torch.set_num_threads(torch_threads)
        self.policy: TorchPolicy[AlgorithmConfig]
        if policy is not None:
            self.policy = policy
        else:
            from plangraph.rl.policies import make_policy

            self.policy = make_policy(
                self.observation_space, self.action_space, self.config, self.policy_seed
            )
        if (
            num_workers
            and self.worker_index >= 1
            and hasattr(self.policy, "set_exploration_worker")
        ):
            self.policy.set_exploration_worker(self.worker_index - 1, num_workers)
        obs_space = self.observation_space
        if not isinstance(obs_space, gym.spaces.Box):  # a policy given by the caller
            raise ValueError(f"RolloutWorker samples Box observations, got {obs_space}")
        self._obs_shape = tuple(obs_space.shape)
        self._obs_dtype = obs_space.dtype
        self._action_shape, self._action_dtype = action_row(self.action_space)
        self._action_low: np.ndarray | None = None
        self._action_high: np.ndarray | None = None
        if isinstance(self.action_space, gym.spaces.Box):
            self._action_low = self.action_space.low
            self._action_high = self.action_space.high
        obs, _ = self.env.reset(seed=list(self.sub_env_seeds))
        self._obs = obs
        self._ep_return = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_len = np.zeros(self.num_envs, dtype=np.int64)
        self._eps_counter = 0
        self._eps_ids = np.array([self._new_eps_id() for _ in range(self.num_envs)])
        #: recurrent policies: what the model reads besides the observation at each
        #: sub-env's next step (``plangraph.rl.sequences``: ``state_in_*``,
        #: ``prev_actions``, ``prev_rewards``, each ``[N, ...]``); ``{}`` otherwise
        self._rec_inputs: dict[str, np.ndarray] = {}
        if self.policy.is_recurrent:
            self._rec_inputs = self._initial_inputs()
        self.num_env_steps_sampled = 0
        #: version of the behaviour weights, from ``set_weights(..., global_vars)``
        self.policy_version = 0
        self._transforms: tuple[BatchTransform, ...] = ()
        #: seconds spent in each batch transform (by node id) since it was installed
        self.transform_time_s: dict[str, float] = {}

    def _initial_inputs(self) -> dict[str, np.ndarray]:
        """A recurrent policy's inputs at the first step of ``N`` fresh episodes."""
        out = self.policy.initial_state(self.num_envs)
        out[PREV_ACTIONS] = np.zeros((self.num_envs, *self._action_shape), self._action_dtype)
        out[PREV_REWARDS] = np.zeros(self.num_envs, dtype=np.float32)
        return out

    def _new_eps_id(self) -> int:
        eid = self.worker_index * _EPS_STRIDE + self._eps_counter
        self._eps_counter += 1
        return eid

    # --- sampling ---------------------------------------------------------------------
    def sample(self) -> SampleBatch:
        """Step every sub-env ``T`` times; one postprocessed batch of ``T * N`` rows.

        Columns: ``obs, actions, rewards, terminateds, truncateds, eps_id, t`` plus
        ``action_logp, action_dist_inputs, vf_preds, bootstrap_values, advantages,
        value_targets`` (a2c/ppo), ``action_logp, action_dist_inputs, next_obs,
        segment_ends, policy_version`` (impala/appo) or ``next_obs`` (dqn). Row ``k*T + t``
        is step ``t`` of sub-env ``k``.
        """
        import torch

        # One inference-mode section for the whole fragment: entered around each forward
        # pass instead, it costs more than the pass (``plangraph.rl.policy.inference``).
        with torch.inference_mode():
            batch = self._sample_fragment()
        return self._apply_transforms(batch) if self._transforms else batch

    def _sample_fragment(self) -> SampleBatch:
        n, horizon = self.num_envs, self.rollout_fragment_length
        policy, env = self.policy, self.env
        obs_buf = np.empty((n, horizon, *self._obs_shape), dtype=self._obs_dtype)
        act_buf = np.empty((n, horizon, *self._action_shape), dtype=self._action_dtype)
        rew_buf = np.empty((n, horizon), dtype=np.float32)
        term_buf = np.empty((n, horizon), dtype=bool)
        trunc_buf = np.empty((n, horizon), dtype=bool)
        eps_buf = np.empty((n, horizon), dtype=np.int64)
        t_buf = np.empty((n, horizon), dtype=np.int64)
        # The policy's compute_actions extras (action_logp, ...), buffered as they come.
        extra_bufs: dict[str, np.ndarray] = {}
        # (t, sub-env, final observation) of every episode end in this fragment.
        finals: list[tuple[int, int, np.ndarray]] = []
        ep_returns: list[float] = []
        ep_lengths: list[int] = []
        # Recurrent policies: each sub-env's state (and previous action and reward), as
        # it was before each step, and as it was after an episode's last step.
        recurrent = bool(self._rec_inputs)
        inputs = self._rec_inputs
        rec_bufs = {
            name: np.empty((n, horizon, *v.shape[1:]), v.dtype) for name, v in inputs.items()
        }
        successor_inputs: dict[tuple[int, int], dict[str, np.ndarray]] = {}

        obs = self._obs
        for t in range(horizon):
            obs_buf[:, t] = obs
            eps_buf[:, t] = self._eps_ids
            t_buf[:, t] = self._ep_len
            if recurrent:
                for name, value in inputs.items():
                    rec_bufs[name][:, t] = value
                actions, extra, state = policy.compute_actions_recurrent(obs, inputs)
            else:
                actions, extra = policy.compute_actions(obs)
            act_buf[:, t] = actions
            for key, value in extra.items():
                buf = extra_bufs.get(key)
                if buf is None:
                    value = np.asarray(value)
                    buf = extra_bufs[key] = np.empty((n, horizon, *value.shape[1:]), value.dtype)
                buf[:, t] = value
            # Box actions: the batch keeps the unclipped sample (its log-prob is the one
            # recorded); only the env gets it clipped to the bounds.
            if self._action_low is not None:
                actions = np.clip(actions, self._action_low, self._action_high)
            obs, rew, term, trunc, infos = env.step(actions)
            rew_buf[:, t] = rew
            term_buf[:, t] = term
            trunc_buf[:, t] = trunc
            self._ep_return += rew
            self._ep_len += 1
            done = np.logical_or(term, trunc)
            if recurrent:
                inputs = {
                    **state,
                    PREV_ACTIONS: act_buf[:, t].copy(),
                    PREV_REWARDS: rew_buf[:, t].copy(),
                }
            if done.any():
                final_obs = infos["final_obs"]
                if recurrent:
                    inputs = self._reset_inputs(inputs, done, successor_inputs, t)
                for k in np.flatnonzero(done):
                    finals.append((t, int(k), np.array(final_obs[k], dtype=self._obs_dtype)))
                    ep_returns.append(float(self._ep_return[k]))
                    ep_lengths.append(int(self._ep_len[k]))
                    self._ep_return[k] = 0.0
                    self._ep_len[k] = 0
                    self._eps_ids[k] = self._new_eps_id()
        self._obs = obs
        self._rec_inputs = inputs

        columns: dict[str, np.ndarray] = {
            _SB.OBS: obs_buf,
            _SB.ACTIONS: act_buf,
            _SB.REWARDS: rew_buf,
            _SB.TERMINATEDS: term_buf,
            _SB.TRUNCATEDS: trunc_buf,
            _SB.EPS_ID: eps_buf,
            _SB.T: t_buf,
            **extra_bufs,
            **rec_bufs,
        }
        continues = ~(term_buf | trunc_buf)
        continues[:, -1] = False
        successors = {(k, t): f for t, k, f in finals}
        fragment = Fragment(
            columns,
            continues,
            obs,
            successors,
            self.policy_version,
            next_inputs=inputs,
            successor_inputs=successor_inputs,
        )
        columns.update(policy.postprocess_fragment(fragment))
        rows = n * horizon
        self.num_env_steps_sampled += rows
        return SampleBatch(
            {k: v.reshape(rows, *v.shape[2:]) for k, v in columns.items()},
            episode_returns=ep_returns,
            episode_lengths=ep_lengths,
        )

    def _reset_inputs(
        self,
        inputs: dict[str, np.ndarray],
        done: np.ndarray,
        successor_inputs: dict[tuple[int, int], dict[str, np.ndarray]],
        t: int,
    ) -> dict[str, np.ndarray]:
        """A recurrent policy's inputs after step ``t`` with exactly the sub-envs whose
        episode ended (``done``, bool ``[N]``) back at the initial state, previous action
        and reward; what those sub-envs held is kept in ``successor_inputs[(k, t)]`` (the
        bootstrap value of a truncated episode reads it)."""
        for k in np.flatnonzero(done):
            successor_inputs[(int(k), t)] = {name: v[k].copy() for name, v in inputs.items()}
        fresh = self._initial_inputs()
        out = {}
        for name, value in inputs.items():
            mask = done.reshape(-1, *([1] * (value.ndim - 1)))
            out[name] = np.where(mask, fresh[name], value).astype(value.dtype, copy=False)
        return out

    # --- worker-side maps -------------------------------------------------------------
    def set_batch_transforms(self, transforms: Sequence[BatchTransform]) -> None:
        """Apply ``transforms`` (``(node id, fn)``, in order) to every fragment ``sample()``
        returns from now on; ``()`` removes them. Each ``fn(batch) -> SampleBatch`` must be
        pure and keep the rows (same count and order)."""
        self._transforms = tuple((str(name), fn) for name, fn in transforms)
        self.transform_time_s = {name: 0.0 for name, _ in self._transforms}

    def _apply_transforms(self, batch: SampleBatch) -> SampleBatch:
        """``batch`` through the installed transforms; episode statistics kept.

        Raises:
            RuntimeError: a transform raised, or returned something other than a
                ``SampleBatch`` of the same number of rows (names the plan node).
        """
        for name, fn in self._transforms:
            start = time.perf_counter()
            try:
                out = fn(batch)
            except Exception as exc:
                raise RuntimeError(
                    f"node {name!r} (run on rollout worker {self.worker_index} by pass "
                    f"worker-side-maps) failed: {type(exc).__name__}: {exc}"
                ) from exc
            self.transform_time_s[name] += time.perf_counter() - start
            if not isinstance(out, SampleBatch) or out.count != batch.count:
                got = f"{out.count} rows" if isinstance(out, SampleBatch) else type(out).__name__
                raise RuntimeError(
                    f"node {name!r} is declared pure (it may run on the rollout workers) but "
                    f"returned {got} for a fragment of {batch.count} rows; a pure operator "
                    "keeps the rows (register it without pure=True otherwise)"
                )
            # The source counts episodes from the fragment: a pure map cannot change them.
            out.episode_returns = batch.episode_returns
            out.episode_lengths = batch.episode_lengths
            batch = out
        return batch

    def sample_and_compute_gradients(self) -> WorkerGradients:
        """A3C's worker step: ``sample()`` one fragment, then this worker's policy's
        gradients on it (no optimizer step); see ``plangraph.rl.worker_gradients``.

        Returns:
            ``WorkerGradients`` of ``num_envs * rollout_fragment_length`` env steps.

        Raises:
            KeyError: the policy's loss needs a column the fragment lacks.
        """
        batch = self.sample()
        grads, stats = self.policy.compute_gradients(batch)
        return WorkerGradients(
            grads=[np.asarray(g, dtype=np.float32) for g in grads],
            stats={k: float(v) for k, v in stats.items() if np.ndim(v) == 0},
            count=batch.env_steps(),
            episode_returns=batch.episode_returns,
            episode_lengths=batch.episode_lengths,
            policy_version=self.policy_version,
            worker_index=self.worker_index,
        )

    # --- weights ----------------------------------------------------------------------
    def get_weights(self) -> dict[str, np.ndarray]:
        """The inference policy's weights."""
        return self.policy.get_weights()

    def set_weights(
        self, weights: Mapping[str, np.ndarray], global_vars: Mapping[str, Any] | None = None
    ) -> None:
        """Load learner weights and, if given, global vars (``{"timestep": ...}``).

        ``global_vars["policy_version"]`` (int), when present, becomes the version stamped
        on the impala/appo batches sampled from now on (absent: the version is kept; it
        starts at 0).
        """
        self.policy.set_weights(weights)
        if global_vars:
            if "policy_version" in global_vars:
                self.policy_version = int(global_vars["policy_version"])
            self.set_global_vars(global_vars)

    def set_global_vars(self, global_vars: Mapping[str, Any]) -> None:
        """Global vars for the policy (``timestep``) and, under ``"obs_filter"``, the worker
        set's pooled observation moments for every ``normalize_observation`` layer."""
        self.policy.set_global_vars(global_vars)
        moments = global_vars.get("obs_filter")
        if moments is not None:
            for layer in self._normalizers():
                layer.set_moments(moments["count"], moments["mean"], moments["m2"])

    def _normalizers(self) -> list[Any]:
        from plangraph.rl.wrappers import find_normalizers

        return [layer for sub_env in self.env.envs for layer in find_normalizers(sub_env)]

    def take_obs_filter_delta(self) -> dict[str, Any] | None:
        """The observation moments every ``normalize_observation`` layer of this worker
        saw since the last call, pooled (``{"count", "mean", "m2"}``, float64), and
        cleared; None when the env has no such layer."""
        from plangraph.rl.wrappers import merge_moments

        layers = self._normalizers()
        if not layers:
            return None
        pooled = layers[0].take_delta()
        for layer in layers[1:]:
            pooled = merge_moments(pooled, layer.take_delta())
        return {"count": pooled[0], "mean": pooled[1], "m2": pooled[2]}

    # --- checkpoints ------------------------------------------------------------------
    def get_state(self, include_policy: bool = True) -> dict[str, Any]:
        """This worker's state between two ``sample()`` calls, as plain data.

        Keys: ``worker_index``, ``num_envs``, ``envs`` (one entry per sub-env:
        ``{"snapshot": ...}`` from ``env_state.capture_env``, or ``{"snapshot": None,
        "reason": str}`` where it cannot be captured), ``obs`` (``[N, *obs_shape]``,
        obs dtype), ``ep_return`` (float64 ``[N]``), ``ep_len`` (int64 ``[N]``, env
        steps), ``eps_ids`` (int64 ``[N]``), ``eps_counter``, ``num_env_steps_sampled``,
        ``policy_version`` (of the weights it holds), for a recurrent policy
        ``recurrent_inputs`` (each sub-env's state, previous action and reward for its
        next step, ``{name: [N, ...]}``: ``plangraph.rl.sequences``) and, with
        ``include_policy`` (False where the policy is the learner's own, whose state the
        checkpoint already holds), ``policy`` (``TorchPolicy.get_sampling_state()``).
        """
        envs = []
        for sub_env in self.env.envs:
            snapshot, reason = capture_env(sub_env)
            entry: dict[str, Any] = {"snapshot": snapshot}
            if snapshot is None:
                entry["reason"] = reason
            envs.append(entry)
        state: dict[str, Any] = {
            "worker_index": self.worker_index,
            "num_envs": self.num_envs,
            "envs": envs,
            "obs": np.array(self._obs, copy=True),
            "ep_return": self._ep_return.copy(),
            "ep_len": self._ep_len.copy(),
            "eps_ids": np.asarray(self._eps_ids, dtype=np.int64).copy(),
            "eps_counter": self._eps_counter,
            "num_env_steps_sampled": self.num_env_steps_sampled,
            "policy_version": self.policy_version,
        }
        if self._rec_inputs:
            state["recurrent_inputs"] = {k: v.copy() for k, v in self._rec_inputs.items()}
        if include_policy:
            state["policy"] = self.policy.get_sampling_state()
        unsaved = unsaved_state(self.shard_state, [self.policy] if include_policy else [])
        if unsaved:
            state[UNSAVED_KEY] = unsaved
        return state

    def set_state(self, state: Mapping[str, Any]) -> list[int]:
        """Continue from ``get_state()`` of a worker with the same env, ``num_envs`` and
        ``worker_index``; returns the sub-envs that were reset instead of restored (their
        snapshot was ``None``, see the module docstring).

        Raises:
            ValueError: the state is of a worker with another ``num_envs`` or
                ``worker_index``, or a sub-env snapshot does not fit this worker's env.
        """
        if int(state["num_envs"]) != self.num_envs:
            raise ValueError(
                f"worker state has {state['num_envs']} sub-envs, this worker has {self.num_envs}"
            )
        if int(state["worker_index"]) != self.worker_index:
            raise ValueError(
                f"worker state is of worker {state['worker_index']}, this is worker "
                f"{self.worker_index}"
            )
        obs = np.array(state["obs"], dtype=self._obs_dtype, copy=True)
        self._ep_return = np.array(state["ep_return"], dtype=np.float64, copy=True)
        self._ep_len = np.array(state["ep_len"], dtype=np.int64, copy=True)
        self._eps_ids = np.array(state["eps_ids"], dtype=np.int64, copy=True)
        self._eps_counter = int(state["eps_counter"])
        self.num_env_steps_sampled = int(state["num_env_steps_sampled"])
        # Absent in checkpoints written before versions were saved: as a fresh worker.
        self.policy_version = int(state.get("policy_version", 0))
        if self._rec_inputs:
            saved = state.get("recurrent_inputs")
            if saved is None or set(saved) != set(self._rec_inputs):
                raise ValueError(
                    "worker state holds no recurrent state for this worker's recurrent policy "
                    f"(expected {sorted(self._rec_inputs)})"
                )
            self._rec_inputs = {
                k: np.array(saved[k], dtype=v.dtype, copy=True) for k, v in self._rec_inputs.items()
            }
        reset = []
        for k, (sub_env, entry) in enumerate(zip(self.env.envs, state["envs"], strict=True)):
            if entry["snapshot"] is not None:
                restore_env(sub_env, entry["snapshot"])
                continue
            # The documented reset policy: a seed derived from this sub-env's own seed and
            # the progress at the checkpoint, so resuming twice from it gives the same run.
            seq = np.random.SeedSequence(
                self.sub_env_seeds[k], spawn_key=(self.num_env_steps_sampled,)
            )
            obs[k], _ = sub_env.reset(seed=int(seq.generate_state(1, dtype=np.uint64)[0] >> 1))
            self._ep_return[k] = 0.0
            self._ep_len[k] = 0
            self._eps_ids[k] = self._new_eps_id()
            reset.append(k)
        if reset and self._rec_inputs:
            done = np.zeros(self.num_envs, dtype=bool)
            done[reset] = True
            self._rec_inputs = self._reset_inputs(self._rec_inputs, done, {}, 0)
        self._obs = obs
        if "policy" in state:
            self.policy.set_sampling_state(state["policy"])
        return reset

    def get_spaces(self) -> tuple[gym.Space[Any], gym.Space[Any]]:
        """``(single observation space, single action space)`` of the sub-envs."""
        return self.observation_space, self.action_space

    def ping(self) -> bool:
        """Liveness probe for ``WorkerSet`` health checks."""
        return True

    def location(self) -> dict[str, Any]:
        """Where this worker runs: ``worker_index``, ``pid``, ``hostname`` and, in a Ray
        actor, the Ray ``node_id`` (hex) and ``node_ip`` of its node (both ``None`` in
        the driver's local worker)."""
        import os
        import socket

        node_id = node_ip = None
        try:
            import ray

            if ray.is_initialized():
                node_id = ray.get_runtime_context().get_node_id()
                node_ip = ray.util.get_node_ip_address()
        except Exception:  # location is informational; never fail a worker over it
            pass
        return {
            "worker_index": self.worker_index,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "node_id": node_id,
            "node_ip": node_ip,
        }

    def stop(self) -> None:
        """Close the vector env."""
        self.env.close()
