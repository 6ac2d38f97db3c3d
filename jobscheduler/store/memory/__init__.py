"""The in-memory JobStore: the contract of every adapter, in this process's memory."""

from .store import MemoryJobStore as MemoryJobStore
