"""Helpers shared by the test suites (process supervisor, cluster of role processes)."""
