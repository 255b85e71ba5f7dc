"""plangraph's execution layer: the iterator runtime on Ray core.

Modules: ``iterators`` (``LocalIterator``, ``ParallelIterator``, ``NOT_READY``),
``concurrency`` (``concurrently``/``union``), ``metrics`` (``MetricsContext``,
``get_metrics``) and ``errors`` (``OperatorError``).

Importing this package stays cheap (no ray, no torch): import the submodules you need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plangraph.runtime.algorithm import Algorithm


def build(compiled: Any, **kwargs: Any) -> Algorithm:
    """Lower a compiled plan onto Ray actors: ``Algorithm(compiled, **kwargs)``.

    Keyword arguments: ``env`` (gymnasium id), ``num_workers``, ``seed``, ``address`` (Ray
    cluster; default: start Ray in-process). See ``plangraph.runtime.algorithm.Algorithm``.
    """
    from plangraph.runtime.algorithm import Algorithm

    return Algorithm(compiled, **kwargs)
