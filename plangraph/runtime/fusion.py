"""One flow stage that runs several per-item operators in turn (pass ``map-fusion``).

Lowered one by one, a chain ``a -> b -> c`` of per-item operators is three ``for_each``
stages: three generator steps per item. :class:`FusedMap` is the one callable of a single
``for_each`` stage that calls them in order and returns the last result, keeping the
``for_each`` contract of each: an operator that returns ``NOT_READY`` (back-pressure) is
called again with the *same* input on the next pull, and the operators before it are not
called again; an error is raised as ``OperatorError`` naming the operator's own node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from plangraph.flow.errors import OperatorError
from plangraph.flow.sentinel import NOT_READY

__all__ = ["FusedMap"]


class FusedMap:
    """``fn(item)`` = ``fns[-1](... fns[0](item))``, resumable at a ``NOT_READY``.

    Args:
        steps: ``(node id, item function)`` pairs in chain order (each function timed by
            its caller as its own node, so every node keeps its timer and profile).
    """

    __slots__ = ("_pending", "steps")

    def __init__(self, steps: Sequence[tuple[str, Callable[[Any], Any]]]) -> None:
        if not steps:
            raise ValueError("FusedMap needs at least one step")
        self.steps = tuple(steps)
        # (index of the step to call next, its input) after a step returned NOT_READY
        self._pending: tuple[int, Any] | None = None

    def __call__(self, item: Any) -> Any:
        start, value = (0, item) if self._pending is None else self._pending
        self._pending = None
        for i in range(start, len(self.steps)):
            node_id, fn = self.steps[i]
            try:
                out = fn(value)
            except OperatorError:
                raise
            except Exception as exc:
                raise OperatorError.from_exception(node_id, exc) from exc
            if out is NOT_READY:
                # for_each calls us again with the same item: resume at this step.
                self._pending = (i, value)
                return NOT_READY
            value = out
        return value
