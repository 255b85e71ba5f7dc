"""BC's learner: MARWIL's with ``beta = 0`` (``plangraph.algorithms.marwil.policy``):
``L = -mean_i[ log pi(a_i|s_i) ]`` over the recorded rows, reading ``obs`` and
``actions`` only."""

from __future__ import annotations

from plangraph.algorithms.bc.config import BCConfig
from plangraph.algorithms.marwil.policy import MARWILPolicy
from plangraph.rl import SampleBatch

__all__ = ["BCPolicy"]


class BCPolicy(MARWILPolicy):
    """Behaviour cloning (MARWIL with ``beta = 0``)."""

    config_type = BCConfig
    loss_columns = (SampleBatch.OBS, SampleBatch.ACTIONS)
