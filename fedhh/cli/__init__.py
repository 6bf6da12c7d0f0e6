"""The `fedhh` command line: one console script, one module per subcommand."""
