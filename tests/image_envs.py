"""An ALE-free stand-in for preprocessed Atari frames, registered on import.

Rollout workers run ``gymnasium.make`` in their own processes, so tests name it
``"tests.image_envs:PlangraphTest/AtariFrames-v0"``: the module prefix makes each worker
import (and so register) it. Not a test module (pytest does not collect it).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

ATARI_FRAMES = "PlangraphTest/AtariFrames-v0"


class AtariFramesEnv(gym.Env[np.ndarray, np.int64]):
    """uint8 ``[84, 84, 4]`` frames (``atari_preprocessing``'s output shape), 6 actions
    (Pong's); a bright 8x8 square moves one pixel a step down the frame stack's newest
    channel, reward +1 for action 2 while it is in the upper half, else -1 for any other
    action; 40 steps an episode."""

    observation_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    action_space = gym.spaces.Discrete(6)

    def __init__(self) -> None:
        self._frames = np.zeros((84, 84, 4), np.uint8)
        self._row = 0
        self._t = 0

    def _observe(self) -> np.ndarray:
        frame = np.zeros((84, 84), np.uint8)
        frame[self._row : self._row + 8, 38:46] = 255
        self._frames = np.concatenate([self._frames[..., 1:], frame[..., None]], axis=-1)
        return self._frames.copy()

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t, self._row = 0, int(self.np_random.integers(0, 76))
        self._frames[:] = 0
        return self._observe(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict]:
        upper = self._row < 38
        reward = 1.0 if (int(action) == 2) == upper else -1.0
        self._t += 1
        self._row = (self._row + 1) % 76
        return self._observe(), reward, False, self._t >= 40, {}


gym.register(ATARI_FRAMES, entry_point=AtariFramesEnv)
