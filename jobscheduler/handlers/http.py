"""The built-in ``http`` handler: a job that sends one HTTP request (a webhook).

Payload (validated at ``POST /jobs``)::

    {"url": "https://hooks.example.com/x", "method": "POST",
     "headers": {"X-Token": "..."}, "json": {...} | "body": "text",
     "timeoutMs": 10000, "expectStatus": 200 | [200, 202]}

Outcomes: a success status (2xx, or one of ``expectStatus``) completes the job with the
result ``{"status", "headers" (a few), "body" (first 4 KiB as text), "truncated"}``. A 5xx,
408 or 429, a timeout or a connection error fails the attempt (retried with backoff). Any
other status, a refused address, an unfollowed or excessive redirect raises
:class:`PermanentError` (dead-lettered at once). Destinations are checked by the address
guard (:mod:`.netguard`) and connections go to the vetted address
(:mod:`.guarded_transport`).
"""

from __future__ import annotations

import codecs
import logging
import re
import ssl
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import httpcore
import httpx
import trio

from jobscheduler.domain.addresses import Allowlist
from jobscheduler.errors import AddressRefused, HandlerError, PermanentError, ValidationError

from .context import JobContext
from .guarded_transport import GuardedTransport
from .netguard import AddressGuard, Resolver, system_resolver

if TYPE_CHECKING:
    from jobscheduler.config import Settings

log = logging.getLogger(__name__)

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
DEFAULT_METHOD = "POST"
DEFAULT_TIMEOUT_MS = 10_000
MAX_TIMEOUT_MS = 300_000
MAX_URL_LENGTH = 2048
MAX_HEADERS = 50
MAX_HEADER_VALUE = 8192
MAX_EXPECTED = 20
RESULT_BODY_BYTES = 4096
#: Response headers copied into the result (lower case).
RESULT_HEADERS = ("content-type", "content-length", "location", "retry-after", "etag")
#: Headers the client sets itself: a job may not override them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    }
)
RETRIED_STATUSES = frozenset({408, 429})
#: Sent unless the job's headers say otherwise.
DEFAULT_HEADERS = {"User-Agent": "jobscheduler-http", "Accept-Encoding": "identity"}
FIELDS = ("url", "method", "headers", "json", "body", "timeoutMs", "expectStatus")

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def _integer(value: Any) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def validate_url(url: Any, field: str = "payload.url") -> httpx.URL:
    """A URL an ``http`` job (or a webhook) may name: http(s), a host, no credentials, at
    most 2048 characters; ValidationError naming ``field`` otherwise. Whether its address
    may be reached is the guard's to say, when it is dialled."""
    if not isinstance(url, str) or not url:
        raise ValidationError(f"{field}: required string")
    if len(url) > MAX_URL_LENGTH:
        raise ValidationError(f"{field}: longer than {MAX_URL_LENGTH} characters")
    if _CONTROL.search(url):
        raise ValidationError(f"{field}: must not contain spaces or control characters")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValidationError(f"{field}: not a valid URL ({exc})") from None
    if parsed.scheme not in ("http", "https"):
        raise ValidationError(f"{field}: only http and https URLs are allowed")
    if not parsed.host:
        raise ValidationError(f"{field}: needs a host")
    if parsed.userinfo:
        raise ValidationError(
            f"{field}: credentials in the URL (user:pass@) are not allowed; "
            "send them in payload.headers"
            if field == "payload.url"
            else f"{field}: credentials in the URL (user:pass@) are not allowed"
        )
    return parsed


def _validate_headers(headers: Any) -> None:
    if not isinstance(headers, Mapping):
        raise ValidationError("payload.headers: must be an object of strings")
    if len(headers) > MAX_HEADERS:
        raise ValidationError(f"payload.headers: at most {MAX_HEADERS} headers")
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValidationError(f"payload.headers: {name!r} is not a valid header name")
        if name.lower() in RESERVED_HEADERS:
            raise ValidationError(f"payload.headers: {name!r} is set by the client itself")
        if not isinstance(value, str):
            raise ValidationError(f"payload.headers.{name}: must be a string")
        if any(ch in value for ch in "\r\n\x00"):
            raise ValidationError(f"payload.headers.{name}: must not contain CR, LF or NUL")
        if len(value) > MAX_HEADER_VALUE:
            raise ValidationError(
                f"payload.headers.{name}: longer than {MAX_HEADER_VALUE} characters"
            )


