"""The flow engine: plan-agnostic, pull-based streams over Ray actors.

Knows nothing of plans, operators or RL: local and parallel iterators (``local``,
``parallel``, ``_shard``), union/``Concurrently`` (``concurrency``), the not-ready and
end-of-stream sentinels (``sentinel``), the shared metrics context (``metrics``; its
timers, ``timer``; its profile, ``profile``) and ``OperatorError`` (``errors``). The plan
executor (``plangraph.runtime``) builds plans on it.

Importing this package is cheap (no ray): ``plangraph.flow.iterators`` is the public face
(``LocalIterator``, ``ParallelIterator``, ``NOT_READY``); import it, or a submodule, when
you need it. The behaviour follows RLlib Flow (``ray.util.iter``, Ray 1.0.1) as described
in ``shared/reference/rllib_flow_semantics.md`` sections 1-2, rebuilt on Ray core.
"""
