"""Flow iterators: the public face of the flow engine (see docs/CONTRACTS.md).

* ``NOT_READY``: the not-ready sentinel, yielded (never raised) by a stream that has no item
  right now; every built-in transform passes it through.
* :class:`LocalIterator`: a lazy stream pulled in the driver (``local.py``).
* :class:`ParallelIterator`: a sharded stream over Ray actors, gathered into a
  ``LocalIterator`` by ``gather_sync``/``gather_async``/``batch_across_shards``
  (``parallel.py``).

The behaviour follows RLlib Flow (``ray.util.iter``, Ray 1.0.1) as described in
``shared/reference/rllib_flow_semantics.md`` sections 1-2, rebuilt on Ray core (actors,
object refs, ``ray.wait``) because ``ray.util.iter`` is deprecated in Ray 2.x.
"""

from __future__ import annotations

from plangraph.flow.local import BaseIterator, LocalIterator, Transform
from plangraph.flow.metrics import get_metrics
from plangraph.flow.parallel import ActorFailureHook, ParallelIterator
from plangraph.flow.sentinel import END_OF_STREAM, NOT_READY, NotReadyType

__all__ = [
    "END_OF_STREAM",
    "NOT_READY",
    "ActorFailureHook",
    "BaseIterator",
    "LocalIterator",
    "NotReadyType",
    "ParallelIterator",
    "Transform",
    "get_metrics",
]
