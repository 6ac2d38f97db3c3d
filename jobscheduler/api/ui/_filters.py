"""The Jobs view's filter form: the query string a page was asked with, turned into what
the template shows (the form, filled) and what the script sends to the JSON API.

The page itself validates little: the API does (``GET /jobs`` answers a clear 400 that the
script shows under the form). Here a value is only kept or dropped and converted from the
form's shape to the API's: several ``status`` boxes, and ``datetime-local`` inputs (minutes,
read as UTC) to RFC 3339.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs
from werkzeug.datastructures import MultiDict

from jobscheduler.api.schemas.manage import SORTS

#: Rows per page of the Jobs table, and the choices offered.
DEFAULT_PAGE_SIZE = 50
PAGE_SIZES = (25, 50, 100, 200)
#: The sort orders offered, as (value, label).
SORT_CHOICES = (
    ("-createdAt", "Created, newest first"),
    ("createdAt", "Created, oldest first"),
    ("scheduledAt", "Scheduled, soonest first"),
    ("-scheduledAt", "Scheduled, latest first"),
)
assert {value for value, _ in SORT_CHOICES} == set(SORTS)

#: A ``datetime-local`` value (the browser's form: minutes, optionally seconds).
_LOCAL_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?")
_MAX_TEXT = 200


@attrs.frozen(kw_only=True)
class JobsFilter:
    """One Jobs page's filters, as the form shows them."""

    #: The tenant looked at; None: every tenant (a principal that sees them all).
    tenant: str | None
    statuses: tuple[str, ...] = ()
    job_type: str = ""
    template_id: str = ""
    key: str = ""
    created_from: str = ""
    created_to: str = ""
    sort: str = "-createdAt"
    limit: int = DEFAULT_PAGE_SIZE

    def api_params(self) -> list[tuple[str, str]]:
        """The ``GET /jobs`` query of the first page (the script adds ``cursor``): the tenant's
        jobs, or every tenant's (``allTenants=true``)."""
        pairs: list[tuple[str, str]] = [
            ("tenantId", self.tenant) if self.tenant is not None else ("allTenants", "true")
        ]
        pairs += [("status", status) for status in self.statuses]
        texts = (
            ("jobType", self.job_type),
            ("templateId", self.template_id),
            ("idempotencyKeyPrefix", self.key),
        )
        pairs += [(name, value) for name, value in texts if value]
        if self.created_from:
            pairs.append(("createdAfter", _rfc3339(self.created_from)))
        if self.created_to:
            pairs.append(("createdBefore", _rfc3339(self.created_to)))
        if self.sort != "-createdAt":
            pairs.append(("sort", self.sort))
        pairs.append(("limit", str(self.limit)))
        return pairs

    def bulk_filter(self) -> dict[str, Any]:
        """The ``filter`` of a bulk action on everything these filters match (without a
        ``tenantId``, every tenant's)."""
        out: dict[str, Any] = {}
        for name, value in self.api_params():
            if name in ("sort", "limit", "allTenants"):
                continue
            if name == "status":
                out.setdefault("status", []).append(value)
            else:
                out[name] = value
        return out


def _rfc3339(local: str) -> str:
    return f"{local}Z" if local.count(":") == 2 else f"{local}:00Z"


def _text(args: MultiDict[str, str], name: str) -> str:
    value = (args.get(name) or "").strip()
    return value if len(value) <= _MAX_TEXT else value[:_MAX_TEXT]


def parse_jobs_filter(
    args: MultiDict[str, str], tenant: str | None, statuses: Sequence[str]
) -> JobsFilter:
    """The filters of a Jobs page asked for with ``args`` (unknown values dropped) on
    ``tenant`` (None: every tenant); ``statuses``: the ones the form offers."""
    chosen: list[str] = []
    for raw in args.getlist("status"):
        for name in raw.split(","):
            if name in statuses and name not in chosen:
                chosen.append(name)
    times = {}
    for name in ("createdFrom", "createdTo"):
        value = _text(args, name)
        times[name] = value if _LOCAL_TIME.fullmatch(value) else ""
    sort = args.get("sort", "-createdAt")
    if sort not in SORTS:
        sort = "-createdAt"
    try:
        limit = int(args.get("limit", DEFAULT_PAGE_SIZE))
    except ValueError:
        limit = DEFAULT_PAGE_SIZE
    if limit not in PAGE_SIZES:
        limit = DEFAULT_PAGE_SIZE
    return JobsFilter(
        tenant=tenant,
        statuses=tuple(chosen),
        job_type=_text(args, "jobType"),
        template_id=_text(args, "templateId"),
        key=_text(args, "key"),
        created_from=times["createdFrom"],
        created_to=times["createdTo"],
        sort=sort,
        limit=limit,
    )
