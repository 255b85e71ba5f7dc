"""Evaluation episodes: a policy acts greedily in its own envs, episodes on their own seeds.

``run_episodes(policy, envs, seeds)`` plays exactly ``len(seeds)`` episodes, episode ``k``
reset with ``seeds[k]``, spread over the given envs (each env plays its next episode as soon
as its current one ends; the actions of all envs in play come from one batched forward
pass per step). The seeds fix the episodes: the same weights give the same returns, however
many envs play them. Returns are undiscounted; an episode ends on termination, on
truncation (the env's time limit) or after ``max_episode_steps``.

Seeds come from ``evaluation_seeds(seed, episodes, round_)``: a ``SeedSequence`` stream
``(seed, spawn_key=(EVALUATION_STREAM, round_))``, disjoint from every rollout worker's
stream (``plangraph.rl.seeding``), so evaluation never replays a training episode's start.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = [
    "DEFAULT_MAX_EPISODE_STEPS",
    "EVALUATION_STREAM",
    "EvaluationResult",
    "evaluation_seeds",
    "run_episodes",
]

EVALUATION_STREAM = 0x6576616C
"""First spawn-key entry of the evaluation seed streams ("eval" in ASCII)."""

DEFAULT_MAX_EPISODE_STEPS = 100_000
"""An evaluation episode longer than this is cut (env steps): an env without a time limit
must not hang the run."""


def evaluation_seeds(seed: int, episodes: int, round_: int = 0) -> list[int]:
    """``episodes`` env seeds (non-negative, below ``2**63``) for evaluation round
    ``round_`` of a run seeded ``seed`` (training evaluates round = iteration)."""
    seq = np.random.SeedSequence(int(seed), spawn_key=(EVALUATION_STREAM, int(round_)))
    return [int(c.generate_state(1, dtype=np.uint64)[0]) >> 1 for c in seq.spawn(episodes)]


@dataclass(frozen=True)
class EvaluationResult:
    """What ``run_episodes`` played: ``returns`` float64 [E] (undiscounted) and ``lengths``
    int64 [E] (env steps), in episode (seed) order."""

    returns: np.ndarray
    lengths: np.ndarray

    def stats(self) -> dict[str, float]:
        """``episode_return_mean/std/min/max`` and ``episode_len_mean`` (env steps)."""
        r = self.returns
        return {
            "episode_return_mean": float(np.mean(r)),
            "episode_return_std": float(np.std(r)),
            "episode_return_min": float(np.min(r)),
            "episode_return_max": float(np.max(r)),
            "episode_len_mean": float(np.mean(self.lengths)),
        }


@dataclass
class _Episode:
    index: int
    obs: Any
    ret: float = 0.0
    length: int = 0


def _frame(env: gym.Env) -> np.ndarray:
    """``env.render()``, an ``rgb_array`` frame.

    Raises:
        ValueError: ``render()`` returned no array (an env not made with
            ``render_mode="rgb_array"``).
    """
    frame = env.render()
    if not isinstance(frame, np.ndarray):
        raise ValueError(
            f"the env's render() returned {type(frame).__name__}, not a frame: make it with "
            'render_mode="rgb_array" to record frames'
        )
    return frame


def run_episodes(
    policy: Any,
    envs: Sequence[gym.Env],
    seeds: Sequence[int],
    *,
    explore: bool = False,
    on_frame: Callable[[np.ndarray], None] | None = None,
    max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
) -> EvaluationResult:
    """Play one episode per seed with ``policy`` (greedy unless ``explore``).

    Args:
        policy: anything with ``compute_actions(obs [B, *obs_shape], explore) ->
            (actions int64 [B], extras)`` and an ``observation_space`` (a ``TorchPolicy``).
            A recurrent policy (``is_recurrent``) acts through
            ``compute_actions_recurrent``: each env keeps its state, previous action and
            reward from step to step, back at ``initial_inputs`` when an episode starts.
        envs: the envs to play in (at least one); they are reset here.
        seeds: one env seed per episode.
        on_frame: called with ``envs[0].render()`` (uint8 [H, W, 3]) after each of its
            resets and steps (make ``envs[0]`` with ``render_mode="rgb_array"``).
        max_episode_steps: cut an episode after this many env steps.

    Raises:
        ValueError: no envs or no seeds.
    """
    if not envs or not seeds:
        raise ValueError(f"need at least one env and one seed, got {len(envs)} and {len(seeds)}")
    dtype = policy.observation_space.dtype
    pending = deque(enumerate(seeds))
    returns = np.zeros(len(seeds), dtype=np.float64)
    lengths = np.zeros(len(seeds), dtype=np.int64)
    playing: dict[int, _Episode] = {}
    recurrent = bool(getattr(policy, "is_recurrent", False))
    # Recurrent policies: each env's state, previous action and reward ([len(envs), ...]).
    inputs: dict[str, np.ndarray] = policy.initial_inputs(len(envs)) if recurrent else {}
    fresh = policy.initial_inputs(1) if recurrent else {}

    def start(slot: int) -> None:
        index, seed = pending.popleft()
        obs, _ = envs[slot].reset(seed=int(seed))
        playing[slot] = _Episode(index, obs)
        for name, value in inputs.items():
            value[slot] = fresh[name][0]
        if slot == 0 and on_frame is not None:
            on_frame(_frame(envs[0]))

    for slot in range(min(len(envs), len(seeds))):
        start(slot)
    while playing:
        slots = sorted(playing)
        obs = np.stack([np.asarray(playing[s].obs, dtype=dtype) for s in slots])
        if recurrent:
            rows = np.asarray(slots)
            step_in = {name: value[rows] for name, value in inputs.items()}
            actions, _, state = policy.compute_actions_recurrent(obs, step_in, explore=explore)
            for name, value in state.items():
                inputs[name][rows] = value
            inputs["prev_actions"][rows] = actions
        else:
            actions, _ = policy.compute_actions(obs, explore=explore)
        for slot, action in zip(slots, actions, strict=True):
            ep = playing[slot]
            ep.obs, reward, terminated, truncated, _ = envs[slot].step(action)
            if recurrent:
                inputs["prev_rewards"][slot] = reward
            ep.ret += float(reward)
            ep.length += 1
            if slot == 0 and on_frame is not None:
                on_frame(_frame(envs[0]))
            if terminated or truncated or ep.length >= max_episode_steps:
                returns[ep.index], lengths[ep.index] = ep.ret, ep.length
                del playing[slot]
                if pending:
                    start(slot)
    return EvaluationResult(returns=returns, lengths=lengths)
