"""``python -m plangraph`` is the ``plangraph`` command."""

import signal

from plangraph.cli import main

code = main()
# The command is done (Ray shut down, files written): a Ctrl-C now would only interrupt
# the interpreter's atexit hooks (Ray's among them) with a KeyboardInterrupt traceback.
signal.signal(signal.SIGINT, signal.SIG_IGN)
raise SystemExit(code)
