"""Ending a command-line process once its work is done, without the interpreter's teardown
(``plangraph`` commands and the head-node process of ``plangraph.runtime.local_head``)."""

from __future__ import annotations

import atexit
import os
import sys
from typing import NoReturn

__all__ = ["exit_now"]


def exit_now(code: int) -> NoReturn:
    """End this process with exit status ``code`` after a command returned: run the atexit
    hooks (Ray's, logging's, multiprocessing's, temporary files'), flush stdout and stderr,
    then stop without the interpreter's teardown.

    That teardown frees every object of every module one by one: with torch loaded about a
    second of a ``plangraph run``, for nothing a finished command needs, since every file
    it wrote is closed by then. Only for the command-line entry points: ``main()`` itself
    returns, for callers in a Python process.
    """
    run_exit_hooks = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_hooks is None:  # not CPython: the ordinary exit
        raise SystemExit(code)
    run_exit_hooks()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing left to write to
            pass
    os._exit(code)
