"""The Elector contract: ONE suite, run against every adapter.

What a scheduler relies on: a campaign yields a term with a fencing token that grows from
term to term; ``watch`` stays quiet while the term holds and returns (or raises) promptly
once it is lost; ``resign`` is idempotent and hands over at once; a cancelled campaign
leaves nothing behind that could win later; ``lead()`` runs the work only while leading.

Single-candidate behaviour runs on every adapter. Tests that need several candidates, or
a term ended out of band, are parametrised over the adapters with that capability (see
``elector_fixtures``). etcd runs against a real server and uses wall-clock waits, each
test bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio

from jobscheduler.election import Elector, Term, lead

from .elector_fixtures import (
    ADAPTER_PARAMS,
    TEST_BOUND,
    ElectorFactory,
    RecordingElector,
    campaign_in_background,
    open_factory,
    params_with,
)

#: Generous bound for a hand-over on a noisy machine (expected: tens of milliseconds
#: after a resign, under a second after an out-of-band revoke).
TAKEOVER_BOUND = 3.0
#: A short lease, so "held longer than the TTL" proves the keep-alive works (etcd's
#: minimum TTL with default settings is 2 s).
SHORT_TTL = 2
#: An out-of-band revocation must be noticed by polling the leader key, well before the
#: next keep-alive (ttl/3 = 3.3 s with the default TTL) would report it.
REVOKE_NOTICE_BOUND = 2.0


@pytest.fixture(params=ADAPTER_PARAMS)
async def elector_factory(request: pytest.FixtureRequest) -> AsyncIterator[ElectorFactory]:
    async with open_factory(request.param) as factory:
        yield factory


def adapters_with(*capabilities: str) -> pytest.MarkDecorator:
    """Run a test only over the adapters with ``capabilities`` (a parametrisation, not a
    skip: an adapter without them never appears in the test's ids)."""
    return pytest.mark.parametrize("elector_factory", params_with(*capabilities), indirect=True)


multi_candidate = adapters_with("multi_candidate")
out_of_band = adapters_with("out_of_band_revoke")


# -- every adapter ---------------------------------------------------------------------------


async def test_campaign_returns_term_with_positive_token(elector_factory: ElectorFactory) -> None:
    with trio.fail_after(TEST_BOUND):
        elector = await elector_factory("a")
        term = await elector.campaign()
        assert term.token > 0
        assert term.leader_id == "a"
        await elector.resign(term)


async def test_watch_does_not_return_while_leading_beyond_the_lease_ttl(
    elector_factory: ElectorFactory,
) -> None:
    with trio.fail_after(TEST_BOUND):
        elector = await elector_factory("a", ttl=SHORT_TTL)
        term = await elector.campaign()
        with trio.move_on_after(2.5 * SHORT_TTL) as hold:
            await elector.watch(term)
        assert hold.cancelled_caught, "watch returned although nobody took the term away"
        await elector.resign(term)


async def test_resign_is_idempotent(elector_factory: ElectorFactory) -> None:
    with trio.fail_after(TEST_BOUND):
        elector = await elector_factory("a")
        term = await elector.campaign()
        await elector.resign(term)
        await elector.resign(term)


async def test_resign_after_close_is_harmless(elector_factory: ElectorFactory) -> None:
    with trio.fail_after(TEST_BOUND):
        elector = await elector_factory("a")
        term = await elector.campaign()
        await elector.close()
        await elector.resign(term)
        await elector.close()


async def test_tokens_increase_across_terms(elector_factory: ElectorFactory) -> None:
    with trio.fail_after(TEST_BOUND):
        elector = await elector_factory("a")
        first = await elector.campaign()
        await elector.resign(first)
        second = await elector.campaign()
        await elector.resign(second)
        assert second.token > first.token


async def lead_until_term(
    factory: ElectorFactory, terms: int
) -> tuple[RecordingElector, list[Term]]:
    """``lead`` on candidate "a" (recording its calls) with work that records its term and
    returns, ending the term, until the ``terms``-th, which it holds until cancelled; then
    cancelled. The elector and the terms seen."""
    elector = RecordingElector(await factory("a"))
    seen: list[Term] = []
    reached = trio.Event()

    async def work(term: Term) -> None:
        seen.append(term)
        if len(seen) == terms:
            reached.set()
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lead, elector, work)
        await reached.wait()
        nursery.cancel_scope.cancel()
    return elector, seen


