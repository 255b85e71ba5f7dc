"""``python -m plangraph`` is the ``plangraph`` command (and ``entry`` its console script)."""

import signal
import sys
from typing import NoReturn

from plangraph.cli import main


def entry() -> NoReturn:
    """Run the command named on the command line, then end the process with its code."""
    code = main(owns_process=True)
    # The command is done (Ray shut down, files written): a Ctrl-C now would only interrupt
    # the interpreter's atexit hooks (Ray's among them) with a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    entry()
