"""Shared fixtures. Ray is started once per test session, on demand, with 2 CPUs."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A real local Ray instance (``ray.init(num_cpus=2)``), shared by the whole session."""
    import ray

    if not ray.is_initialized():
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=True,
            configure_logging=False,
        )
    yield
    ray.shutdown()