async def test_lead_runs_work_with_the_term_and_resigns_when_cancelled(
    elector_factory: ElectorFactory,
) -> None:
    with trio.fail_after(TEST_BOUND):
        elector, seen = await lead_until_term(elector_factory, 1)
        campaigned = [t for call, t in elector.calls if call == "campaign"]
        assert seen == campaigned
        assert elector.calls[-1] == ("resign", seen[0])


async def test_work_returning_ends_the_term_and_lead_campaigns_again(
    elector_factory: ElectorFactory,
) -> None:
    with trio.fail_after(TEST_BOUND):
        elector, seen = await lead_until_term(elector_factory, 2)
        assert seen[1].token > seen[0].token
        assert ("resign", seen[0]) in elector.calls


async def handover(standby: Elector, end_term: Callable[[], Awaitable[object]], what: str) -> Term:
    """``standby`` campaigns against the leader; half a second later ``end_term`` ends the
    leader's term (``what``, for the failure message): the standby must win within
    :data:`TAKEOVER_BOUND`. Its term."""
    async with trio.open_nursery() as nursery:
        won, terms = await campaign_in_background(nursery, standby)
        await trio.sleep(0.5)
        ended_at = trio.current_time()
        await end_term()
        await won.wait()
        takeover = trio.current_time() - ended_at
    assert takeover < TAKEOVER_BOUND, f"standby took {takeover:.3f} s after {what}"
    return terms[0]


# -- several candidates ----------------------------------------------------------------------


async def candidates(factory: ElectorFactory, *names: str, **options: int) -> list[Elector]:
    """One elector per name (``options`` for each), on an adapter with several candidates."""
    assert factory.multi_candidate
    return [await factory(name, **options) for name in names]


@multi_candidate
async def test_only_one_candidate_leads_and_standby_takes_over_after_resign(
    elector_factory: ElectorFactory,
) -> None:
    with trio.fail_after(TEST_BOUND):
        a, b = await candidates(elector_factory, "a", "b")
        term_a = await a.campaign()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.watch, term_a)  # returns once a resigns
            b_won, b_terms = await campaign_in_background(nursery, b)
            with trio.move_on_after(1.0):
                await b_won.wait()
            assert not b_won.is_set(), "two candidates lead at once"
            assert await elector_factory.leader() == (term_a.key, term_a.token, b"a")

            resigned_at = trio.current_time()
            await a.resign(term_a)
            await b_won.wait()
            takeover = trio.current_time() - resigned_at
        assert takeover < TAKEOVER_BOUND, f"standby took {takeover:.3f} s after a resign"
        term_b = b_terms[0]
        assert term_b.leader_id == "b"
        assert term_b.token > term_a.token
        assert await elector_factory.leader() == (term_b.key, term_b.token, b"b")
        await b.resign(term_b)


@multi_candidate
async def test_waiting_campaign_keeps_its_lease_alive(elector_factory: ElectorFactory) -> None:
    with trio.fail_after(TEST_BOUND):
        a, b = await candidates(elector_factory, "a", "b", ttl=SHORT_TTL)
        term_a = await a.campaign()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.watch, term_a)
            b_won, b_terms = await campaign_in_background(nursery, b)
            await trio.sleep(2.5 * SHORT_TTL)  # b's lease would have expired by now
            await a.resign(term_a)
            await b_won.wait()
            term_b = b_terms[0]
            # the won key is alive, and stays so while b watches
            assert await elector_factory.leader() == (term_b.key, term_b.token, b"b")
            with trio.move_on_after(1.5 * SHORT_TTL) as hold:
                await b.watch(term_b)
            assert hold.cancelled_caught
        assert await elector_factory.require_admin().lease_ttl(term_b.lease) > 0
        await b.resign(term_b)


