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

__all__ = ["STAR_MAX_PULL", "Weight", "concurrently", "union"]

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


def _check_weight(i: int, weight: object) -> Weight:
    if weight == "*":
        return "*"
    if isinstance(weight, bool) or not isinstance(weight, Real) or not weight > 0:
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
        seed: seeds the RNG that rounds fractional weights.
        name: the union's node id (for ``repr``/errors).

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
        rng = random.Random(seed)
        active = list(range(n))
        waiter = IdleWaiter()
        while active and any(emit[i] for i in active):
            # A round may drop every item (inputs outside output_indexes) and never yield:
            # the sink's idle watchdog, if armed, is checked here.
            check_watchdog()
            progressed = False
            idle = PendingNote()
            saw_idle = False
            for i in list(active):
                weight = weights[i]
                quota = STAR_MAX_PULL if weight == "*" else _randomized_int_cast(weight, rng)
                it = inputs[i]
                for _ in range(quota):
                    note = push_note()
                    try:
                        item = next(it, END_OF_STREAM)
                    finally:
                        pop_note()
                    if item is END_OF_STREAM:
                        active.remove(i)
                        progressed = True  # the set of inputs changed: re-check, don't wait
                        break
                    if item is NOT_READY:
                        saw_idle = True
                        idle.refs.extend(note.refs)
                        idle.local = idle.local or note.local or not note.refs
                        break
                    progressed = True
                    if emit[i]:
                        yield item
            if progressed or not saw_idle:
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
) -> LocalIterator[Any]:
    """Run several sub-flows concurrently and merge them (RLlib Flow ``Concurrently``).

    ``mode="round_robin"``: each input in turn is pulled (blocking) ``weights[i]`` times per
    round (default 1 each; ``"*"`` = whatever is ready, never blocking). ``mode="async"``:
    every input is polled without blocking, one item per round, items in arrival order;
    when all are idle the union blocks on Ray instead of spinning. ``output_indexes``
    selects which inputs' items are emitted (all are driven).

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
            iters, deterministic=False, output_indexes=output_indexes, seed=seed, name=name
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
    )
