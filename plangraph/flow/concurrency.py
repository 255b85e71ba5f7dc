"""Union of several flows and ``Concurrently`` (reference 2.6 and 3.5).

A union drives several ``LocalIterator`` inputs from one consumer. Each *round* it pulls up
to a quota of items from every still-active input in order: ``1`` by default; the weight
rounded probabilistically for numeric weights (2.5 gives 2 or 3, 2.5 on average); up to 100
for ``"*"`` (whatever is ready: that input never blocks). An input that yields ``NOT_READY``
forfeits the rest of its turn; a finished input drops out.

Deliberate deviations from RLlib 1.0.1 (each documented where it happens):

* No busy-wait: when a whole round produced nothing because every input was idle, a blocking
  union waits on the Ray refs its inputs are waiting on (:class:`IdleWaiter`) instead of
  spinning at 100 % CPU (ray-project/ray#16162).
* The union ends once every input listed in ``output_indexes`` has finished (RLlib kept
  driving the other inputs forever while emitting nothing).
* Merging metrics keeps what the inputs had already counted (summed), rather than dropping it.
* Fractional weights use a seedable RNG (``seed``), so runs are reproducible.

Resumable rotation: where a union is in its rotation (which inputs are still active, the
round's order, whose turn it is, that turn's quota and how many items it has pulled, the
RNG) lives in a :class:`RotationState`, not in generator locals. Pass one to ``union`` (or
``concurrently``) as ``state=`` and its ``get_state()``/``set_state()`` checkpoint and
restore the rotation as plain data; a union built with a restored state continues the
interrupted round exactly where it stopped (set it before the first pull).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from numbers import Real
from typing import Any, Literal, TypeAlias

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import SharedMetrics
from plangraph.flow.sentinel import (
    END_OF_STREAM,
    NOT_READY,
    IdleWaiter,
    PendingNote,
    note_local_wait,
    note_pending,
    pop_note,
    push_note,
)
from plangraph.flow.watchdog import check_watchdog

__all__ = ["STAR_MAX_PULL", "RotationState", "Weight", "concurrently", "union"]

Weight: TypeAlias = int | float | Literal["*"]
"""A round-robin weight: items pulled per round (fractions rounded at random) or ``"*"``."""

STAR_MAX_PULL = 100
"""Most items pulled per round from a ``"*"`` input (RLlib's constant)."""

_MODES = ("round_robin", "async")


def _randomized_int_cast(weight: float, rng: random.Random) -> int:
    """floor(weight), plus 1 with probability frac(weight): unbiased rounding."""
    base = int(weight)
    frac = weight - base
    return base + 1 if frac > 0 and rng.random() < frac else base


class RotationState:
    """Where a union is in its rotation, kept outside the union's generator so a checkpoint
    can hold it (one per union; the union updates it as it pulls).

    Attributes:
        rng: rounds fractional weights (seeded with ``seed``).
        active: indexes of the inputs that have not finished, ascending; ``None`` until
            the union starts.
        order: the current round's inputs, in turn order (``active`` when it began).
        slot: position in ``order`` of the input whose turn it is (``len(order)``: between
            rounds).
        quota: items that input may pull this turn (``None``: not drawn yet).
        pulled: items it has pulled this turn.
        progressed: whether the current round has pulled an item or seen an input finish.
    """

    __slots__ = ("active", "order", "progressed", "pulled", "quota", "rng", "slot")

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.active: list[int] | None = None
        self.order: list[int] = []
        self.slot = 0
        self.quota: int | None = None
        self.pulled = 0
        self.progressed = False

    def get_state(self) -> dict[str, Any]:
        """The rotation as plain data (ints, bools, None and lists of ints)."""
        version, internal, gauss_next = self.rng.getstate()
        return {
            "rng": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
            "active": None if self.active is None else list(self.active),
            "order": list(self.order),
            "slot": self.slot,
            "quota": self.quota,
            "pulled": self.pulled,
            "progressed": self.progressed,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from ``get_state()`` output (before the union's first pull).

        Raises:
            ValueError: the state is malformed (``slot`` outside ``order``).
        """
        rng = state["rng"]
        self.rng.setstate((int(rng["version"]), tuple(rng["internal"]), rng["gauss_next"]))
        self.active = None if state["active"] is None else [int(i) for i in state["active"]]
        self.order = [int(i) for i in state["order"]]
        self.slot = int(state["slot"])
        if not 0 <= self.slot <= len(self.order):
            raise ValueError(f"rotation state: slot {self.slot} outside order {self.order}")
        self.quota = None if state["quota"] is None else int(state["quota"])
        self.pulled = int(state["pulled"])
        self.progressed = bool(state["progressed"])

    def _check_inputs(self, n: int) -> None:
        indexes = [*(self.active or ()), *self.order]
        if any(not 0 <= i < n for i in indexes):
            raise ValueError(
                f"rotation state refers to inputs {sorted(set(indexes))}, the union has {n}"
            )


def _check_weight(i: int, weight: object) -> Weight:
    if weight == "*":
        return "*"
    if isinstance(weight, bool) or not isinstance(weight, Real) or not float(weight) > 0:
        raise ValueError(
            f"round_robin_weights[{i}] = {weight!r}: a weight must be a positive number "
            '(items per round, fractions allowed) or "*" (whatever is ready)'
        )
    return float(weight) if not isinstance(weight, int) else weight


def union(
    iters: Sequence[LocalIterator[Any]],
    *,
    deterministic: bool = False,
    round_robin_weights: Sequence[Weight] | None = None,
    output_indexes: Sequence[int] | None = None,
    seed: int = 0,
    name: str | None = None,
    state: RotationState | None = None,
) -> LocalIterator[Any]:
    """Merge ``iters`` into one ``LocalIterator`` sharing one merged metrics context.

    Args:
        iters: the inputs (at least one), in round order.
        deterministic: without weights, ``True`` pulls each input blocking once per round
            (round robin); ``False`` polls every input without blocking (async).
        round_robin_weights: one weight per input (see :data:`Weight`); ``"*"`` inputs are
            polled without blocking, the others block. Overrides ``deterministic``.
        output_indexes: indexes of the inputs whose items are emitted; the others are still
            driven and their items dropped. ``None`` emits all.
        seed: seeds the RNG that rounds fractional weights (unless ``state`` is given).
        name: the union's node id (for ``repr``/errors).
        state: where the rotation is (see :class:`RotationState`); the union advances it.
            Omitted: a fresh one seeded with ``seed`` each time the union is built. Give
            each union its own.

    Raises:
        TypeError: an input is not a ``LocalIterator``.
        ValueError: bad weights (wrong length, non-positive) or out-of-range output indexes.
    """
    iters = list(iters)
    if not iters:
        raise ValueError("union() needs at least one input iterator")
    for i, it in enumerate(iters):
        if not isinstance(it, LocalIterator):
            hint = " (gather a ParallelIterator first)" if hasattr(it, "gather_sync") else ""
            raise TypeError(f"union input {i} is a {type(it).__name__}, not a LocalIterator{hint}")
    n = len(iters)
    if round_robin_weights is not None:
        if len(round_robin_weights) != n:
            raise ValueError(
                f"round_robin_weights has {len(round_robin_weights)} entries for {n} inputs; "
                "give one weight per input"
            )
        weights = [_check_weight(i, w) for i, w in enumerate(round_robin_weights)]
        timeouts: list[float | None] = [0 if w == "*" else None for w in weights]
    else:
        weights = [1] * n
        timeouts = [None if deterministic else 0] * n
    emit = _check_output_indexes(output_indexes, n)

    shared = SharedMetrics(parents=[it.shared_metrics for it in iters])
    inputs = [
        it._copy(timeout=t, shared_metrics=shared) for it, t in zip(iters, timeouts, strict=True)
    ]
    union_name = name or f"union[{', '.join(it.name for it in iters)}]"

    def base(timeout: float | None) -> Iterator[Any]:
        # Every position in the rotation is read from and written to `cur`, never kept in a
        # local across a yield, so a restored RotationState resumes mid-round. Without a
        # given state each build starts afresh, as a rebuilt generator always did.
        cur = state if state is not None else RotationState(seed)
        cur._check_inputs(n)
        if cur.active is None:
            cur.active = list(range(n))
        waiter = IdleWaiter()
        while True:
            if cur.slot >= len(cur.order):  # between rounds
                if not cur.active or not any(emit[i] for i in cur.active):
                    return
                # A round may drop every item (inputs outside output_indexes) and never
                # yield: the sink's idle watchdog, if armed, is checked here.
                check_watchdog()
                cur.order = list(cur.active)
                cur.slot, cur.quota, cur.pulled, cur.progressed = 0, None, 0, False
            idle = PendingNote()
            saw_idle = False
            while cur.slot < len(cur.order):
                i = cur.order[cur.slot]
                if cur.quota is None:
                    weight = weights[i]
                    cur.quota = (
                        STAR_MAX_PULL if weight == "*" else _randomized_int_cast(weight, cur.rng)
                    )
                    cur.pulled = 0
                it = inputs[i]
                while cur.pulled < cur.quota:
                    note = push_note()
                    try:
                        item = next(it, END_OF_STREAM)
                    finally:
                        pop_note()
                    if item is END_OF_STREAM:
                        cur.active.remove(i)
                        cur.progressed = True  # the set of inputs changed: re-check, don't wait
                        break
                    if item is NOT_READY:
                        saw_idle = True
                        idle.refs.extend(note.refs)
                        idle.local = idle.local or note.local or not note.refs
                        break
                    cur.pulled += 1
                    cur.progressed = True
                    if emit[i]:
                        yield item
                cur.slot += 1
                cur.quota = None
            if cur.progressed or not saw_idle:
                waiter.reset()
                continue
            if timeout is not None:
                # Nested in a non-blocking consumer: hand it the sentinel and what we wait on.
                note_pending(idle.refs)
                if idle.local:
                    note_local_wait()
                yield NOT_READY
            else:
                waiter.wait(idle)

    return LocalIterator(base, shared, name=union_name)


def _check_output_indexes(output_indexes: Sequence[int] | None, n: int) -> list[bool]:
    if output_indexes is None:
        return [True] * n
    indexes = list(output_indexes)
    if not indexes:
        raise ValueError(
            "output_indexes is empty: the union would emit nothing; omit it to emit all"
        )
    for j in indexes:
        if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n:
            raise ValueError(
                f"output_indexes entry {j!r} is out of range for {n} inputs (0..{n - 1})"
            )
    return [i in indexes for i in range(n)]


def concurrently(
    iters: Sequence[LocalIterator[Any]],
    mode: str = "round_robin",
    output_indexes: Sequence[int] | None = None,
    weights: Sequence[Weight] | None = None,
    *,
    seed: int = 0,
    name: str | None = None,
    state: RotationState | None = None,
) -> LocalIterator[Any]:
    """Run several sub-flows concurrently and merge them (RLlib Flow ``Concurrently``).

        ``mode="round_robin"``: each input in turn is pulled (blocking) ``weights[i]`` times per
        round (default 1 each; ``"*"`` = whatever is ready, never blocking). ``mode="async"``:
        every input is polled without blocking, one item per round, items in arrival order;
        when all are idle the union blocks on Ray instead of spinning. ``output_indexes``
        selects which inputs' items are emitted (all are driven). ``state``: the union's
    :class:`RotationState` (checkpointable; see ``union``).

        Raises ``ValueError``: fewer than 2 inputs, unknown mode, weights with ``async``, all
        weights ``"*"`` (nothing would ever block), bad weights or output indexes.
    """
    if len(iters) < 2:
        raise ValueError(f"concurrently() needs at least 2 input flows, got {len(iters)}")
    if mode not in _MODES:
        raise ValueError(f"concurrently(): unknown mode {mode!r}; expected one of {_MODES}")
    if mode == "async":
        if weights is not None:
            raise ValueError('concurrently(): weights only apply to mode="round_robin"')
        return union(
            iters,
            deterministic=False,
            output_indexes=output_indexes,
            seed=seed,
            name=name,
            state=state,
        )
    if weights is not None and all(w == "*" for w in weights):
        raise ValueError(
            'concurrently(): all weights are "*"; at least one input must be pulled '
            'blocking (use mode="async" to poll all inputs)'
        )
    return union(
        iters,
        deterministic=True,
        round_robin_weights=weights,
        output_indexes=output_indexes,
        seed=seed,
        name=name,
        state=state,
    )
