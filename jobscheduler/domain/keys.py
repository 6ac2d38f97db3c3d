"""Who calls: roles and principals; API keys, their format, hashing and the stored record.

A key is ``jsk_<id>_<secret>``: ``<id>`` is 16 lowercase hex characters (64 random bits, the
public handle shown by ``keys list``, written to the audit trail and logs), ``<secret>`` is 43
URL-safe base64 characters (256 random bits from :mod:`secrets`). The store keeps only the
SHA-256 of the secret: the secret has full entropy, so a plain hash cannot be brute-forced and
a slow password hash would only cost CPU on every cache miss. The key itself is printed once,
when it is created, and never again.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import secrets
from datetime import datetime

import attrs

from jobscheduler.errors import Forbidden, ValidationError

from .model import MAX_STRING_LENGTH, format_time, utc


class Role(enum.StrEnum):
    """What a key may do; each role includes the ones before it."""

    #: Read its tenant's jobs, stats and previews.
    READER = "reader"
    #: Also create jobs and act on them (cancel, retry, pause, ...).
    WRITER = "writer"
    #: Also manage keys and read the audit trail; may be bound to every tenant.
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {Role.READER: 0, Role.WRITER: 1, Role.ADMIN: 2}


@attrs.frozen(kw_only=True)
class Principal:
    """The caller of one request."""

    #: The API key's public id (never its secret); None when authentication is off.
    key_id: str | None
    #: The one tenant this principal acts for, or None for every tenant (admin keys only).
    tenant: str | None
    role: Role

    def require(self, role: Role) -> None:
        """Raise Forbidden unless this principal's role includes ``role``."""
        if self.role.rank < role.rank:
            raise Forbidden(f"this key's role ({self.role}) may not do this; needs {role}")

    def require_every_tenant(self) -> None:
        """Raise Forbidden unless this principal is an admin of every tenant (as a listing
        with ``allTenants=true`` needs)."""
        self.require(Role.ADMIN)
        if self.tenant is not None:
            raise Forbidden("allTenants=true needs a key of every tenant; this one is bound")

    def scope(self, requested: str | None) -> str | None:
        """The tenant a request acts on: the one it names (checked), else the principal's own.

        None means every tenant (only for a principal bound to every tenant that named none).
        A tenant named by a principal bound to another one is a 403: the request itself is
        wrong, and saying so leaks nothing the caller did not write.
        """
        if requested is None:
            return self.tenant
        if self.tenant is not None and requested != self.tenant:
            raise Forbidden(f"this key is bound to another tenant than {requested!r}")
        return requested


#: The caller when authentication is off: an admin of every tenant.
OPERATOR = Principal(key_id=None, tenant=None, role=Role.ADMIN)


PREFIX = "jsk_"
_ID_HEX = 16
_SECRET_BYTES = 32
#: A well-formed key (anything else is rejected before any lookup).
_TOKEN = re.compile(r"jsk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
#: Upper bound of a token we even look at (a well-formed one is 64 characters).
MAX_TOKEN_LENGTH = 64
_KEY_ID = re.compile(r"[0-9a-f]{16}")


def hash_secret(secret: str) -> str:
    """The stored form of a secret: SHA-256, hex."""
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


@attrs.frozen(kw_only=True)
class ApiKey:
    """One API key as the job store holds it (no secret, only its hash)."""

    id: str
    secret_hash: str = attrs.field(repr=False)
    #: The tenant the key is bound to; None: every tenant (admin keys only).
    tenant: str | None
    role: Role
    name: str = ""
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def matches(self, secret: str) -> bool:
        """Whether ``secret`` is this key's secret (constant-time comparison)."""
        return hmac.compare_digest(hash_secret(secret), self.secret_hash)


def key_to_json(key: ApiKey) -> dict[str, object]:
    """The JSON shape of a key in ``/keys`` replies and ``keys list`` (never the secret)."""
    out: dict[str, object] = {
        "id": key.id,
        "tenantId": key.tenant,
        "allTenants": key.tenant is None,
        "role": key.role.value,
        "name": key.name,
        "createdAt": format_time(key.created_at),
        "revoked": key.revoked,
    }
    if key.revoked_at is not None:
        out["revokedAt"] = format_time(key.revoked_at)
    return out


def new_key(*, tenant: str | None, role: Role, name: str = "", now: datetime) -> tuple[ApiKey, str]:
    """A fresh key: the record to store and the token to hand out (once)."""
    if tenant is None and role is not Role.ADMIN:
        raise ValidationError("only admin keys may be bound to every tenant")
    key_id = secrets.token_hex(_ID_HEX // 2)
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    record = ApiKey(
        id=key_id,
        secret_hash=hash_secret(secret),
        tenant=tenant,
        role=role,
        name=name,
        created_at=utc(now),
    )
    return record, f"{PREFIX}{key_id}_{secret}"


def parse_token(token: str) -> tuple[str, str] | None:
    """``(key id, secret)`` of a well-formed token, else None (no detail: all are 401)."""
    if len(token) > MAX_TOKEN_LENGTH:
        return None
    match = _TOKEN.fullmatch(token)
    if match is None:
        return None
    return match.group(1), match.group(2)


def is_key_id(text: str) -> bool:
    return _KEY_ID.fullmatch(text) is not None


def parse_role(raw: object) -> Role:
    if not isinstance(raw, str):
        raise ValidationError(f"role: must be one of {', '.join(r.value for r in Role)}")
    try:
        return Role(raw)
    except ValueError:
        raise ValidationError(f"role: must be one of {', '.join(r.value for r in Role)}") from None


def check_name(raw: object, field: str = "name") -> str:
    """A key's free-text label (optional): a printable string of at most 256 characters."""
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise ValidationError(f"{field}: must be a string")
    if len(raw) > MAX_STRING_LENGTH:
        raise ValidationError(f"{field}: longer than {MAX_STRING_LENGTH} characters")
    if any(ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in raw):
        raise ValidationError(f"{field}: must not contain control characters")
    return raw


def check_tenant(raw: object, field: str = "tenantId") -> str:
    """A tenant id as ``POST /jobs`` accepts it."""
    if not isinstance(raw, str):
        raise ValidationError(f"{field}: must be a string")
    if not raw.strip():
        raise ValidationError(f"{field}: must not be empty")
    return check_name(raw, field)
