"""The Jobs view's filter form turned into the ``GET /jobs`` query and the bulk filter."""

from __future__ import annotations

from werkzeug.datastructures import MultiDict

from jobscheduler.api.job_filters import parse_filter, parse_list_request
from jobscheduler.api.ui._filters import DEFAULT_PAGE_SIZE, parse_jobs_filter
from jobscheduler.domain.model import LISTABLE_STATUSES, Status
from jobscheduler.store.query import Sort


def test_every_filter_becomes_the_apis_query_and_the_same_bulk_filter() -> None:
    args = MultiDict(
        [
            ("status", "dlq"),
            ("status", "cancelled,bogus"),
            ("jobType", " email "),
            ("templateId", "ab" * 12),
            ("key", "nightly-"),
            ("createdFrom", "2026-11-30T10:00"),
            ("createdTo", "2026-11-30T11:30:15"),
            ("sort", "scheduledAt"),
            ("limit", "100"),
        ]
    )
    filters = parse_jobs_filter(args, "acme", LISTABLE_STATUSES)
    params = filters.api_params()
    assert params == [
        ("tenantId", "acme"),
        ("status", "dlq"),
        ("status", "cancelled"),
        ("jobType", "email"),
        ("templateId", "ab" * 12),
        ("idempotencyKeyPrefix", "nightly-"),
        ("createdAfter", "2026-11-30T10:00:00Z"),
        ("createdBefore", "2026-11-30T11:30:15Z"),
        ("sort", "scheduledAt"),
        ("limit", "100"),
    ]
    # The API accepts both as they are: the page and its bulk action mean the same jobs.
    query, limit, cursor = parse_list_request(
        {k: v for k, v in params if k != "status"}, [v for k, v in params if k == "status"]
    )
    assert (limit, cursor, query.sort) == (100, None, Sort.SCHEDULED_ASC)
    bulk, tenant = parse_filter(filters.bulk_filter())
    assert tenant == "acme"
    assert bulk.statuses == query.statuses == (Status.DLQ, Status.CANCELLED)
    for field in ("job_type", "template_id", "key_prefix", "created_after", "created_before"):
        assert getattr(bulk, field) == getattr(query, field) is not None


def test_malformed_values_are_dropped_not_sent() -> None:
    args = MultiDict(
        [("createdFrom", "yesterday"), ("sort", "priority"), ("limit", "7"), ("jobType", "  ")]
    )
    filters = parse_jobs_filter(args, "t", LISTABLE_STATUSES)
    assert filters.api_params() == [("tenantId", "t"), ("limit", str(DEFAULT_PAGE_SIZE))]
    assert filters.bulk_filter() == {"tenantId": "t"}


def test_without_a_tenant_the_query_is_every_tenants_and_the_bulk_filter_names_none() -> None:
    filters = parse_jobs_filter(MultiDict([("status", "dlq")]), None, LISTABLE_STATUSES)
    params = filters.api_params()
    assert params == [("allTenants", "true"), ("status", "dlq"), ("limit", str(DEFAULT_PAGE_SIZE))]
    query, _, _ = parse_list_request(
        {k: v for k, v in params if k != "status"}, [v for k, v in params if k == "status"]
    )
    bulk, tenant = parse_filter(filters.bulk_filter())
    assert query.tenant_id is None
    assert (tenant, bulk.tenant_id, bulk.statuses) == (None, None, (Status.DLQ,))
