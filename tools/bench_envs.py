"""Benchmark envs: stand-ins for expensive simulators.

``SleepyCartPole-v1`` is CartPole-v1 whose ``step`` first sleeps ``step_s`` seconds (default
2 ms, or ``PLANGRAPH_BENCH_STEP_S``), so sampling throughput is bound by the env, as with a
real simulator, and not by this machine's 2 cores. Importing this module registers it;
plans name it as ``tools.bench_envs:SleepyCartPole-v1`` so every rollout worker imports
(and registers) it too (run from the repository root, importable: ``PYTHONPATH=.``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

ENV_ID = "SleepyCartPole-v1"
STEP_S = float(os.environ.get("PLANGRAPH_BENCH_STEP_S", "0.002"))
"""Wall time of one step, seconds; rollout workers read it from the environment."""


class SleepyCartPole(CartPoleEnv):
    """CartPole whose every step costs ``step_s`` seconds of wall time (not CPU)."""

    def __init__(self, step_s: float = STEP_S, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step_s = step_s

    def step(self, action: Any) -> Any:
        time.sleep(self.step_s)
        return super().step(action)


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=SleepyCartPole, max_episode_steps=500)
