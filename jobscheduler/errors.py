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


class WorkflowNotFound(JobNotFound):
    """No workflow has the requested id (a workflow is jobs: a JobNotFound too)."""


class DuplicateWorkflow(DuplicateJob):
    """The workflow's idempotencyKey is already used by another workflow (``existing_id``)."""


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
    """Raised by a handler: the job can never succeed, so it goes to the dead-letter queue now."""


class HandlerTimeout(HandlerError, TimeoutError):
    """A handler ran past its ``timeout``; it was stopped and the attempt failed."""


class AppLoadError(ConfigError):
    """The user's app (``--app`` / ``JOBSCHEDULER_APP``) could not be loaded or is invalid."""


class ResultError(JobSchedulerError, ValueError):
    """A handler's return value cannot be stored as the job's result."""


class AddressRefused(JobSchedulerError, PermissionError):
    """The destination is an internal address that the allowlist does not name."""


class ResolveError(JobSchedulerError, OSError):
    """The host name could not be resolved (a temporary failure as far as a job knows)."""


class StoreLocked(JobSchedulerError, RuntimeError):
    """Another process already holds the lock on this store file."""


class CannotListen(JobSchedulerError, OSError):
    """A listener could not bind its address; the message names the variable to change."""


class InvalidTransition(JobSchedulerError, ValueError):
    """The job's current status does not allow the action (a 409 naming the status)."""

    def __init__(self, message: str, *, job_id: str, status: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.status = status


# ------------------------------------------------------- raised by the HTTP API


class UnsupportedMediaType(JobSchedulerError, ValueError):
    """The request body is not JSON (answered 415)."""


class BodyTooLarge(JobSchedulerError, ValueError):
    """The request body is larger than the API accepts (answered 413)."""


class RouteNotFound(JobSchedulerError, LookupError):
    """No route has the requested path (answered 404)."""


class MethodNotAllowed(JobSchedulerError, LookupError):
    """The path exists, but not with the request's method (answered 405)."""


class KeyNotFound(JobSchedulerError, LookupError):
    """No API key the caller may see has the requested id (answered 404)."""


class WebhookNotFound(JobSchedulerError, LookupError):
    """No webhook the caller may see has the requested id (answered 404)."""


class QuotaExceeded(JobSchedulerError, RuntimeError):
    """A tenant's quota refuses this request (HTTP 429 with Retry-After)."""

    def __init__(self, message: str, *, reason: str, retry_after: int) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after


# ------------------------------------------------------- raised by jobscheduler.client


class RateLimited(JobSchedulerError, RuntimeError):
    """Too many requests (HTTP 429); ``retry_after`` is the server's hint in seconds."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServiceUnavailable(StoreError):
    """The API could not reach its store (HTTP 503); ``retry_after`` in seconds, if given."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ApiError(JobSchedulerError, RuntimeError):
    """The API answered a status the client has no better exception for (``status``)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class ApiUnreachable(JobSchedulerError, ConnectionError):
    """The API could not be reached (connection refused, DNS, timeout)."""


class WaitTimeout(JobSchedulerError, TimeoutError):
    """``wait()`` gave up before the job reached a final status."""


# ------------------------------------------------------- raised by jobscheduler.tools


class LoadTestError(JobSchedulerError, RuntimeError):
    """The load test could not run at all (for example, the API is unreachable)."""
