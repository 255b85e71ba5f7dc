"""Ray's dashboard agent on a Ray without its dashboard packages, as the local head starts
it (``plangraph.runtime.local_head``): Ray's own agent, run as Ray runs it, less its
search for the dashboard's modules.

On such a Ray ("minimal": ``ray`` rather than ``ray[default]``), Ray starts the agent with
``--minimal``, and a minimal agent keeps only the agent modules that declare themselves
minimal; Ray has none (``tests/test_local_head.py`` checks this for the installed Ray), so
it keeps none. Finding that out imports about 25 of the dashboard's modules, about 0.35 s
of CPU, while the raylet waits for its agents before it reports the node up. The agent
does everything else as before: it writes its ports (-1: no metrics, no HTTP server) and
exits with its raylet.

Run as ``python -u minimal_dashboard_agent.py RAY/dashboard/agent.py ARGS...``; without
``--minimal`` among ``ARGS`` the agent runs unchanged. Imports nothing of plangraph, so that
it runs wherever Ray's own agent does.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any


def _no_modules(module_type: Any) -> list[Any]:
    return []


def main() -> None:
    agent, *args = sys.argv[1:]
    if "--minimal" in args:
        import ray.dashboard.utils

        ray.dashboard.utils.get_all_modules = _no_modules
    # As if Ray had run the agent itself: its own directory first on the path, not this one.
    sys.path[0] = os.path.dirname(os.path.abspath(agent))
    sys.argv = [agent, *args]
    runpy.run_path(agent, run_name="__main__")


if __name__ == "__main__":
    main()
