"""Implementations of the built-in operators, one module per category.

``plangraph/runtime/ops/<category>.py`` implements the operators that
``plangraph/ops/builtin/<category>.py`` declares, each registered with
``register_lowering``. Importing this package registers them all (the lowering does).
"""

from __future__ import annotations

from plangraph.runtime.ops import (
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
"""The implementing module of each operator category."""

__all__ = ["MODULES"]
