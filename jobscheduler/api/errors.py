"""The one table from the project's exceptions to HTTP answers.

Each :class:`ErrorRule` says what an exception is answered with (status, the body's
``{"error"}`` and its extra fields, headers such as ``Retry-After``) and how the OpenAPI
document describes that answer (reason, body schema, headers). Everything that turns an
exception into a status reads it: the app's error handler (:mod:`.hooks`), the dashboard's
pages (:mod:`.ui`), and the document (:mod:`.openapi`), where every operation lists the
exceptions it can raise (:attr:`.route_table.Operation.errors`) and the statuses follow.

Errors of the web framework (an unknown route, a wrong method, a body over the limit) are
translated into the project's own at the edge (:func:`from_http`), so they are answered by
the same table. An exception with no rule is a bug: a 500 with a generic message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
from quart import Response
from werkzeug.exceptions import (
    HTTPException,
    NotFound,
    RequestEntityTooLarge,
)
from werkzeug.exceptions import (
    MethodNotAllowed as MethodNotAllowedHTTP,
)

from jobscheduler.errors import (
    BodyTooLarge,
    DuplicateJob,
    DuplicateWorkflow,
    Forbidden,
    InvalidTransition,
    JobNotFound,
    JobSchedulerError,
    KeyNotFound,
    MethodNotAllowed,
    QuotaExceeded,
    RouteNotFound,
    StoreError,
    Unauthorized,
    UnsupportedMediaType,
    ValidationError,
    WebhookNotFound,
    WorkflowNotFound,
)

from .replies import json_response
from .shapes import CONFLICT, DUPLICATE, DUPLICATE_WORKFLOW, ERROR, Schema

#: Largest request body the API reads (413 above it).
MAX_BODY_BYTES = 1024 * 1024
#: ``Retry-After`` (seconds) of every 503: the store failed or did not answer in time.
RETRY_AFTER_SECONDS = 1
#: The one message of every 401: never a hint whether a key exists or why it failed.
UNAUTHORIZED_MESSAGE = "missing or invalid API key (send Authorization: Bearer <key>)"
#: The message of every 503 (the store's own error is logged, not shown).
STORE_UNAVAILABLE_MESSAGE = "job store unavailable, retry later"
#: The message of an exception no rule answers (a bug: it is logged with its traceback).
INTERNAL_ERROR_MESSAGE = "internal error"


@attrs.frozen
class Header:
    """A header of an error answer: what the document says of it, and its value."""

    description: str
    value: Callable[[Any], str]


@attrs.frozen(kw_only=True)
class ErrorRule:
    """How one exception (and its subclasses) is answered and documented."""

    status: int
    #: Why an operation answers this, in the document (an operation may say it better).
    reason: str
    #: The body's schema in the document.
    schema: Schema = ERROR
    #: A fixed message (None: the exception's own, which is safe to show).
    message: str | None = None
    #: Fields of the body beside ``error``, from the exception.
    fields: Callable[[Any], dict[str, Any]] | None = None
    headers: Mapping[str, Header] = attrs.field(factory=dict)


_RETRY_LATER = "seconds to wait"

ERRORS: Mapping[type[JobSchedulerError], ErrorRule] = {
    ValidationError: ErrorRule(
        status=400, reason="the request is invalid (the message says which field and why)"
    ),
    Unauthorized: ErrorRule(
        status=401,
        reason="no valid API key",
        message=UNAUTHORIZED_MESSAGE,
        headers={"WWW-Authenticate": Header("the scheme a key is sent with", lambda _: "Bearer")},
    ),
    Forbidden: ErrorRule(status=403, reason="the key may not do this, or names another tenant"),
    JobNotFound: ErrorRule(status=404, reason="no such job (or one of another tenant)"),
    KeyNotFound: ErrorRule(status=404, reason="no such key (or one of another tenant)"),
    WorkflowNotFound: ErrorRule(status=404, reason="no such workflow (or one of another tenant)"),
    WebhookNotFound: ErrorRule(status=404, reason="no such webhook (or one of another tenant)"),
    RouteNotFound: ErrorRule(status=404, reason="no such route"),
    MethodNotAllowed: ErrorRule(status=405, reason="method not allowed"),
    DuplicateJob: ErrorRule(
        status=409,
        reason="the idempotencyKey is taken (jobId names it)",
        schema=DUPLICATE,
        fields=lambda exc: {"jobId": exc.existing_id},
    ),
    DuplicateWorkflow: ErrorRule(
        status=409,
        reason="the idempotencyKey names another workflow (workflowId names it)",
        schema=DUPLICATE_WORKFLOW,
        fields=lambda exc: {"workflowId": exc.existing_id},
    ),
    InvalidTransition: ErrorRule(
        status=409,
        reason="the job's status forbids the action",
        schema=CONFLICT,
        fields=lambda exc: {"jobId": exc.job_id, "status": exc.status},
    ),
    BodyTooLarge: ErrorRule(status=413, reason="request body larger than 1 MiB"),
    UnsupportedMediaType: ErrorRule(status=415, reason="Content-Type must be application/json"),
    QuotaExceeded: ErrorRule(
        status=429,
        reason="too many requests; retry after Retry-After seconds",
        headers={"Retry-After": Header(_RETRY_LATER, lambda exc: str(exc.retry_after))},
    ),
    StoreError: ErrorRule(
        status=503,
        reason="the job store is unavailable; retry after Retry-After seconds",
        message=STORE_UNAVAILABLE_MESSAGE,
        headers={"Retry-After": Header(_RETRY_LATER, lambda _: str(RETRY_AFTER_SECONDS))},
    ),
}


def rule_of(error: type[BaseException]) -> ErrorRule | None:
    """The rule of ``error``: its own, or its nearest ancestor's (None: no rule)."""
    for cls in error.__mro__:
        rule = ERRORS.get(cls)
        if rule is not None:
            return rule
    return None


def status_of(error: type[JobSchedulerError]) -> int:
    """The status ``error`` is answered with (500 without a rule)."""
    rule = rule_of(error)
    return 500 if rule is None else rule.status


def response_of(exc: JobSchedulerError) -> Response:
    """The answer to ``exc``: its rule's status, body and headers (500 without a rule)."""
    rule = rule_of(type(exc))
    if rule is None:
        return json_response({"error": INTERNAL_ERROR_MESSAGE}, 500)
    body: dict[str, Any] = {"error": rule.message or str(exc)}
    if rule.fields is not None:
        body.update(rule.fields(exc))
    headers = {name: header.value(exc) for name, header in rule.headers.items()}
    return json_response(body, rule.status, headers)


def from_http(exc: HTTPException) -> JobSchedulerError | None:
    """The project's error for one the web framework raised (None: no translation)."""
    if isinstance(exc, NotFound):
        return RouteNotFound("not found")
    if isinstance(exc, MethodNotAllowedHTTP):
        return MethodNotAllowed("method not allowed")
    if isinstance(exc, RequestEntityTooLarge):
        return BodyTooLarge(f"request body larger than {MAX_BODY_BYTES} bytes")
    return None
