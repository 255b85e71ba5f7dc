"""Calls sent to actors without waiting for their reply, looked at later ("Nothing silent").

Some actor calls are sent and not waited for, so that they cost no round trip: the
learner's weights broadcast to every rollout worker after a training step, the worker-side
maps installed on the workers. Their result refs are kept in a :class:`PendingCalls` and
looked at where the sender next meets the actors (the next sample gathered from them):
one zero-timeout ``ray.wait`` over the refs still pending and one ``ray.get`` of those
that came (no Ray call at all while none is pending). A call that raised in its actor
raises :class:`~plangraph.flow.errors.RemoteCallError` naming the plan node that sent it,
the actor (its Ray node and pid where Ray's report says), the call and the remote
exception with its traceback. Without this, Ray only logs "Unhandled error" when the ref is
dropped, and a rollout worker whose ``set_weights`` raised goes on acting with old weights.

Ray runs an actor's calls from one caller in submission order, so once an actor answered a
request, every call sent to it before that request has finished. :meth:`PendingCalls.mark`
numbers the calls sent so far; :meth:`PendingCalls.check` with ``settled=mark`` (after
every actor answered a request sent after the mark: a bulk-synchronous sample round) waits
for those calls' replies, which are in or arriving, so their failure is seen before the
answers are used (a learner never trains on a batch sampled after a failed weight sync).

A call whose actor died is dropped: the death is handled where the actor is used (a
rollout worker's gather replaces it under the worker set's restart policy, a checkpoint
warns). Waits are bounded by ``plangraph.flow.deadlines`` (``REPLY_DEADLINE_S``).

Ray is imported when a check starts, so this module is as cheap to import as ``flow.errors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plangraph.errors import WaitTimeoutError
from plangraph.flow import deadlines
from plangraph.flow.errors import OperatorTimeoutError, RemoteCallError

__all__ = ["PendingCalls"]


@dataclass(frozen=True, slots=True)
class _Call:
    seq: int  # 1, 2, ... in the order the calls were sent
    ref: Any
    actor: str  # "rollout worker 2"
    call: str  # "set_weights()"
    node_id: str | None  # the plan node that sent it; None outside any node


class PendingCalls:
    """The replies of calls sent to actors and not yet looked at, oldest first.

    Args:
        owner: the resource that sends them (its id): the node an error names when the
            call was sent outside any plan node and found outside one.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._calls: list[_Call] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, ref: Any, actor: str, call: str, node_id: str | None = None) -> None:
        """Keep ``ref``, the reply of ``call`` (``"set_weights()"``) sent to ``actor`` (a
        description: ``"rollout worker 2"``) by plan node ``node_id`` (None: outside any)."""
        self._seq += 1
        self._calls.append(_Call(self._seq, ref, actor, call, node_id))

    def mark(self) -> int:
        """The calls sent so far, as a number for ``check(settled=...)``."""
        return self._seq

    def check(
        self,
        node_id: str | None = None,
        *,
        settled: int | None = None,
        block: bool = False,
        deadline_s: float | None = None,
    ) -> None:
        """Look at the replies that came; raise for a call that failed.

        Without ``settled`` or ``block`` it never waits: one ``ray.wait(timeout=0)`` over
        the pending refs, then ``ray.get`` of the ready ones; the others stay pending.
        ``settled``: the calls sent up to that ``mark()`` have finished on their actors
        (each answered a request sent later): their replies are waited for too (when every
        pending call is settled, one ``ray.get(timeout=0)`` first: the usual case after a
        bulk-synchronous round costs one Ray call, no wait). ``block``:
        every pending reply is waited for. A wait lasts at most ``deadline_s`` seconds
        (default ``deadlines.REPLY_DEADLINE_S``). ``node_id``: the plan node checking.

        Raises:
            RemoteCallError: a call raised in its actor (the first one sent, after every
                ready reply was read); names the plan node that sent it (else ``node_id``,
                else ``owner``), the actor, the call and the remote traceback.
            WaitTimeoutError: a reply waited for did not come in time (an
                ``OperatorTimeoutError`` of ``node_id`` when given); names the actors.
        """
        if not self._calls:
            return
        import ray
        from ray.exceptions import RayActorError, RayError

        refs = [c.ref for c in self._calls]
        if settled is not None and self._calls[-1].seq <= settled:
            # After a bulk-sync round every reply is in and none failed, usually: one call.
            try:
                ray.get(refs, timeout=0)
            except RayError:  # one not in yet (GetTimeoutError), or one failed: below
                pass
            else:
                self._calls.clear()
                return
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        done = set(ready)
        must = [
            c
            for c in self._calls
            if c.ref not in done and (block or (settled is not None and c.seq <= settled))
        ]
        if must:
            deadlines.wait_all(
                [c.ref for c in must],
                lambda late, s: self._late([must[i] for i in late], s, node_id),
                deadline_s=deadline_s,
            )
            done.update(c.ref for c in must)
        finished = [c for c in self._calls if c.ref in done]
        self._calls = [c for c in self._calls if c.ref not in done]
        try:
            ray.get([c.ref for c in finished])
            return
        except RayError:
            pass
        failed: RemoteCallError | None = None
        for c in finished:  # every one read, so Ray logs none as unhandled
            try:
                ray.get(c.ref)
            except RayActorError:
                continue  # a dead actor: its user replaces it (module docstring)
            except RayError as exc:
                if failed is None:
                    node = c.node_id or node_id or self.owner
                    failed = RemoteCallError.from_ray_error(node, c.call, c.actor, exc)
                    failed.__cause__ = exc
        if failed is not None:
            raise failed

    def _late(self, late: list[_Call], deadline_s: float, node_id: str | None) -> WaitTimeoutError:
        who = ", ".join(sorted({c.actor for c in late}))
        calls = ", ".join(sorted({c.call for c in late}))
        text = deadlines.not_answered(
            who, calls, deadline_s, "it stuck inside a call sent before (an env step)"
        )
        if node_id is None:
            return WaitTimeoutError(text)
        return OperatorTimeoutError(node_id, f"OperatorTimeoutError: {text}", actor=who)
