"""plangraph's own operators, one module per category (``registry.CATEGORIES``).

Each module declares its operators once: the ``Params`` model (its docstring is the op's
documentation, field descriptions give units), and ``register_op(..., builtin=True)``,
which records the signature and returns the Python builder. The implementation of an
operator of category ``c`` lives in ``plangraph/runtime/ops/<c>.py``. Importing this
package registers them all (``plangraph.ops`` does); it needs only pydantic and ``ir``.

Semantics follow ``shared/reference/rllib_flow_semantics.md`` except where DESIGN.md
deviates (``AverageGradients`` averages).
"""

from __future__ import annotations

from plangraph.ops.builtin import (
    combine,
    merge,
    replay,
    sink,
    sources,
    train,
)

MODULES = {
    "source": sources,
    "combine": combine,
    "train": train,
    "replay": replay,
    "merge": merge,
    "sink": sink,
}
"""The declaring module of each category, in ``CATEGORIES`` order."""

__all__ = ["MODULES"]
