"""The client's listing options (``sort``, ``idempotency_key``, ``idempotency_key_prefix``)
and bulk options (``ids``, ``dry_run``) against the API app in process: every test body runs
with the blocking and the async client alike, so both are proven to send what the API
accepts and to read what it answers."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from jobscheduler.api.schemas.manage import SORTS as API_SORTS
from jobscheduler.client import MAX_BULK_IDS, SORTS, AsyncClient, Client
from jobscheduler.domain.model import Status
from jobscheduler.errors import ValidationError
from jobscheduler.store import JobStore

from .api_support import (
    fast_api,  # noqa: F401  (registers the ``api`` fixture)
    jobs_in_every_sort,
)
from .client_support import (
    URL,
    Call,
    client_call,  # noqa: F401  (registers the ``call`` fixture)
)
from .conftest import make_job
from .test_api_manage import dead


def test_the_clients_sort_names_are_the_apis() -> None:
    assert set(SORTS) == set(API_SORTS)


async def test_list_follows_each_sort_order_across_pages(call: Call, store: JobStore) -> None:
    orders = await jobs_in_every_sort(store)
    for sort, order in orders.items():
        listed = await call("list", "tenant-a", sort=sort, page_size=2)
        assert [j["id"] for j in listed] == order, sort
    assert [j["id"] for j in await call("list", "tenant-a", page_size=2)] == orders["-createdAt"]


async def test_list_finds_jobs_by_exact_key_or_key_prefix(call: Call, store: JobStore) -> None:
    for key in ("order-1", "order-2", "orders", "refund-1"):
        await store.insert(make_job(key=key))
    exact = await call("list", "tenant-a", idempotency_key="order-1")
    assert [j["idempotencyKey"] for j in exact] == ["order-1"]
    prefixed = await call("list", "tenant-a", idempotency_key_prefix="order-")
    assert sorted(j["idempotencyKey"] for j in prefixed) == ["order-1", "order-2"]
    assert await call("list", "tenant-a", idempotency_key="order-") == []


async def test_bulk_dry_run_counts_the_chosen_ids_and_changes_nothing(
    call: Call, store: JobStore
) -> None:
    first, second, other = [await dead(store) for _ in range(3)]
    chosen = [first.id, second.id]
    counted = await call("bulk_retry", "tenant-a", ids=chosen, dry_run=True)
    assert (counted["matched"], counted["changed"], counted["dryRun"]) == (2, 0, True)
    assert {(await store.get(j.id)).status for j in (first, second, other)} == {Status.DLQ}
    done = await call("bulk_retry", "tenant-a", ids=chosen)
    assert (done["matched"], done["changed"]) == (2, 2)
    assert "dryRun" not in done
    assert (await store.get(first.id)).status is Status.PENDING
    assert (await store.get(other.id)).status is Status.DLQ


async def test_bulk_cancel_takes_ids_with_the_other_filters_applied(
    call: Call, store: JobStore
) -> None:
    noop = await store.insert(make_job(key="order-1"))
    echo = await store.insert(make_job(key="order-2", job_type="echo"))
    untouched = await store.insert(make_job(key="order-3"))
    counted = await call(
        "bulk_cancel", "tenant-a", ids=[noop.id, echo.id], job_type="noop", dry_run=True
    )
    assert (counted["matched"], counted["changed"]) == (1, 0)
    done = await call("bulk_cancel", "tenant-a", ids=[noop.id, echo.id], job_type="noop")
    assert (done["matched"], done["changed"]) == (1, 1)
    assert (await store.get(noop.id)).status is Status.CANCELLED
    assert (await store.get(echo.id)).status is Status.PENDING
    by_key = await call("bulk_cancel", "tenant-a", idempotency_key_prefix="order-")
    assert by_key["changed"] == 2  # echo and untouched; noop is already cancelled
    assert (await store.get(untouched.id)).status is Status.CANCELLED


async def test_an_id_the_api_refuses_is_its_400_message(call: Call) -> None:
    with pytest.raises(ValidationError, match=r"filter\.ids: each id must be a 24-character"):
        await call("bulk_cancel", "tenant-a", ids=["not-an-object-id"], dry_run=True)


@pytest.mark.parametrize(
    ("method", "kwargs", "message"),
    [
        ("list", {"sort": "newest"}, "sort: unknown order 'newest'"),
        ("list", {"idempotency_key": "a", "idempotency_key_prefix": "a"}, "not both"),
        ("list", {"idempotency_key_prefix": " "}, "must be a non-empty string"),
        ("bulk_cancel", {"ids": "65f0a1b2c3d4e5f6a7b8c9d0"}, "not one string"),
        ("bulk_retry", {"ids": []}, "at least one job id"),
        ("bulk_retry", {"ids": ["a/b"]}, "not a job id"),
        ("bulk_cancel", {"ids": ["0" * 24] * (MAX_BULK_IDS + 1)}, "at most 1000 per request"),
        ("bulk_cancel", {"dry_run": "yes"}, "dry_run: must be True or False"),
    ],
)
async def test_bad_options_are_refused_before_anything_is_sent(
    method: str, kwargs: dict[str, Any], message: str
) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"sent {request.method} {request.url}")

    def blocking() -> None:
        with Client(URL, transport=httpx.MockTransport(refuse)) as client:
            result = getattr(client, method)("tenant-a", **kwargs)
            if method == "list":
                list(result)

    async def with_async() -> None:
        async with AsyncClient(URL, transport=httpx.MockTransport(refuse)) as client:
            result = getattr(client, method)("tenant-a", **kwargs)
            if method == "list":
                [job async for job in result]
            else:
                await result

    with pytest.raises(ValueError, match=message):
        blocking()
    with pytest.raises(ValueError, match=message):
        await with_async()
