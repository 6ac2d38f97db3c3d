"""etcd-only behaviour of the elector beyond the shared contract (test_elector_contract.py):
an unreachable endpoint, an elector used before start, a campaign outliving its deadline."""

from __future__ import annotations

import pytest
import trio

from jobscheduler.election.etcd import EtcdElector
from jobscheduler.errors import ElectionError

from .elector_fixtures import TEST_BOUND, campaign_in_background, etcd_endpoints, open_factory


async def test_etcd_campaign_against_unreachable_endpoint_raises_election_error() -> None:
    elector = EtcdElector(["127.0.0.1:1"], name="nobody-home", candidate_id="a", ttl=2)
    await elector.start()
    try:
        with trio.fail_after(TEST_BOUND), pytest.raises(ElectionError):
            await elector.campaign()
    finally:
        await elector.close()
        await elector.close()


async def test_etcd_elector_must_be_started() -> None:
    elector = EtcdElector(["127.0.0.1:1"], name="x", candidate_id="a")
    with pytest.raises(ElectionError):
        await elector.campaign()


@pytest.mark.integration
async def test_etcd_campaign_outliving_its_deadline_is_reissued_and_still_wins() -> None:
    async with open_factory("etcd") as factory:
        factory.make = lambda election, candidate_id, ttl: EtcdElector(
            etcd_endpoints(), name=election, candidate_id=candidate_id, campaign_deadline=0.5
        )
        with trio.fail_after(TEST_BOUND):
            a = await factory("a")
            b = await factory("b")
            term_a = await a.campaign()
            async with trio.open_nursery() as nursery:
                b_won, b_terms = await campaign_in_background(nursery, b)
                await trio.sleep(2.0)  # several deadlines pass while b waits
                assert not b_won.is_set()
                await a.resign(term_a)
                await b_won.wait()
            assert await factory.leader() == (b_terms[0].key, b_terms[0].token, b"b")
            await b.resign(b_terms[0])
