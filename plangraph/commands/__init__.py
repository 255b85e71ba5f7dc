"""One module per ``plangraph`` subcommand (see ``plangraph.cli``)."""
