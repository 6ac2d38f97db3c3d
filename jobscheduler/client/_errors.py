"""The project's exceptions for what the API answers (``{"error": ...}`` bodies) and for
a request that gets no answer; both clients raise them (the only translation of the two)."""

from __future__ import annotations

import httpx

from jobscheduler.errors import (
    ApiError,
    ApiUnreachable,
    DuplicateJob,
    DuplicateWorkflow,
    Forbidden,
    InvalidTransition,
    JobNotFound,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
    ValidationError,
)


def unreachable(base_url: str, exc: httpx.TransportError) -> ApiUnreachable:
    """The error for a request that never got an answer (connection refused, timeout...)."""
    return ApiUnreachable(f"{base_url}: {exc or type(exc).__name__}")


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        return None


def raise_for_status(
    response: httpx.Response, *, creates: bool = False, missing: type[JobNotFound] = JobNotFound
) -> None:
    """Raise the project's exception for an error answer (``{"error": ...}`` bodies);
    ``missing`` is what a 404 raises."""
    status = response.status_code
    if status < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    message = body.get("error") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = f"HTTP {status} from {response.request.method} {response.request.url.path}"
    if status in (400, 413, 415, 422):
        raise ValidationError(message)
    if status == 401:
        raise Unauthorized(message)
    if status == 403:
        raise Forbidden(message)
    if status == 404:
        raise missing(message)
    if status == 409:
        existing = body.get("jobId") if isinstance(body, dict) else None
        workflow = body.get("workflowId") if isinstance(body, dict) else None
        if creates and isinstance(workflow, str):
            raise DuplicateWorkflow(message, existing_id=workflow)
        if creates:
            raise DuplicateJob(message, existing_id=existing if isinstance(existing, str) else None)
        job_id = body.get("jobId") if isinstance(body, dict) else None
        status_now = body.get("status") if isinstance(body, dict) else None
        raise InvalidTransition(message, job_id=str(job_id or ""), status=str(status_now or ""))
    if status == 429:
        raise RateLimited(message, retry_after=_retry_after(response))
    if status == 503:
        raise ServiceUnavailable(message, retry_after=_retry_after(response))
    raise ApiError(message, status=status)
