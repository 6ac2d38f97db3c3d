"""The ``jobscheduler`` command line: one module per group of subcommands."""
