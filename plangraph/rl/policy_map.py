"""``PolicyMap``: the learner policies of a multi-agent worker set, by policy id."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["PolicyMap"]


class PolicyMap(Mapping[str, Any]):
    """The learner policies by id; ``get_state``/``set_state``/``get_weights`` cover all
    of them (a checkpoint keeps every policy's weights, optimizer and schedules)."""

    def __init__(self, policies: Mapping[str, Any]) -> None:
        self._policies = dict(sorted(policies.items()))

    def __getitem__(self, pid: str) -> Any:
        return self._policies[pid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._policies)

    def __len__(self) -> int:
        return len(self._policies)

    def get_weights(self) -> dict[str, Any]:
        return {pid: p.get_weights() for pid, p in self._policies.items()}

    def get_state(self) -> dict[str, Any]:
        return {pid: p.get_state() for pid, p in self._policies.items()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore every policy of ``state``.

        Raises:
            ValueError: ``state`` names a policy this map does not have.
        """
        unknown = sorted(set(state) - set(self._policies))
        if unknown:
            raise ValueError(
                f"checkpoint holds policies {unknown} that this worker set does not have "
                f"({', '.join(self._policies)})"
            )
        for pid, s in state.items():
            self._policies[pid].set_state(s)
