"""plangraph's plan executor: compiled plans lowered onto ``plangraph.flow`` iterators.

Modules: ``algorithm`` (``Algorithm``), ``build_context`` (the built resources),
``lowering`` / ``implementations`` / ``ops`` (operator implementations), ``run_state``
(``RunState``: counters, iteration, time, episode window), ``result`` (the ``Result``
schema), ``training_loop`` (the one stop loop), ``stopping`` (stop criteria), ``run_loop``
and ``run_log`` (``plangraph run``).

Importing this package stays cheap (no ray, no torch): import the submodules you need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plangraph.runtime.algorithm import Algorithm


def build(compiled: Any, **kwargs: Any) -> Algorithm:
    """Lower a compiled plan onto Ray actors: ``Algorithm(compiled, **kwargs)``.

    Keyword arguments: ``env`` (gymnasium id or env creator callable), ``num_workers``,
    ``seed``, ``address`` (Ray cluster; default: start Ray on this machine,
    ``plangraph.runtime.ray_session.ensure_ray``). See
    ``plangraph.runtime.algorithm.Algorithm``.
    """
    from plangraph.runtime.algorithm import Algorithm

    return Algorithm(compiled, **kwargs)