def _validate_expect(expect: Any) -> None:
    values = expect if isinstance(expect, list) else [expect]
    message = "payload.expectStatus: an HTTP status (100-599) or a non-empty list of them"
    if not values or len(values) > MAX_EXPECTED:
        raise ValidationError(message)
    for value in values:
        status = _integer(value)
        if status is None or not 100 <= status <= 599:
            raise ValidationError(message)


def validate_http(payload: Mapping[str, Any]) -> None:
    """Check an ``http`` job's payload at ``POST /jobs`` (ValidationError -> 400)."""
    unknown = sorted(set(payload) - set(FIELDS))
    if unknown:
        raise ValidationError(
            f"payload: unknown field {unknown[0]!r} for http (allowed: {', '.join(FIELDS)})"
        )
    validate_url(payload.get("url"))
    method = payload.get("method", DEFAULT_METHOD)
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise ValidationError(f"payload.method: one of {', '.join(METHODS)}")
    if "headers" in payload:
        _validate_headers(payload["headers"])
    if "json" in payload and "body" in payload:
        raise ValidationError("payload: give json or body, not both")
    if "body" in payload and not isinstance(payload["body"], str):
        raise ValidationError("payload.body: must be a string (use json for a JSON value)")
    if ("json" in payload or "body" in payload) and method.upper() in ("GET", "HEAD"):
        raise ValidationError(f"payload: a {method.upper()} request carries no json or body")
    if "timeoutMs" in payload:
        timeout = _integer(payload["timeoutMs"])
        if timeout is None or not 1 <= timeout <= MAX_TIMEOUT_MS:
            raise ValidationError(f"payload.timeoutMs: an integer between 1 and {MAX_TIMEOUT_MS}")
    if "expectStatus" in payload:
        _validate_expect(payload["expectStatus"])


@attrs.frozen(kw_only=True)
class _Request:
    """A validated payload, ready to send."""

    url: httpx.URL
    method: str
    headers: dict[str, str]
    json: Any
    body: str | None
    has_json: bool
    timeout_ms: int
    expect: frozenset[int] | None

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> _Request:
        # Jobs are validated at POST /jobs; validating again here protects the handler
        # from rows written some other way (a ValidationError is permanent).
        try:
            validate_http(payload)
        except ValidationError as exc:
            raise PermanentError(f"http: invalid payload: {exc}") from None
        expect = payload.get("expectStatus")
        expected = None
        if expect is not None:
            values = expect if isinstance(expect, list) else [expect]
            expected = frozenset(int(value) for value in values)
        return cls(
            url=httpx.URL(payload["url"]),
            method=str(payload.get("method", DEFAULT_METHOD)).upper(),
            headers=dict(payload.get("headers", {})),
            json=payload.get("json"),
            body=payload.get("body"),
            has_json="json" in payload,
            timeout_ms=int(payload.get("timeoutMs", DEFAULT_TIMEOUT_MS)),
            expect=expected,
        )

    @property
    def target(self) -> str:
        """The URL without query or fragment (they may hold secrets): for messages and logs."""
        return str(self.url.copy_with(query=None, fragment=None))


