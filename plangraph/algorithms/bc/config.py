"""BC's settings (torch-free): MARWIL with ``beta = 0``."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.algorithms.marwil.config import MARWILConfig

__all__ = ["BCConfig"]


class BCConfig(MARWILConfig):
    """Behaviour cloning: maximise the log-likelihood of the recorded actions (MARWIL,
    Wang et al. 2018, with ``beta = 0``; as RLlib's BC). Reads ``obs`` and ``actions``."""

    algo: Literal["bc"] = "bc"  # type: ignore[assignment]
    beta: float = Field(0.0, ge=0.0, le=0.0, description="Always 0 (behaviour cloning).")
    vf_coeff: float = Field(0.0, ge=0.0, le=0.0, description="Always 0: no value head loss.")

    learns_from: ClassVar[str] = "recorded experience (ReadExperiences): observations and actions"
