"""Starting or joining Ray for a run (the one place plangraph calls ``ray.init``)."""

from __future__ import annotations


def ensure_ray(address: str | None = None) -> None:
    """Start Ray in-process (as many CPUs as the machine has), or join the cluster at
    ``address``; no dashboard. Does nothing when Ray is already initialised."""
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, include_dashboard=False, configure_logging=False)
    else:
        ray.init(address="local", include_dashboard=False, configure_logging=False)
