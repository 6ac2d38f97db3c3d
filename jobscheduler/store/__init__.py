"""Job stores: the port and its adapters."""

from .base import JobStore as JobStore
