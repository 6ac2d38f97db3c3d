"""The dashboard's sign-in session: the API key in a cookie, and a CSRF token for writes.

- After a successful sign-in the key itself is kept in an ``HttpOnly``, ``SameSite=Strict``
  cookie (``Secure`` over https): page scripts cannot read it, other sites cannot send it.
- The CSRF token is derived from the key (``HMAC-SHA256(key, label)``): stateless, the same on
  every API replica, unguessable without the key, and it changes when the key does. Pages
  carry it in a ``<meta>`` tag; the script sends it as ``X-CSRF-Token`` on every write.
- :func:`session_authorization` turns a request's cookie into the ``Authorization`` header
  values it stands for, so the API's authentication step (:mod:`jobscheduler.api.auth`) can
  accept the cookie as an alternative to ``Authorization: Bearer``; a write without the
  matching CSRF header is refused (403) whatever the key may do.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping

from jobscheduler.domain.keys import Principal
from jobscheduler.errors import Forbidden

#: The cookie holding the signed-in key.
SESSION_COOKIE = "jobscheduler_session"
#: The header (and form field) carrying the CSRF token of a write.
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf"
#: Methods that change nothing and need no CSRF token.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Longer "keys" are refused before any lookup (real keys are about 64 characters).
MAX_KEY_LENGTH = 256
_CSRF_LABEL = b"jobscheduler-ui-csrf-v1"

#: Checks a key: the principal it stands for, or Unauthorized (tenancy's authenticator).
KeyVerifier = Callable[[str], Awaitable[Principal]]


def csrf_token(key: str) -> str:
    """The CSRF token of a session holding ``key``."""
    return hmac.new(key.encode(), _CSRF_LABEL, hashlib.sha256).hexdigest()


def check_csrf(key: str, sent: str | None) -> None:
    """Raise Forbidden unless ``sent`` is the CSRF token of ``key`` (constant-time compare)."""
    if sent is None or not hmac.compare_digest(sent.encode(), csrf_token(key).encode()):
        raise Forbidden(f"missing or invalid CSRF token (send the page's {CSRF_HEADER} header)")


def session_authorization(
    cookies: Mapping[str, str], headers: Mapping[str, str], method: str
) -> list[str]:
    """The ``Authorization`` values a request stands for through the dashboard's cookie.

    ``[]`` when the request carries no session cookie. A write (any method but GET, HEAD,
    OPTIONS) must carry the session's CSRF token in ``X-CSRF-Token``, else Forbidden: a
    forged cross-site or scripted request never acts with the cookie's key.
    """
    key = cookies.get(SESSION_COOKIE)
    if not key:
        return []
    return session_credentials(key, headers.get(CSRF_HEADER), method)


def session_credentials(key: str, csrf: str | None, method: str) -> list[str]:
    """The ``Authorization`` values of a session holding ``key``; Forbidden for a write
    without the session's CSRF token ``csrf``."""
    if method.upper() not in SAFE_METHODS:
        check_csrf(key, csrf)
    return [f"Bearer {key}"]
