"""Test envs whose ``step`` kills, fails or hangs the rollout worker, registered on import.

Rollout workers run ``gymnasium.make`` in their own processes, so the tests name these
envs ``"tests.crash_envs:<id>"``: the module prefix makes each worker import (and so
register) them. Not a test module (pytest does not collect it).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

CRASH_ON_STEP = "PlangraphTest/CrashOnStep-v0"
CRASH_ONCE = "PlangraphTest/CrashOnce-v0"
RAISE_ON_STEP = "PlangraphTest/RaiseOnStep-v0"
HANG_ON_STEP = "PlangraphTest/HangOnStep-v0"
HANG_S = 600.0
"""Seconds ``HangOnStepEnv.step`` sleeps: longer than any test waits for it (the tests that
use it end by killing the worker), so to them the step never returns."""
CRASH_EXIT_CODE = 13

# One marker per checkout, so parallel runs from other worktrees do not share it.
CRASH_ONCE_MARKER = Path(tempfile.gettempdir()) / (
    "plangraph-crash-once-"
    + hashlib.sha256(str(Path(__file__).resolve()).encode()).hexdigest()[:12]
)


class CrashOnStepEnv(CartPoleEnv):
    """CartPole whose first ``step`` ends the process (``os._exit``), as a native crash in
    an env would; it says so on stderr first."""

    def step(self, action: Any) -> Any:
        print("CrashOnStepEnv: simulated native crash in step()", file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_CODE)


class CrashOnceEnv(CartPoleEnv):
    """CartPole whose process dies on the first ``step`` of the run (``CRASH_ONCE_MARKER``
    absent), and never again (the marker now exists, across processes)."""

    def step(self, action: Any) -> Any:
        if not CRASH_ONCE_MARKER.exists():
            CRASH_ONCE_MARKER.touch()
            os._exit(CRASH_EXIT_CODE)
        return super().step(action)


class RaiseOnStepEnv(CartPoleEnv):
    """CartPole whose ``step`` raises: a task error, not a dead process."""

    def step(self, action: Any) -> Any:
        raise RuntimeError("RaiseOnStepEnv: the simulator rejected the action")


class HangOnStepEnv(CartPoleEnv):
    """CartPole whose ``step`` never returns (as far as a test can tell): a stuck
    simulator, which only a deadline on the worker's reply can report."""

    def step(self, action: Any) -> Any:
        time.sleep(HANG_S)
        return super().step(action)


for _id, _cls in (
    (CRASH_ON_STEP, CrashOnStepEnv),
    (CRASH_ONCE, CrashOnceEnv),
    (RAISE_ON_STEP, RaiseOnStepEnv),
    (HANG_ON_STEP, HangOnStepEnv),
):
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_cls, max_episode_steps=200)
