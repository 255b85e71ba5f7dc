"""plangraph: distributed RL training loops as declared, compiled, drawable dataflow.

Importing this package is cheap: it pulls in neither ray nor torch. Those load only when a
compiled plan is built (``CompiledPlan.build``) or the ``run`` command starts.
"""

from __future__ import annotations

__version__ = "0.1.0"
