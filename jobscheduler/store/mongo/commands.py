"""Counting the MongoDB commands a process sends: ``store_commands_total{command}``.

A pymongo command listener (``pymongo.monitoring``) given to the store's client by the
production roles. Every command the driver starts is counted by its name (``find``,
``update``, ``findAndModify``, ``insert``, ...), whether it then succeeds or fails, so the
benchmark can divide a role's commands by the jobs it handled: on a real deployment each
command is a network round trip.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter
from pymongo.monitoring import (
    CommandFailedEvent,
    CommandListener,
    CommandStartedEvent,
    CommandSucceededEvent,
)

METRIC: Final = "store_commands_total"

#: Handshake and monitoring commands the driver sends on its own (not the store's work).
_DRIVER_COMMANDS: Final = frozenset({"hello", "ismaster", "isMaster", "endSessions"})


class CommandCounter(CommandListener):
    """Counts each command started on the clients it is given to, by command name (the
    driver's own handshakes and session clean-up are left out). Thread-safe: the counter
    is a Prometheus counter, and the driver calls listeners from its worker threads."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.commands = Counter(
            "store_commands",
            "MongoDB commands sent by this process's store, by command name.",
            ["command"],
            registry=registry,
        )

    def started(self, event: CommandStartedEvent) -> None:
        if event.command_name not in _DRIVER_COMMANDS:
            self.commands.labels(command=event.command_name).inc()

    def succeeded(self, event: CommandSucceededEvent) -> None:
        pass

    def failed(self, event: CommandFailedEvent) -> None:
        pass
