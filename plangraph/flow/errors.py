"""Errors of the iterator runtime.

Every exception raised by an operator callable (locally or inside a shard actor) or by an
actor task reaches the driver as an :class:`OperatorError` that names the plan node id that
raised it and carries the original traceback text, so a failure deep inside a rollout worker
reads like a local one. The original exception stays reachable as ``__cause__``.
"""

from __future__ import annotations

import re
import traceback

from plangraph.errors import PlangraphError, WaitTimeoutError

__all__ = ["OperatorError", "OperatorTimeoutError", "RemoteCallError"]


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


class RemoteCallError(OperatorError):
    """A call sent to an actor without waiting for its reply (a rollout worker's
    ``set_weights`` or ``set_batch_transforms``, a replay shard's ``add`` or
    ``update_priorities``) raised in the actor; found where the sender next met that actor
    (``plangraph.flow.pending``).

    ``node_id`` is the plan node that sent the call (or, for one sent outside any node, the
    node that found it failed, else the resource); ``actor`` names the actor and, where
    Ray's report says, its Ray node and pid (``"rollout worker 2 (Ray node 10.0.0.5, pid
    4242)"``); ``detail`` is ``"<call> raised <ExceptionType>: <message>"`` and
    ``traceback_text`` the remote traceback as Ray reports it.

    Attributes (besides ``OperatorError``'s):
        call: the method called, e.g. ``"set_weights()"``.
    """

    def __init__(
        self,
        node_id: str,
        detail: str,
        traceback_text: str = "",
        actor: str | None = None,
        call: str = "",
    ) -> None:
        self.call = call
        super().__init__(node_id, detail, traceback_text, actor)

    def __reduce__(self) -> tuple[type[RemoteCallError], tuple[str, str, str, str | None, str]]:  # type: ignore[override]
        return (
            type(self),
            (self.node_id, self.detail, self.traceback_text, self.actor, self.call),
        )

    @classmethod
    def from_ray_error(
        cls, node_id: str, call: str, actor: str, error: BaseException
    ) -> RemoteCallError:
        """The error for ``call`` to ``actor`` failing with ``error`` (a Ray task error,
        which carries the remote exception as ``cause`` and the remote traceback)."""
        cause = getattr(error, "cause", None)
        what = _one_line(cause) if isinstance(cause, BaseException) else _one_line(error)
        where = ray_location(error)
        who = f"{actor} ({where})" if where else actor
        return cls(node_id, f"{call} raised {what}", _ANSI.sub("", str(error)), who, call)


_LOCATION = re.compile(r"\(pid=(\d+), ip=([^,)\s]+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours the task name of its report


def ray_location(error: BaseException) -> str:
    """``"Ray node <ip>, pid <pid>"`` of the process where a Ray task error was raised,
    read from Ray's report (``ray::Class.method() (pid=..., ip=...)``); ``""`` if absent."""
    m = _LOCATION.search(str(error))
    return f"Ray node {m.group(2)}, pid {m.group(1)}" if m else ""


def _one_line(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__
