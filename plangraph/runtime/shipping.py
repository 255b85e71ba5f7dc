"""The user's own code on a Ray cluster: which modules ``plangraph run --address`` ships.

A plan may use code that no cluster node has installed: a module named with ``--import``,
a module that the Python plan file (or such a module) imports from beside it, the
packages they import from the current directory. Objects from those modules reach the
rollout workers pickled *by reference* (``module.name``) unless plangraph registered the
module for pickling by value (envs: ``plangraph.rl.envs.ship_by_value``); a node must
then be able to import the module. So joining a cluster ships every such module with the
job's Ray ``runtime_env`` as ``py_modules`` (a package as its directory, a single-file
module as its ``.py``): Ray uploads them to the cluster once and puts them on every
worker's ``sys.path``, on every node, including nodes that join later.

"Such a module" is one loaded in this process from a file outside the interpreter's
standard library and site-packages (``plangraph.rl.envs.is_local_module``), other than
plangraph, ``__main__`` and a Python plan file itself (a plan file is run, not imported:
its classes and functions are always pickled by value). Installed packages are not
shipped: a node must have them, and a worker that cannot import one stops the run with a
message naming the module (``plangraph.rl.restarts.missing_module``).
"""

from __future__ import annotations

import os
import sys

from plangraph.rl.envs import is_local_module

__all__ = ["local_module_paths"]


def local_module_paths() -> list[str]:
    """The paths to ship as ``py_modules``: one per top-level local module or package
    loaded in this process, sorted; ``[]`` when there are none."""
    paths: set[str] = set()
    seen: set[str] = set()
    for name in sorted(sys.modules):
        top = name.partition(".")[0]
        # "__main__" (and multiprocessing's "__mp_main__" alias of it) is the script
        # itself; a plan file runs as "plangraph_plan_<name>": both travel by value.
        if top in seen or top.startswith("__") or top.startswith("plangraph_plan_"):
            continue
        seen.add(top)
        if not is_local_module(top):
            continue
        module = sys.modules.get(top)
        file = getattr(module, "__file__", None)
        if not file:
            continue  # a namespace package: nothing single to ship
        file = os.path.realpath(file)
        is_package = getattr(module, "__path__", None) is not None
        paths.add(os.path.dirname(file) if is_package else file)
    return sorted(paths)
