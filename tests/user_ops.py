"""User operators written as a user would, outside ``plangraph/`` (``--import tests/user_ops.py``
or ``import tests.user_ops``), for the tests of the user-operator API:

* ``UserMixInReplay``: a stateful per-item operator (a simpler form of the built-in
  ``MixInReplay``, written as a user would). It keeps the last ``capacity`` batches it
  saw and emits each incoming batch concatenated with ``replay_ratio`` batches drawn from
  them with its own per-node RNG (``op.rng``); it saves both, buffer and RNG, with
  ``op.save_state``, so a resumed run continues exactly.
* ``MixInReplayUnsaved``: ``UserMixInReplay`` written without the context (``factory(params)``,
  its own ``numpy`` RNG and buffer in a closure): a checkpoint cannot hold its state and
  warns (``ResumeWarning``).
* ``RandomCartPole``: a user source. It steps its own CartPole-v1 with uniformly random
  actions, ``fragment`` env steps per item, and counts them (and the episodes completed)
  through ``op.record_batch``, as the built-in sources count theirs.

Registering is idempotent (``replace=True``), so importing this module twice is harmless.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from pydantic import Field

from plangraph.ops import OpParams, register_op
from plangraph.rl import SampleBatch
from plangraph.runtime.implementations import OperatorContext, register_impl


@register_op(category="combine", inputs=["SampleBatch"], output="SampleBatch", replace=True)
class UserMixInReplay(OpParams):
    """Emit each batch with ``replay_ratio`` batches replayed from the last ``capacity``."""

    capacity: int = Field(8, ge=1, le=1_000, description="batches kept (a FIFO)")
    replay_ratio: int = Field(1, ge=0, le=16, description="batches replayed per batch")


@register_impl("UserMixInReplay")
def mix_in_replay(params: Any, op: OperatorContext) -> Any:
    buffer: list[SampleBatch] = []
    rng = op.rng

    def mix(batch: SampleBatch) -> SampleBatch:
        # Draw before storing: the incoming batch is never its own replay.
        picks = (
            [int(rng.integers(len(buffer))) for _ in range(params.replay_ratio)] if buffer else []
        )
        out = SampleBatch.concat_samples([batch, *(buffer[i] for i in picks)])
        buffer.append(batch.copy())
        del buffer[: -params.capacity]
        return out

    def get_state() -> dict[str, Any]:
        return {"rng": rng.bit_generator.state, "buffer": [b.to_data() for b in buffer]}

    def set_state(state: dict[str, Any]) -> None:
        rng.bit_generator.state = state["rng"]
        buffer[:] = [SampleBatch.from_data(b) for b in state["buffer"]]

    op.save_state(get_state, set_state)
    return mix


@register_op(category="combine", inputs=["SampleBatch"], output="SampleBatch", replace=True)
class MixInReplayUnsaved(OpParams):
    """``UserMixInReplay`` without checkpoint hooks (its state is lost on resume)."""

    capacity: int = Field(8, ge=1, le=1_000, description="batches kept (a FIFO)")


@register_impl("MixInReplayUnsaved")
def mix_in_replay_unsaved(params: Any) -> Any:
    buffer: list[SampleBatch] = []
    rng = np.random.default_rng(0)

    def mix(batch: SampleBatch) -> SampleBatch:
        extra = [buffer[int(rng.integers(len(buffer)))]] if buffer else []
        buffer.append(batch.copy())
        del buffer[: -params.capacity]
        return SampleBatch.concat_samples([batch, *extra])

    return mix


@register_op(category="source", apply="source", output="SampleBatch", replace=True)
class RandomCartPole(OpParams):
    """Random-action CartPole-v1 fragments of ``fragment`` env steps (a user's source)."""

    fragment: int = Field(50, ge=1, le=10_000, description="env steps per item")


@register_impl("RandomCartPole")
def random_cartpole(params: Any, op: OperatorContext) -> Any:
    env = gym.make("CartPole-v1")
    rng = op.rng
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    episode = {"return": 0.0, "length": 0}

    def next_fragment() -> SampleBatch:
        nonlocal obs
        rows: dict[str, list[Any]] = {"obs": [], "actions": [], "rewards": [], "dones": []}
        returns: list[float] = []
        lengths: list[int] = []
        for _ in range(params.fragment):
            action = int(rng.integers(2))
            next_obs, reward, terminated, truncated, _ = env.step(action)
            for key, value in (("obs", obs), ("actions", action), ("rewards", reward)):
                rows[key].append(value)
            rows["dones"].append(terminated or truncated)
            episode["return"] += float(reward)
            episode["length"] += 1
            obs = next_obs
            if terminated or truncated:
                returns.append(episode["return"])
                lengths.append(episode["length"])
                episode.update({"return": 0.0, "length": 0})
                obs, _ = env.reset(seed=int(rng.integers(2**31)))
        batch = SampleBatch(
            {k: np.asarray(v) for k, v in rows.items()},
            episode_returns=returns,
            episode_lengths=lengths,
        )
        op.record_batch(batch)  # num_env_steps_sampled and the episode window
        return batch

    # No save_state: its env is not checkpointed, so a checkpoint warns (it took op.rng).
    return next_fragment
