"""Operator tooling: ``seed``, ``loadtest`` and ``bench`` subcommands."""
