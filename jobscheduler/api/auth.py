"""Who is calling: the principal of a request, its role, and the tenants it may touch.

Every route asks :func:`current_principal` instead of trusting a ``tenantId`` the client
wrote. With authentication off (``dev`` on a laptop) the caller is
:data:`~jobscheduler.domain.keys.OPERATOR`, an admin
of every tenant, so behaviour is what it was before keys existed. With keys, the request's
principal is set once per request (``g.principal``) from its ``Authorization`` header, or
from the dashboard's session cookie (:mod:`.session`).

:meth:`Gate.caller` is the one authentication of a request, whichever way it came in: the
API's ``before_request`` (:mod:`.hooks`) reads its :class:`Credentials` from Quart's request,
the create's fast path (:mod:`.routes.create`) from the raw ASGI scope, and asks the key
cache only (``read_store=False``), handing the request to Quart when that is not enough.

Object-level isolation is in the store's reads: a route reads a job, a key or what hangs
from them with the principal's tenant (``tenant=principal.tenant``), and the store answers
another tenant's exactly as a missing id, so no response tells a caller whether another
tenant's id or key exists.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, cast

import attrs
import trio
from cachetools import TTLCache
from quart import Request, g
from werkzeug.http import parse_cookie

from jobscheduler.domain.keys import OPERATOR, ApiKey, Principal, Role, hash_secret, parse_token
from jobscheduler.errors import StoreError, Unauthorized

from .errors import UNAUTHORIZED_MESSAGE
from .session import CSRF_HEADER, SESSION_COOKIE, session_credentials


def current_principal() -> Principal:
    """The principal of the request being served (OPERATOR when authentication is off)."""
    principal: Principal = g.get("principal", OPERATOR)
    return principal


# --------------------------------------------------------------------------- keys -> principal


class KeyLookup(Protocol):
    async def get_key(self, key_id: str) -> ApiKey | None: ...


class Authenticator:
    """Turns an ``Authorization`` header into a Principal, with a small TTL cache.

    Lookups (found and not found) are cached for ``ttl`` seconds, so a steady client costs no
    store round trip per request. A revoke through this process (:meth:`forget`) takes
    effect at once here; another process may accept a revoked key for up to ``ttl``.
    """

    def __init__(
        self,
        store: KeyLookup,
        *,
        ttl: float,
        maxsize: int = 10_000,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._cache: TTLCache[str, ApiKey | None] | None = (
            TTLCache(maxsize=maxsize, ttl=ttl, timer=timer) if ttl > 0 else None
        )
        self._flights: dict[str, _Flight] = {}

    def forget(self, key_id: str) -> None:
        """Drop a key from the cache (after it was created or revoked here)."""
        if self._cache is not None:
            self._cache.pop(key_id, None)

    async def _lookup(self, key_id: str) -> ApiKey | None:
        """The stored key (None: unknown), from the cache or one shared store read.

        Concurrent misses of one key share a single read: when a key's cache entry expires
        under load (or while the store hangs) one request reads it and the others wait for
        that answer, rather than each piling another read onto the store. A failed shared
        read fails its waiters with the same StoreError; a read whose request went away
        (cancelled) is retried by the next waiter.
        """
        if self._cache is not None:
            # One lookup, not ``in`` then ``[]``: the entry may expire between the two.
            cached = self._cache.get(key_id, _MISSING)
            if cached is not _MISSING:
                return cast("ApiKey | None", cached)
        while (flight := self._flights.get(key_id)) is not None:
            await flight.done.wait()
            if flight.error is None:
                return flight.key
            if isinstance(flight.error, StoreError):
                raise StoreError(str(flight.error))
            # The reading request was cancelled (or failed otherwise): read ourselves.
        flight = _Flight()
        self._flights[key_id] = flight
        try:
            key = await self._store.get_key(key_id)
        except BaseException as exc:
            flight.error = exc
            raise
        else:
            flight.key = key
            if self._cache is not None:
                self._cache[key_id] = key
            return key
        finally:
            del self._flights[key_id]
            flight.done.set()

    async def authenticate(self, headers: list[str]) -> Principal:
        """The principal of a request with these ``Authorization`` header values.

        Raises Unauthorized (one message for every cause) unless there is exactly one
        header, of the form ``Bearer <key>``, naming a known key that is not revoked.
        """
        key_id, secret = _credentials(headers)
        return _principal_of(await self._lookup(key_id), secret)

    def cached(self, headers: list[str]) -> Principal | None:
        """The principal :meth:`authenticate` would give, when the key is in the cache and
        valid; None otherwise (not cached, or refused), without touching the store."""
        if self._cache is None:
            return None
        try:
            key_id, secret = _credentials(headers)
        except Unauthorized:
            return None
        key = self._cache.get(key_id)
        if key is None:
            return None
        try:
            return _principal_of(key, secret)
        except Unauthorized:
            return None


def _credentials(headers: list[str]) -> tuple[str, str]:
    """``(key id, secret)`` of exactly one well-formed ``Bearer`` header (else Unauthorized)."""
    if len(headers) != 1:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    scheme, _, token = headers[0].strip().partition(" ")
    if scheme.lower() != "bearer":
        raise Unauthorized(UNAUTHORIZED_MESSAGE)

    parsed = parse_token(token.strip())
    if parsed is None:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    return parsed


def _principal_of(key: ApiKey | None, secret: str) -> Principal:
    # Hash and compare even for an unknown id, so both cost the same.
    matches = (key or _no_key()).matches(secret)
    if key is None or not matches or key.revoked:
        raise Unauthorized(UNAUTHORIZED_MESSAGE)
    return Principal(key_id=key.id, tenant=key.tenant, role=key.role)


_MISSING = object()


class _Flight:
    """One store read of a key that concurrent requests wait for."""

    __slots__ = ("done", "error", "key")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.key: ApiKey | None = None
        self.error: BaseException | None = None


@functools.cache
def _no_key() -> ApiKey:
    """A stand-in compared against when the id is unknown (it never matches)."""

    return ApiKey(
        id="0" * 16,
        secret_hash=hash_secret("no key"),
        tenant=None,
        role=Role.READER,
        created_at=datetime(1970, 1, 1, tzinfo=UTC),
        revoked_at=datetime(1970, 1, 1, tzinfo=UTC),
    )


# --------------------------------------------------------------------------- a request's caller

_AUTHORIZATION = b"authorization"
_COOKIE = b"cookie"
_CSRF = CSRF_HEADER.lower().encode()


@attrs.frozen
class Credentials:
    """What a request shows to be recognised: its ``Authorization`` values, else the
    dashboard's session cookie (a write also needs the session's CSRF header)."""

    authorization: list[str]
    method: str
    session: str | None = None
    csrf: str | None = None

    @classmethod
    def of_request(cls, request: Request) -> Credentials:
        """The credentials of the Quart request being served."""
        authorization = request.headers.getlist("Authorization")
        if authorization:
            return cls(authorization, request.method)
        return cls(
            authorization,
            request.method,
            session=request.cookies.get(SESSION_COOKIE),
            csrf=request.headers.get(CSRF_HEADER),
        )

    @classmethod
    def of_scope(cls, scope: Mapping[str, Any]) -> Credentials:
        """The credentials of an ASGI HTTP request, from its raw headers."""
        authorization: list[str] = []
        cookie = csrf = None
        for name, value in scope["headers"]:
            if name == _AUTHORIZATION:
                authorization.append(value.decode("latin-1"))
            elif name == _COOKIE:
                cookie = value.decode("latin-1")
            elif name == _CSRF:
                csrf = value.decode("latin-1")
        method: str = scope["method"]
        if authorization or cookie is None:
            return cls(authorization, method)
        return cls(
            authorization, method, session=parse_cookie(cookie).get(SESSION_COOKIE), csrf=csrf
        )


class Gate:
    """Who is calling (see the module doc); ``authenticator`` None: authentication is off."""

    def __init__(self, authenticator: Authenticator | None) -> None:
        self.authenticator = authenticator

    async def caller(
        self, credentials: Credentials, *, read_store: bool = True
    ) -> Principal | None:
        """The principal of a request with these credentials.

        Raises Unauthorized for missing or invalid ones, Forbidden for a session's write
        without its CSRF token. With ``read_store=False`` nothing waits for the store: None
        when the key is not in the cache (or is refused; the full check then says why).
        """
        if self.authenticator is None:
            return OPERATOR
        headers = credentials.authorization
        if not headers and credentials.session:
            headers = session_credentials(credentials.session, credentials.csrf, credentials.method)
        if read_store:
            return await self.authenticator.authenticate(headers)
        return self.authenticator.cached(headers)
