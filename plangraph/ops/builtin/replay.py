"""Built-in replay operators: write to and read from a replay buffer resource.

Implementations: ``plangraph/runtime/ops/replay.py``.
"""

from __future__ import annotations

from pydantic import Field

from plangraph.ops.builtin._shared import ResourceRef
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams

__all__ = ["LocalReplay", "LocalReplayParams", "StoreToReplay", "StoreToReplayParams"]


class StoreToReplayParams(OpParams):
    """Add each batch to a replay buffer resource and pass it through unchanged."""

    buffer: ResourceRef = Field(description='The ReplayBuffer resource to write, "@id".')


StoreToReplay = register_op(
    "StoreToReplay",
    category="replay",
    apply="for_each",
    inputs=["SampleBatch"],
    output="SampleBatch",
    params=StoreToReplayParams,
    resources={"buffer": ("ReplayBuffer", "write")},
    builtin=True,
)


class LocalReplayParams(OpParams):
    """Replay batches from a replay buffer resource.

    Yields a not-ready marker (so a ``Concurrently`` moves on) until the buffer holds
    ``learning_starts`` env steps, then one sampled batch of ``batch_size`` env steps per
    item (with ``batch_indexes``, and IS ``weights`` for prioritized buffers).
    """

    buffer: ResourceRef = Field(description='The ReplayBuffer resource to read, "@id".')
    batch_size: int = Field(ge=1, description="Env steps per replayed batch.")


LocalReplay = register_op(
    "LocalReplay",
    category="replay",
    apply="source",
    output="SampleBatch",
    params=LocalReplayParams,
    resources={"buffer": ("ReplayBuffer", "read")},
    builtin=True,
)
