"""``python -m plangraph`` is the ``plangraph`` command."""

from plangraph.cli import main

raise SystemExit(main())
