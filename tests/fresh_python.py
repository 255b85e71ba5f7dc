"""Run Python code in a fresh interpreter with this checkout on its path: for tests whose
subject is a process's start (imports, Ray's start-up, environment variables)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Standard output of ``python -c code *args`` run in the repository root; fails the
    test with the child's standard error when it exits non-zero."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
