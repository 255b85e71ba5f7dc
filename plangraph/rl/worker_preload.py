"""What each Ray worker of the local head imports before it accepts work (Ray's
``preload_python_modules``, set in ``plangraph.runtime.local_head``): the rollout worker's
modules, with numpy's BLAS on one thread.

numpy's BLAS (OpenBLAS) reads ``OMP_NUM_THREADS`` once, when numpy is imported. Ray sets
that variable for each actor, to its CPUs (at least 1; 1 for an actor that reserves none,
as rollout workers do by default), just before the actor starts: after this preload. With
the variable unset here, numpy would start one BLAS thread per core in every worker, which
spin-wait beside the other workers (about 0.15 s more CPU per worker in a start on 2
cores). So numpy is imported with one thread, as rollout workers sample single-threaded
(their torch too: ``RolloutWorker(torch_threads=1)``), and the variable is unset again
afterwards so that Ray still sets it for each actor, for the libraries imported later.
"""

from __future__ import annotations

import os

_unset = "OMP_NUM_THREADS" not in os.environ
if _unset:
    os.environ["OMP_NUM_THREADS"] = "1"
try:
    import plangraph.rl.rollout_worker  # noqa: F401
finally:
    if _unset:
        del os.environ["OMP_NUM_THREADS"]
