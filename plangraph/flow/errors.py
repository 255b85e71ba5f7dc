"""Errors of the iterator runtime.

Every exception raised by an operator callable (locally or inside a shard actor) or by an
actor task reaches the driver as an :class:`OperatorError` that names the plan node id that
raised it and carries the original traceback text, so a failure deep inside a rollout worker
reads like a local one. The original exception stays reachable as ``__cause__``.
"""

from __future__ import annotations

import traceback

from plangraph.errors import PlangraphError, WaitTimeoutError

__all__ = ["OperatorError", "OperatorTimeoutError"]


class OperatorError(PlangraphError, RuntimeError):
    """An operator or actor task of plan node ``node_id`` failed.

    Attributes:
        node_id: the plan node id (the ``name=`` given to ``for_each``/``filter``/... or the
            source's name, e.g. ``from_actors[shards=2]``).
        detail: one line, ``"<ExceptionType>: <message>"`` of the original error.
        traceback_text: the original traceback, formatted where it was raised (for an actor,
            the remote traceback as Ray reports it).
        actor: a description of the actor that raised it, or ``None`` for the driver.
    """

    def __init__(
        self,
        node_id: str,
        detail: str,
        traceback_text: str = "",
        actor: str | None = None,
    ) -> None:
        self.node_id = node_id
        self.detail = detail
        self.traceback_text = traceback_text
        self.actor = actor
        where = f" on actor {actor}" if actor else ""
        message = f"plan node {node_id!r} failed{where}: {detail}"
        if traceback_text:
            message += "\n\nOriginal traceback:\n" + traceback_text.rstrip("\n")
        super().__init__(message)

    def __reduce__(self) -> tuple[type[OperatorError], tuple[str, str, str, str | None]]:
        # Operator errors raised inside shard actors travel to the driver through pickle.
        return (type(self), (self.node_id, self.detail, self.traceback_text, self.actor))

    @classmethod
    def from_exception(
        cls, node_id: str, exc: BaseException, actor: str | None = None
    ) -> OperatorError:
        """Wrap ``exc`` (just caught) as raised by plan node ``node_id``."""
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(node_id, _one_line(exc), text, actor)


class OperatorTimeoutError(OperatorError, WaitTimeoutError):
    """Plan node ``node_id`` waited past its deadline for something outside the driver's
    thread (an actor's reply, a learner thread's update); ``detail`` says what, for how
    long and what to check. Also a ``WaitTimeoutError`` (and so a ``TimeoutError``)."""


def _one_line(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__
