"""plangraph's version (``plangraph.__version__``), importable from every layer (a recorded
dataset's ``metadata.json`` names it)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
