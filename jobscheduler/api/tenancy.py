"""Tenancy of the HTTP API: who calls (keys, :mod:`.auth`), how much they may create
(:mod:`.quotas`), and which tenant a request acts on.

:class:`Tenancy` is what the routes of one app share: the gate that authenticates requests,
the key cache behind it, the quotas and bounded store calls. :func:`create_app` builds one
and hands it to the routes that need it; the role checks and the audit trail are the app's
hooks (:mod:`.hooks`, :mod:`.audit`). With ``AUTH=off`` every caller is the operator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import attrs
import trio
from werkzeug.datastructures import MultiDict

from jobscheduler.domain.keys import ApiKey, Principal
from jobscheduler.domain.model import Job
from jobscheduler.observability.metrics import Metrics
from jobscheduler.roles.deps import Deps

from .auth import Authenticator, Gate, current_principal
from .bounded import BoundedCalls
from .job_filters import wants_all_tenants
from .quotas import Quotas

P = ParamSpec("P")
T = TypeVar("T")

#: Scope key of the principal a request was already authenticated as, by the create's fast
#: path (routes/create.py) before it handed the request on: not looked up a second time.
AUTHENTICATED = "jobscheduler.principal"


@attrs.frozen
class Tenancy:
    """What the routes of one app share: the gate, the key cache, the quotas, bounded calls."""

    deps: Deps
    auth_required: bool
    authenticator: Authenticator
    gate: Gate
    quotas: Quotas
    metrics: Metrics
    calls: BoundedCalls | None = None

    @classmethod
    def build(cls, deps: Deps, calls: BoundedCalls | None = None) -> Tenancy:
        """The tenancy of an app on ``deps``; its store calls go through ``calls`` (bounded)
        when given."""
        settings = deps.settings
        metrics = deps.metrics

        async def get_key(key_id: str) -> ApiKey | None:
            return await tenancy.call(deps.store.get_key, key_id)

        async def count_unfinished(tenant: str) -> int:
            return await tenancy.call(deps.store.count_unfinished, tenant)

        auth_required = settings.auth == "required"
        authenticator = Authenticator(
            _KeyLookup(get_key), ttl=settings.key_cache_ttl, timer=trio.current_time
        )
        tenancy = cls(
            deps=deps,
            auth_required=auth_required,
            authenticator=authenticator,
            gate=Gate(authenticator if auth_required else None),
            calls=calls,
            quotas=Quotas(
                count_unfinished=count_unfinished,
                max_unfinished=settings.quota_max_unfinished,
                create_rate=settings.quota_create_rate,
                create_burst=settings.quota_create_burst,
                on_reject=lambda reason: metrics.api_quota_rejections.labels(reason=reason).inc(),
            ),
            metrics=metrics,
        )
        return tenancy

    async def call(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """A store call bounded by API_STORE_TIMEOUT (503 when the store does not answer)."""
        if self.calls is None:
            return await fn(*args, **kwargs)
        return await self.calls.call(fn, *args, **kwargs)

    async def admit_creates(self, principal: Principal, tenant: str, count: int) -> None:
        """Charge ``count`` creates for ``tenant`` to ``principal``'s quotas (429 when
        refused)."""
        who = principal.key_id or f"tenant:{tenant}"
        await self.quotas.admit_creates(who=who, tenant=tenant, count=count)

    def forget_creates(self, tenant: str, count: int) -> None:
        """Creates admitted by :meth:`admit_creates` that were not stored after all."""
        self.quotas.forget_creates(tenant=tenant, count=count)

    async def admit_batch(self, principal: Principal, items: Sequence[Any]) -> Counter[str]:
        """Charge a batch's creates (each job counts) to the caller's quotas, per tenant
        named; returns what was admitted (for :meth:`forget_batch`). 429 if any tenant is
        refused."""
        wanted = Counter(
            item["tenantId"]
            for item in items
            if isinstance(item, dict) and isinstance(item.get("tenantId"), str)
        )
        admitted: Counter[str] = Counter()
        try:
            for tenant, count in wanted.items():
                await self.admit_creates(principal, tenant, count)
                admitted[tenant] = count
        except BaseException:
            self.forget_batch(admitted, [])
            raise
        return admitted

    def forget_batch(self, admitted: Counter[str], created: Sequence[Job]) -> None:
        """Give back the admitted creates of a batch that were not stored."""
        stored = Counter(job.tenant_id for job in created)
        for tenant, count in admitted.items():
            if count > stored[tenant]:
                self.forget_creates(tenant, count - stored[tenant])

    async def verify_key(self, key: str) -> Principal:
        """The principal of a key typed into the dashboard's sign-in form (Unauthorized for
        an unknown, revoked or malformed key), checked like an ``Authorization`` header."""
        return await self.authenticator.authenticate([f"Bearer {key}"])


def claim_tenant(body: Any, principal: Principal | None = None) -> None:
    """Fill a create body's ``tenantId`` from the key, or check the one it names (403 for
    another tenant than the key's). Bodies that are not objects are left to validation.
    ``principal`` defaults to the caller of the request being served."""
    if not isinstance(body, dict):
        return
    principal = principal or current_principal()
    requested = body.get("tenantId")
    if requested is None and principal.tenant is not None:
        body["tenantId"] = principal.tenant
    elif isinstance(requested, str):
        principal.scope(requested)


def tenant_args(args: Mapping[str, str]) -> dict[str, str]:
    """Query arguments with ``tenantId`` filled from the key when absent (checked when
    present: 403 for another tenant than the key's)."""
    out = dict(args.items())
    principal = current_principal()
    requested = out.get("tenantId")
    if requested is None and principal.tenant is not None:
        out["tenantId"] = principal.tenant
    elif requested is not None:
        principal.scope(requested)
    return out


def listing_args(args: MultiDict[str, str]) -> tuple[dict[str, str], bool]:
    """The query of a listing that may span tenants, and whether it asks for every tenant
    (``allTenants=true``: 403 unless the key may read them all). Otherwise ``tenantId``
    defaults to a tenant-bound key's tenant (another one is a 403)."""
    if wants_all_tenants(args):
        current_principal().require_every_tenant()
        return args.to_dict(), True
    return tenant_args(args.to_dict()), False


@attrs.frozen
class _KeyLookup:
    lookup: Callable[[str], Awaitable[ApiKey | None]]

    async def get_key(self, key_id: str) -> ApiKey | None:
        return await self.lookup(key_id)