def _decode(data: bytes, encoding: str | None) -> str:
    try:
        decoder = codecs.getincrementaldecoder(encoding or "utf-8")(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    # final=False: a character cut at the 4 KiB boundary is dropped, not garbled.
    return decoder.decode(data, final=False)


async def _read_prefix(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of the body, and whether there was more.

    The rest is read and dropped (memory stays bounded; time is bounded by ``timeoutMs``):
    stopping httpx's nested body iterators early leaves them to the garbage collector,
    which trio reports as a ResourceWarning.
    """
    buffer = bytearray()
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if len(buffer) <= limit:
            buffer += chunk
    return bytes(buffer[:limit]), size > limit


@attrs.define(kw_only=True)
class HttpHandler:
    """The ``http`` job type. Register :meth:`run` (a coroutine function)."""

    guard: AddressGuard = attrs.field(factory=AddressGuard)
    follow_redirects: bool = False
    max_redirects: int = 5
    #: The backend that really dials (tests record or forbid connections with it).
    network_backend: httpcore.AsyncNetworkBackend | None = None
    #: TLS settings (default: the system's trust store, built on first use).
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings | None, *, resolver: Resolver = system_resolver
    ) -> HttpHandler:
        """Configured from ``HTTP_ALLOWLIST``, ``HTTP_FOLLOW_REDIRECTS``,
        ``HTTP_MAX_REDIRECTS`` (defaults when ``settings`` is None: nothing internal
        allowed, redirects not followed)."""
        if settings is None:
            return cls(guard=AddressGuard(resolver=resolver))
        return cls(
            guard=AddressGuard(
                allowlist=Allowlist.parse(settings.http_allowlist), resolver=resolver
            ),
            follow_redirects=settings.http_follow_redirects,
            max_redirects=settings.http_max_redirects,
        )

    def _ssl(self) -> ssl.SSLContext:
        if self.ssl_context is None:
            self.ssl_context = httpx.create_ssl_context(trust_env=False)
        return self.ssl_context

    async def run(self, ctx: JobContext) -> dict[str, Any]:
        """Send the job's request; return the result or raise (retried or permanent)."""
        request = _Request.from_payload(ctx.payload)
        fields = {"job_id": ctx.job_id, "tenant": ctx.tenant_id, "url": request.target}
        started = time.perf_counter()
        try:
            with trio.fail_after(request.timeout_ms / 1000):
                answer = await self._send(request)
        except trio.TooSlowError:
            raise HandlerError(f"http: timed out after {request.timeout_ms} ms") from None
        except AddressRefused as exc:
            log.warning("http request refused", extra={**fields, "reason": str(exc)})
            raise PermanentError(f"http: refused: {exc}") from None
        except httpx.TooManyRedirects:
            raise PermanentError(
                f"http: more than {self.max_redirects} redirects (HTTP_MAX_REDIRECTS)"
            ) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise PermanentError(f"http: cannot follow to that URL: {exc}") from None
        except httpx.TimeoutException:
            raise HandlerError(f"http: timed out after {request.timeout_ms} ms") from None
        except httpx.HTTPError as exc:
            kind = type(exc).__name__
            raise HandlerError(f"http: {kind} on {request.target}: {exc}") from None
        elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
        status = answer["status"]
        log.debug(
            "http request answered",
            extra={**fields, "status": status, "elapsed_ms": elapsed_ms},
        )
        ok = status in request.expect if request.expect is not None else 200 <= status < 300
        if not ok:
            message = f"http: {request.method} {request.target} answered {status}"
            location = answer["headers"].get("location")
            if 300 <= status < 400 and location and not self.follow_redirects:
                message += f" (redirect to {location} not followed: HTTP_FOLLOW_REDIRECTS is off)"
            if status >= 500 or status in RETRIED_STATUSES:
                raise HandlerError(message)
            raise PermanentError(message)
        return answer

    async def _send(self, request: _Request) -> dict[str, Any]:
        """Send; return the result shape: status, a few headers, the body's start."""
        transport = GuardedTransport(
            self.guard, ssl_context=self._ssl(), network_backend=self.network_backend
        )
        seconds = request.timeout_ms / 1000
        async with httpx.AsyncClient(
            transport=transport,
            follow_redirects=self.follow_redirects,
            max_redirects=self.max_redirects,
            timeout=httpx.Timeout(seconds),
            # No proxies or .netrc credentials from the environment; a plain body (the
            # result keeps 4 KiB of it).
            trust_env=False,
            headers=DEFAULT_HEADERS,
        ) as client:
            content: dict[str, Any] = {}
            if request.has_json:
                content["json"] = request.json
            elif request.body is not None:
                content["content"] = request.body.encode()
            async with client.stream(
                request.method, request.url, headers=request.headers, **content
            ) as response:
                data, truncated = await _read_prefix(response, RESULT_BODY_BYTES)
                return {
                    "status": response.status_code,
                    "headers": {
                        name: response.headers[name]
                        for name in RESULT_HEADERS
                        if name in response.headers
                    },
                    "body": _decode(data, response.encoding),
                    "truncated": truncated,
                }


def http_handler(settings: Settings | None = None) -> HttpHandler:
    """The ``http`` handler configured from ``settings`` (see :meth:`HttpHandler.from_settings`)."""
    return HttpHandler.from_settings(settings)
