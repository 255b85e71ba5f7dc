"""``MultiAgentBatch``: one ``SampleBatch`` per policy, with env and agent steps apart.

In a multi-agent env one env step moves every live agent once, so a batch has two sizes
(RLlib's ``MultiAgentBatch``):

* ``env_steps()``: env ``step`` calls (one per step of one env copy, however many agents
  acted in it): what ``num_env_steps_sampled`` counts, once.
* ``agent_steps()``: rows over all policies, one per agent per env step it acted in: what
  ``num_agent_steps_sampled`` counts (``policy_batches[pid].count`` per policy).

``policy_batches[pid]`` holds the rows of every agent mapped to policy ``pid``, one
agent's trajectory pieces contiguous (``agent_index`` and ``eps_id`` tell them apart), each
postprocessed by that policy (``plangraph.rl.multi_agent_worker``); its
``episode_returns``/``episode_lengths`` are the per-agent episodes (an agent's return,
its length in the agent's own steps) that ended while the batch was sampled. The batch's
own ``episode_returns``/``episode_lengths`` are the env episodes (sum of all agents'
returns; length in env steps) that ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from plangraph.rl.sample_batch import SampleBatch

__all__ = ["MultiAgentBatch"]


class MultiAgentBatch:
    """Per-policy ``SampleBatch``es of one stretch of multi-agent sampling.

    Args:
        policy_batches: policy id -> its rows.
        env_steps: env steps the batch spans (>= 0; see the module doc).
        episode_returns: float64 ``[E]`` returns (all agents summed) of env episodes that
            ended.
        episode_lengths: int64 ``[E]`` their lengths in env steps.

    Raises:
        ValueError: ``env_steps < 0`` or episode arrays of different lengths.
    """

    __slots__ = ("_env_steps", "episode_lengths", "episode_returns", "policy_batches")

    def __init__(
        self,
        policy_batches: Mapping[str, SampleBatch],
        env_steps: int,
        *,
        episode_returns: np.ndarray | Sequence[float] | None = None,
        episode_lengths: np.ndarray | Sequence[int] | None = None,
    ) -> None:
        if env_steps < 0:
            raise ValueError(f"env_steps must be >= 0, got {env_steps}")
        self.policy_batches: dict[str, SampleBatch] = dict(sorted(policy_batches.items()))
        self._env_steps = int(env_steps)
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

    @property
    def count(self) -> int:
        """Env steps (as RLlib's ``MultiAgentBatch.count``), not agent steps."""
        return self._env_steps

    def env_steps(self) -> int:
        """Env steps the batch spans, each counted once however many agents acted."""
        return self._env_steps

    def agent_steps(self) -> int:
        """Rows over all policies: one per agent per env step it acted in."""
        return sum(b.count for b in self.policy_batches.values())

    def policy_agent_steps(self) -> dict[str, int]:
        """Policy id -> its rows (agent steps), sorted by id."""
        return {pid: b.count for pid, b in self.policy_batches.items()}

    def size_bytes(self) -> int:
        return sum(b.size_bytes() for b in self.policy_batches.values())

    def select(self, policies: Iterable[str]) -> MultiAgentBatch:
        """A batch with only ``policies``' batches (those present); env steps and env
        episodes unchanged (RLlib ``SelectExperiences``)."""
        keep = set(policies)
        return MultiAgentBatch(
            {pid: b for pid, b in self.policy_batches.items() if pid in keep},
            self._env_steps,
            episode_returns=self.episode_returns,
            episode_lengths=self.episode_lengths,
        )

    @staticmethod
    def concat_samples(batches: Sequence[MultiAgentBatch]) -> MultiAgentBatch:
        """Concatenate per policy (``SampleBatch.concat_samples``); env steps and env
        episodes summed and concatenated.

        Raises:
            ValueError: a policy's batches have different columns.
        """
        pids = sorted({pid for b in batches for pid in b.policy_batches})
        return MultiAgentBatch(
            {
                pid: SampleBatch.concat_samples(
                    [b.policy_batches[pid] for b in batches if pid in b.policy_batches]
                )
                for pid in pids
            },
            sum(b.env_steps() for b in batches),
            episode_returns=np.concatenate(
                [b.episode_returns for b in batches] or [np.zeros(0, np.float64)]
            ),
            episode_lengths=np.concatenate(
                [b.episode_lengths for b in batches] or [np.zeros(0, np.int64)]
            ),
        )

    def to_data(self) -> dict[str, Any]:
        """As a plain data tree (checkpoints): ``{"policy_batches": {pid: ...to_data()},
        "env_steps", "episode_returns", "episode_lengths"}``."""
        return {
            "policy_batches": {pid: b.to_data() for pid, b in self.policy_batches.items()},
            "env_steps": self._env_steps,
            "episode_returns": self.episode_returns.copy(),
            "episode_lengths": self.episode_lengths.copy(),
        }

    @staticmethod
    def from_data(data: Mapping[str, Any]) -> MultiAgentBatch:
        """The batch ``to_data()`` described."""
        return MultiAgentBatch(
            {pid: SampleBatch.from_data(b) for pid, b in data["policy_batches"].items()},
            int(data["env_steps"]),
            episode_returns=data["episode_returns"],
            episode_lengths=data["episode_lengths"],
        )

    def __repr__(self) -> str:
        per = ", ".join(f"{pid}: {b.count}" for pid, b in self.policy_batches.items())
        return (
            f"MultiAgentBatch(env_steps={self._env_steps}, agent_steps={self.agent_steps()}, "
            f"{{{per}}})"
        )
