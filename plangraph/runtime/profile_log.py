"""Writing a run's profile (``profile.json``, ``plangraph.ir.profile``) into its directory.

``plangraph run`` writes it at every checkpoint and at the end, so a run stopped at any
point leaves the profile of what it did; ``plangraph profile RUN_DIR`` reads it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from plangraph.ir.profile import PROFILE_FILE

if TYPE_CHECKING:
    from plangraph.runtime.algorithm import Algorithm

__all__ = ["write_profile"]


def write_profile(run_dir: Path, algo: Algorithm) -> Path:
    """Write ``algo.profile()`` to ``run_dir/profile.json`` (atomically: a reader never
    sees half a file) and return the path."""
    path = Path(run_dir) / PROFILE_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(algo.profile().to_json(), encoding="utf-8")
    os.replace(tmp, path)
    return path
