"""The embedded JobStore: one SQLite file in WAL mode, cut along the same seams as every adapter."""

from .store import SQLiteJobStore as SQLiteJobStore
