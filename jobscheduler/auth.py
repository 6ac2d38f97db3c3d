"""Who is calling: the principal of a request, its role, and the tenants it may touch.

Every route asks :func:`current_principal` instead of trusting a ``tenantId`` the client
wrote. With authentication off (``dev`` on a laptop) the caller is :data:`OPERATOR`, an admin
of every tenant, so behaviour is what it was before keys existed. With keys, the request's
principal is set once per request (``g.principal``) from its ``Authorization`` header.

Object-level isolation lives here too: a job of another tenant is reported exactly as a job
that does not exist (:meth:`Principal.check_visible` raises JobNotFound), so no response
tells a caller whether another tenant's id or key exists.
"""

from __future__ import annotations

import enum

import attrs
from quart import g

from .errors import Forbidden, JobNotFound


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

    def sees(self, tenant_id: str) -> bool:
        return self.tenant is None or self.tenant == tenant_id

    def check_visible(self, tenant_id: str, job_id: str) -> None:
        """Raise JobNotFound (the very error of a missing id) for another tenant's job."""
        if not self.sees(tenant_id):
            raise JobNotFound(f"job {job_id} not found")


#: The caller when authentication is off: an admin of every tenant.
OPERATOR = Principal(key_id=None, tenant=None, role=Role.ADMIN)


def current_principal() -> Principal:
    """The principal of the request being served (OPERATOR when authentication is off)."""
    principal: Principal = g.get("principal", OPERATOR)
    return principal
