"""plangraph's error tree: one base class, one subclass per phase of a plan's life.

Every error plangraph raises on purpose is a :class:`PlangraphError`; catch that to catch
them all, or a phase to catch one kind. Each also keeps the builtin base it always had
(``ValueError``, ``RuntimeError``; ``TimeoutError`` for the deadlines), so older ``except
ValueError`` code keeps working::

    PlangraphError
    ├── PlanError                  the plan cannot be loaded, built in Python, or is invalid
    │   ├── PlanValidationError    (plangraph.compiler) carries every Diagnostic found
    │   └── PlanBuildError         (plangraph.ops) a Python plan's builder call is wrong
    ├── BuildError                 a clean plan cannot be built as asked (bad override,
    │   │                          unknown env id), raised before Ray starts
    │   └── VideoExtraMissing      (plangraph.runtime.video) a video without the
    │                              ``plangraph[video]`` extra installed
    ├── RegistrationError          an operator or resource kind cannot be registered
    │   └── UnknownOperatorError   ``get_op`` of a name nobody registered (also a KeyError)
    ├── RenderError                (plangraph.diagram) the plan cannot be drawn to a file
    │   ├── UnsupportedFormatError, GraphvizPackageMissingError,
    │   └── DotBinaryMissingError, DotFailedError
    ├── OperatorError              (plangraph.flow) an operator or actor task failed while
    │   │                          running; names the plan node id
    │   ├── PlanStalledError       (plangraph.flow.watchdog) the sink got nothing for
    │   │                          max_idle_s while the flow kept running
    │   ├── WorkerRestartError     (plangraph.rl.restarts) a rollout worker kept dying
    │   ├── RemoteCallError        (plangraph.flow.errors) a call sent to an actor without
    │   │                          waiting (a weight sync, a priority update) raised there
    │   └── OperatorTimeoutError   (plangraph.flow.errors) a plan node waited past its
    │                              deadline (also a WaitTimeoutError)
    ├── WaitTimeoutError           something plangraph waited for (an actor's reply, a
    │                              learner thread) did not come within its deadline
    ├── UnknownPassError           ``--no-pass`` / ``disable_passes`` names no optimisation
    │                              pass (the message has a did-you-mean)
    ├── StopCriterionError         a malformed or unknown stop criterion (``--stop``)
    ├── CheckpointError            a checkpoint or run directory is corrupt, truncated,
    │                              hand-edited, of another plan, or in the old pickle format
    ├── DatasetError               (plangraph.rl.offline) an offline dataset cannot be
    │                              written or read, or does not fit the plan's env
    └── NonFiniteGradientError     (plangraph.rl.policy) a loss's gradient is NaN or
                                   infinite: the optimizer step is refused

Severity of a compiler finding is not an exception matter: a ``Diagnostic``'s severity is
always the one its code has in ``plangraph.compiler.CODES``; only errors block a launch.
This module imports nothing (every layer may use it).
"""

from __future__ import annotations

__all__ = [
    "BuildError",
    "CheckpointError",
    "DatasetError",
    "NonFiniteGradientError",
    "PlanError",
    "PlangraphError",
    "RegistrationError",
    "RenderError",
    "StopCriterionError",
    "UnknownOperatorError",
    "UnknownPassError",
    "WaitTimeoutError",
]


class PlangraphError(Exception):
    """Base class of every error plangraph raises on purpose."""


class PlanError(PlangraphError, ValueError):
    """A plan cannot be loaded, built in Python, or has errors (the plan/validation phase)."""


class BuildError(PlangraphError, ValueError):
    """A plan that compiled cleanly cannot be built or run as asked (an unknown env id, an
    invalid ``build()`` override, an operator without an implementation, an Algorithm
    used after ``stop()``); raised before Ray starts or any actor is created."""


class RegistrationError(PlangraphError, ValueError):
    """An operator or resource kind cannot be registered: its name is taken (or built in)
    or its signature is inconsistent (bad category, arity, resource param)."""


class UnknownOperatorError(RegistrationError, KeyError):
    """No operator of that name is registered (the message has a did-you-mean)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class RenderError(PlangraphError):
    """A plan could not be drawn to the requested output (see ``plangraph.diagram.errors``)."""


class UnknownPassError(PlangraphError, ValueError):
    """An optimisation pass named to turn off (``--no-pass``, ``disable_passes=``) does not
    exist; the message suggests close names and lists the passes."""


class StopCriterionError(PlangraphError, ValueError):
    """A malformed ``KEY=VALUE`` argument or a stop criterion naming no result key."""


class CheckpointError(PlangraphError, ValueError):
    """A checkpoint or run directory cannot be loaded: a file is missing, corrupt,
    truncated, hand-edited into an unexpected shape, written for another plan, or in the
    pre-2 pickle format (refused, never unpickled: a pickle can run code when loaded)."""


class DatasetError(PlangraphError, ValueError):
    """An offline dataset cannot be written or read, or does not fit the plan: a path that
    does not exist, no rows, a file that is not Parquet, a missing column, a dtype or
    shape the env's spaces do not allow, NaN rewards (the message names the dataset, the
    file or column, and how to fix it)."""


class NonFiniteGradientError(PlangraphError, FloatingPointError):
    """A learner's loss has a NaN or infinite gradient (global L2 norm over an optimizer's
    parameters): that optimizer is not stepped, so the weights stay as they were before
    the minibatch. The message names the policy, the optimizer and the env steps, and the
    usual causes (NaN/inf observations or rewards, a diverging loss)."""


class WaitTimeoutError(PlangraphError, TimeoutError):
    """Something plangraph waited for, outside the waiting thread's control (a Ray actor's
    reply, a learner thread's update or its exit), did not come within its deadline.

    The message says what was waited for, for how long (seconds) and what to check; the
    deadlines are named constants (``plangraph.flow.deadlines.REPLY_DEADLINE_S`` and the
    others their docstrings point to). A plan node's wait raises the subclass
    ``plangraph.flow.errors.OperatorTimeoutError``, which names the node.
    """
