"""The project's exceptions: one root, small leaves that also inherit the nearest builtin.

Third-party errors (sqlite3, pymongo, confluent-kafka, grpc) are translated into these at
the adapter edge, so roles and the HTTP layer never see a driver's exception type.
"""

from __future__ import annotations


class JobSchedulerError(Exception):
    """Root of every error this package raises on purpose."""


class ConfigError(JobSchedulerError, ValueError):
    """A setting from the environment is missing or malformed."""


class ValidationError(JobSchedulerError, ValueError):
    """A job request does not satisfy the contract; the message is safe to show to clients."""


class JobNotFound(JobSchedulerError, LookupError):
    """No job has the requested id."""


class Unauthorized(JobSchedulerError, PermissionError):
    """The request carries no valid API key (missing, malformed, unknown or revoked)."""


class Forbidden(JobSchedulerError, PermissionError):
    """The caller's key may not do this, or names a tenant it is not bound to."""


class DuplicateJob(JobSchedulerError, ValueError):
    """The idempotencyKey is already used by another job (``existing_id``, when known)."""

    def __init__(self, message: str, *, existing_id: str | None = None) -> None:
        super().__init__(message)
        self.existing_id = existing_id


class StoreError(JobSchedulerError, RuntimeError):
    """The job store failed; the outcome of the operation may be unknown."""


class BusError(JobSchedulerError, RuntimeError):
    """The message bus could not publish or consume."""


class ElectionError(JobSchedulerError, RuntimeError):
    """Leadership could not be obtained or confirmed."""


class HandlerError(JobSchedulerError, RuntimeError):
    """A job handler reported a failure (the job is retried or dead-lettered)."""


class UnknownHandler(JobSchedulerError, LookupError):
    """No handler is registered under that job type."""


class PermanentError(HandlerError):
    """Raised by a handler: this job can never succeed (a 404, a payload no retry can fix).
    The remaining attempts are skipped and the job goes to the dead-letter queue at once."""


class HandlerTimeout(HandlerError, TimeoutError):
    """A handler ran past its ``timeout``; it was stopped and the attempt failed."""


class AppLoadError(ConfigError):
    """The user's app (``--app`` / ``JOBSCHEDULER_APP``) could not be loaded or is invalid."""


class InvalidTransition(JobSchedulerError, ValueError):
    """The job's current status does not allow the action (a 409 naming the status)."""

    def __init__(self, message: str, *, job_id: str, status: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.status = status