@multi_candidate
async def test_cancelling_lead_hands_over_to_standby(elector_factory: ElectorFactory) -> None:
    with trio.fail_after(TEST_BOUND):
        a, b = await candidates(elector_factory, "a", "b")
        a_working = trio.Event()

        async def work(term: Term) -> None:
            a_working.set()
            await trio.sleep_forever()

        async with trio.open_nursery() as nursery:
            async with trio.open_nursery() as a_nursery:
                a_nursery.start_soon(lead, a, work)
                await a_working.wait()
                b_won, b_terms = await campaign_in_background(nursery, b)
                await trio.sleep(0.5)
                assert not b_won.is_set()
                cancelled_at = trio.current_time()
                a_nursery.cancel_scope.cancel()
            await b_won.wait()
            takeover = trio.current_time() - cancelled_at
        assert takeover < TAKEOVER_BOUND, f"standby took {takeover:.3f} s after lead() ended"
        await b.resign(b_terms[0])


@multi_candidate
async def test_closing_the_leader_hands_over_at_once(elector_factory: ElectorFactory) -> None:
    with trio.fail_after(TEST_BOUND):
        a, b = await candidates(elector_factory, "a", "b")
        await a.campaign()
        await b.resign(await handover(b, a.close, "close()"))


@multi_candidate
async def test_cancelled_campaign_leaves_no_candidacy_behind(
    elector_factory: ElectorFactory,
) -> None:
    with trio.fail_after(TEST_BOUND):
        a, b, c = await candidates(elector_factory, "a", "b", "c")
        term_a = await a.campaign()
        with trio.move_on_after(0.5) as waited:
            await b.campaign()
        assert waited.cancelled_caught
        await a.resign(term_a)
        await trio.sleep(1.0)  # time for a leftover candidate key of b to win
        assert await elector_factory.leader() is None
        term_c = await c.campaign()
        assert term_c.leader_id == "c"
        assert await elector_factory.leader() == (term_c.key, term_c.token, b"c")
        await c.resign(term_c)


# -- terms ended out of band -----------------------------------------------------------------


@out_of_band
async def test_revoked_lease_ends_watch_and_cancels_lead_work(
    elector_factory: ElectorFactory,
) -> None:
    assert elector_factory.out_of_band_revoke
    with trio.fail_after(TEST_BOUND):
        elector = RecordingElector(await elector_factory("a"))
        seen: list[Term] = []
        first_running = trio.Event()
        second_running = trio.Event()
        work_cancelled_at: list[float] = []

        async def work(term: Term) -> None:
            seen.append(term)
            (second_running if len(seen) == 2 else first_running).set()
            try:
                await trio.sleep_forever()
            finally:
                work_cancelled_at.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(lead, elector, work)
            await first_running.wait()
            await trio.sleep(0.2)  # let watch settle in
            revoked_at = trio.current_time()
            await elector_factory.revoke_out_of_band(seen[0])
            await second_running.wait()  # lead() campaigned again and won a new term
            nursery.cancel_scope.cancel()

        noticed = work_cancelled_at[0] - revoked_at
        assert noticed < REVOKE_NOTICE_BOUND, (
            f"work ran {noticed:.3f} s after its lease was revoked"
        )
        assert seen[1].token > seen[0].token
        assert ("resign", seen[0]) in elector.calls


@out_of_band
async def test_watch_returns_soon_after_lease_revoked(elector_factory: ElectorFactory) -> None:
    assert elector_factory.out_of_band_revoke
    with trio.fail_after(TEST_BOUND):
        elector = await elector_factory("a")
        term = await elector.campaign()
        revoked_at: list[float] = []

        async def revoke_later() -> None:
            await trio.sleep(0.5)  # watch's first keep-alive exchange is over by now
            revoked_at.append(trio.current_time())
            await elector_factory.revoke_out_of_band(term)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(revoke_later)
            await elector.watch(term)
        noticed = trio.current_time() - revoked_at[0]
        assert noticed < REVOKE_NOTICE_BOUND, f"watch noticed the revoke after {noticed:.3f} s"
        await elector.resign(term)  # already gone: not an error


@adapters_with("multi_candidate", "out_of_band_revoke")
async def test_standby_takes_over_after_leader_lease_revoked(
    elector_factory: ElectorFactory,
) -> None:
    assert elector_factory.out_of_band_revoke
    with trio.fail_after(TEST_BOUND):
        a, b = await candidates(elector_factory, "a", "b")
        term_a = await a.campaign()
        term_b = await handover(b, lambda: elector_factory.revoke_out_of_band(term_a), "a revoke")
        assert term_b.token > term_a.token
        await b.resign(term_b)


# -- EtcdElector specifics (no server needed) ------------------------------------------------
