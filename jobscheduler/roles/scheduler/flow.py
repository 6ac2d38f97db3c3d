"""The leader's fair, limited claim: which due jobs to claim now, fenced in the store.

One claim (:meth:`FlowClaimer.claim`):

1. reads the slots held (jobs' ``key_slot`` / ``type_slot``), and leaves out of the read
   the types and keys that cannot take a job now (slots full, rate spent) — except once
   every :data:`REFRESH` seconds, when a full read records why each is held;
2. reads the fair candidates (each (priority, tenant, fairness key) group's oldest) and
   orders them: priority, then weighted round-robin across tenants, then fairness keys;
   and, when they could fill a type's room ahead of its executors, how many jobs of each
   type are queued (:class:`~.room.Room`);
3. walks that order, giving each job a free slot of its key and of its type, a start of
   its rates and a place in its type's room, and records why the others are held;
4. spends the rates (one conditional write per bucket, expecting the instant read: a
   bucket another leader wrote meanwhile drops this claim's jobs of it), claims the picks
   (each a conditional update whose slot is unique in the store), and takes back the
   starts of picks that were not claimed. A rate that gave starts ahead (below) is spent
   after its jobs are claimed instead, and its jobs are sent only once it is.

With ``RATE_AHEAD``, a job whose only limits are rates is given the first instant its rates
allow up to that far ahead (no sooner than a claim takes, so its wake-up is not late), is
queued for that instant (``Pick.start_at``) and takes no room until then; a rate's stretch
is topped up once half of it has gone, so a claim gives a good part of it at once. Starts
given ahead are never taken back (one could land on a claimed start's instant). The
executors keep such wake-ups until their instants, so they go on starting at the rate while
a new leader is elected; and as their rate is spent only once they are claimed, a leader
that dies mid-claim leaves its successor no stretch spent on jobs it never sent
(:mod:`.ahead`).

Nothing here is trusted across leaders but the store: a new leader reads the slots the
jobs hold and the buckets' instants, so it starts from the state the last one left. What
this object keeps between claims (weights, overrides, the room of each type, the last
instants seen) only saves reads, and is refreshed every :data:`REFRESH` seconds.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

import attrs
import trio

from jobscheduler.domain.flow import (
    FlowReport,
    HoldReason,
    Rate,
    allowance,
    fair_order,
    free_slot,
    key_scope,
    next_start,
    rate_scope,
    refund,
    room_scope,
    scope_parts,
    slot_name,
    slot_scope,
    spend,
    type_scope,
)
from jobscheduler.domain.model import Job, utc
from jobscheduler.roles.deps import Deps
from jobscheduler.store.query import Candidate, Exclusions, Pick

from .ahead import Stranded, spend_ahead
from .holds import HeldBook, HoldTally
from .limits import NO_LIMITS, REFRESH, LimitBook
from .room import Room

log = logging.getLogger(__name__)

#: A full key's due jobs a claim steps over, per type, to find the others (the first claim
#: after each :data:`REFRESH` steps over all of them).
HELD_KEY_WALK = 1000
#: Candidates read per group when claiming ahead (``RATE_AHEAD``): a rated group's stretch.
AHEAD_READ = 200


@attrs.define
class _Plan:
    """One claim's working state: the slots and starts it has left, what it picked, what
    it held and why."""

    taken: dict[str, set[int]]
    room: dict[str, int]
    #: Each rate bucket's instant as read (what its write expects).
    tats: dict[str, datetime | None]
    #: Each rate bucket's instant after the starts this claim gave so far.
    after: dict[str, datetime | None] = attrs.field(factory=dict)
    spent: Counter[str] = attrs.field(factory=Counter)
    #: Rate buckets of which this claim gave a start ahead of now (spent once its jobs are
    #: claimed; never taken back).
    ahead: set[str] = attrs.field(factory=set)
    #: How many picks are for a later start.
    later: int = 0
    #: When the claim began (trio time).
    began: float = 0.0
    picks: list[Pick] = attrs.field(factory=list)
    #: The rate scopes each pick spends.
    rates_of: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    holds: HoldTally = attrs.field(factory=HoldTally)


class FlowClaimer:
    """Claims fairly within the limits; the dispatch loop's claim when FLOW_CONTROL is on."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._room = Room(deps.settings.claim_ahead)
        self._book = LimitBook(deps.registry.limits(), self._room, deps.settings.rate_ahead)
        self._walked: datetime | None = None
        self._tats: dict[str, datetime | None] = {}
        self._held = HeldBook(deps.metrics)
        self._turn = 0
        #: How long the last claim took (a job claimed ahead starts no sooner after it).
        self._took = timedelta(0)
        #: When a start held back by a rate may go (None: nothing is held by a rate).
        self.wake_at: datetime | None = None
        #: The last claim held jobs for slots: a finishing job frees them.
        self.waiting_for_slots = False
        #: The last claim held jobs for room ahead of the executors: a pick makes some.
        self.waiting_for_room = False
        #: Jobs a leader that died claimed ahead and never sent (see .ahead).
        self._stranded = Stranded()

    def begin_term(self) -> None:
        """This scheduler leads (again): what it knew of the buckets may be stale, and a
        leader may have died among claims ahead since it last looked."""
        self._tats.clear()
        self._stranded.begin_term()

    # ------------------------------------------------------------------ the claim

    def first_batch(self, batch: int) -> int:
        """A pass's first claim: the whole room ahead, of which it takes what is free (one
        claim a pass, not one for each doubling of ``batch`` up to the room)."""
        return max(batch, self._room.whole())

    async def claim(self, now: datetime, batch: int) -> list[Job]:
        """Claim up to ``batch`` due jobs fairly within the limits (see the module doc)."""
        began = trio.current_time()
        store = self._deps.store
        refreshed = await self._book.refresh(store, now)
        taken: dict[str, set[int]] = defaultdict(set)
        if self._book.limited:
            for slot in await store.held_slots():
                scope, index = slot_scope(slot)
                taken[scope].add(index)
        # Once a refresh, nothing is left out of the read: a job that came due while its
        # key, type or rate was full is seen and held with its reason (the job's page and
        # the held list say why within a second), not only once a slot frees.
        if refreshed:
            exclude = Exclusions()
        else:
            deep = self._walked is None or now - self._walked >= timedelta(seconds=REFRESH)
            self._walked = now if deep else self._walked
            exclude = self._exclusions(now, taken, walk=None if deep else HELD_KEY_WALK)
        # Claiming ahead, a rated group may give a whole stretch of its rate at once.
        per_group = max(batch, AHEAD_READ) if self._book.claims_ahead else batch
        candidates = await store.fair_candidates(now, per_group, exclude)
        room = await self._room.left(store, candidates, now, recount=refreshed)
        plan = _Plan(taken=taken, room=room, tats=dict(self._tats), began=began)
        read = await self._read_buckets(candidates, plan)
        stranded = await self._stranded.find(store, read) if self._book.claims_ahead else ()
        self._turn += 1
        for job in fair_order(candidates, self._book.weights, turn=self._turn):
            if len(plan.picks) - plan.later >= batch or len(plan.picks) >= per_group:
                break
            self._place(job, now, plan)
        claimed = await self._commit(now, plan)
        self._took = timedelta(seconds=trio.current_time() - began)
        await self._stranded.repend(store, now, stranded)  # after the claim: none can start
        # (A job claimed for a later start takes no room ahead until then.)
        self._room.claimed(j for j in claimed if j.queued_at is None or j.queued_at <= now)
        self._finish(now, plan, exclude)
        return claimed

    def _exclusions(
        self, now: datetime, taken: Mapping[str, set[int]], *, walk: int | None
    ) -> Exclusions:
        """What cannot take a job now, by what is known before reading candidates. (Not a
        type whose executors have no room: excluding it from the read would make the store
        walk that type's whole backlog to find none; its jobs are read and held.)"""
        types: set[tuple[str, str]] = set()
        keys: set[tuple[str, str, str]] = set()
        for scope, held in taken.items():
            kind, parts = scope_parts(scope)
            limits = self._book.limits_of(parts[0], parts[1])
            full = limits.max_running if kind == "t" else limits.concurrency
            if full is None or len(held) < full:
                continue
            if kind == "t":
                types.add((parts[0], parts[1]))
            else:
                keys.add((parts[0], parts[1], parts[2]))
        for scope, tat in self._tats.items():
            kind, parts = scope_parts(scope)
            limits = self._book.limits_of(parts[0], parts[1])
            rate = limits.rate_limit if len(parts) == 2 else limits.key_rate_limit
            by = now + self._book.ahead_of(limits) / 2
            if rate is not None and allowance(rate, limits.burst_of(rate), tat, by) == 0:
                if len(parts) == 2:
                    types.add((parts[0], parts[1]))
                else:
                    keys.add((parts[0], parts[1], parts[2]))
        return Exclusions(types=frozenset(types), keys=frozenset(keys), walk=walk)

    async def _read_buckets(
        self, candidates: Iterable[Candidate], plan: _Plan
    ) -> dict[str, datetime | None]:
        """Read the rate buckets the candidates spend into ``plan``; returns them."""
        scopes: set[str] = set()
        for job in candidates:
            limits = self._book.limits_of(job.tenant_id, job.job_type)
            if limits.rate_limit is not None:
                scopes.add(rate_scope(job.tenant_id, job.job_type))
            if limits.key_rate_limit is not None and job.concurrency_key is not None:
                scopes.add(rate_scope(job.tenant_id, job.job_type, job.concurrency_key))
        if not scopes:
            return {}
        stored = await self._deps.store.buckets(sorted(scopes))
        read = {scope: stored.get(scope) for scope in scopes}
        plan.tats.update(read)
        return read

    def _place(self, job: Candidate, now: datetime, plan: _Plan) -> None:
        """Pick ``job`` if every limit has room for it; else record why it is held."""
        tenant, job_type, key = job.tenant_id, job.job_type, job.concurrency_key
        limits = self._book.limits_of(tenant, job_type)
        # room is minus what is queued (and picked in this claim) to start by now
        room_full = self._room.ahead(job_type) + plan.room[job_type] <= 0
        ahead = self._book.ahead_of(limits)
        rated = limits.rate_limit is not None or (
            limits.key_rate_limit is not None and key is not None
        )
        if room_full and not (ahead and rated):
            _hold_for_room(plan, job)
            return
        if limits is NO_LIMITS or limits.empty:
            plan.room[job_type] -= 1
            plan.rates_of[job.id] = ()
            plan.picks.append(Pick(job_id=job.id))
            return
        type_index = key_index = None
        if limits.max_running is not None:
            scope = type_scope(tenant, job_type)
            type_index = free_slot(plan.taken[scope], limits.max_running)
            if type_index is None:
                used = len(plan.taken[scope])
                plan.holds.add(scope, HoldReason.MAX_RUNNING, job, used, limits.max_running)
                return
        if limits.concurrency is not None and key is not None:
            scope = key_scope(tenant, job_type, key)
            key_index = free_slot(plan.taken[scope], limits.concurrency)
            if key_index is None:
                used = len(plan.taken[scope])
                plan.holds.add(scope, HoldReason.CONCURRENCY, job, used, limits.concurrency)
                return
        # The start: now, or the first instant every rate of the job allows, if that is
        # within how far ahead the job may be claimed.
        start = now
        rates: list[tuple[str, Rate]] = []
        for rate, reason in (
            (limits.rate_limit, HoldReason.RATE_LIMIT),
            (limits.key_rate_limit if key is not None else None, HoldReason.KEY_RATE_LIMIT),
        ):
            if rate is None:
                continue
            per_key = reason is HoldReason.KEY_RATE_LIMIT
            scope = rate_scope(tenant, job_type, key if per_key else None)
            if scope not in plan.after:
                plan.after[scope] = plan.tats.get(scope)
            allowed = next_start(rate, limits.burst_of(rate), plan.after[scope])
            # Claimed ahead, a rate's stretch is topped up once half of it has gone, so
            # that each claim gives a good part of it (a claim on a slow store can take
            # seconds), not one start each time one more fits.
            topping_up = scope in plan.spent or _fits(allowed, now + ahead / 2)
            if not (topping_up and _fits(allowed, now + ahead)):
                plan.holds.add(scope, reason, job, limit=rate)
                return
            if allowed is not None and allowed > start:
                start = allowed
            rates.append((scope, rate))
        if rates and ahead:
            # Its wake-up goes out once this claim is written: an instant sooner than a
            # claim takes (the last one, or this one so far) would be past when it
            # arrives, and the starts would bunch.
            took = max(self._took, timedelta(seconds=trio.current_time() - plan.began))
            start = max(start, now + min(took, ahead / 2))
        start = _whole_millis(start) if start > now else now
        if start == now and room_full:
            _hold_for_room(plan, job)
            return
        pick = Pick(job_id=job.id, start_at=start if start > now else None)
        if type_index is not None:
            scope = type_scope(tenant, job_type)
            plan.taken[scope].add(type_index)
            pick = attrs.evolve(pick, type_slot=slot_name(scope, type_index))
        if key_index is not None and key is not None:
            scope = key_scope(tenant, job_type, key)
            plan.taken[scope].add(key_index)
            pick = attrs.evolve(pick, key_slot=slot_name(scope, key_index))
        for scope, rate in rates:
            plan.after[scope] = spend(rate, plan.after[scope], start, 1)
            plan.spent[scope] += 1
            if pick.start_at is not None:
                plan.ahead.add(scope)
        if pick.start_at is None:
            plan.room[job_type] -= 1  # one more to start now (one for later does not count)
        else:
            plan.later += 1
        plan.rates_of[job.id] = tuple(scope for scope, _ in rates)
        plan.picks.append(pick)

    async def _commit(self, now: datetime, plan: _Plan) -> list[Job]:
        """Spend the rates, claim the picks, take back what was spent and not claimed.

        A rate that gave starts only for now is spent before its jobs are claimed (a
        failure in between leaves starts unused, never a job over the rate). One that gave
        starts ahead is spent after (:func:`.ahead.spend_ahead`): its jobs wait for their
        instants, so a leader that dies while claiming them must not leave its successor
        a stretch spent on jobs it never claimed."""
        store = self._deps.store
        written: dict[str, datetime] = {}
        lost: set[str] = set()
        for scope in [s for s in plan.spent if s not in plan.ahead]:
            read, tat = plan.tats.get(scope), plan.after[scope]
            assert tat is not None
            if await store.put_bucket(scope, read, tat):
                written[scope] = tat
            else:
                lost.add(scope)  # another leader spent it meanwhile: claim none of it
                self._tats.pop(scope, None)
        picks = [p for p in plan.picks if not lost.intersection(plan.rates_of[p.job_id])]
        claimed = await store.claim_picks(now, picks) if picks else []
        got = Counter(scope for job in claimed for scope in plan.rates_of[job.id])
        if plan.ahead:
            ahead = {scope: plan.after[scope] for scope in plan.ahead}
            spent = await spend_ahead(
                store, now, claimed, read=plan.tats, after=ahead, rates_of=plan.rates_of
            )
            self._tats.update(spent.written)
            for scope in spent.withdrawn:
                self._tats.pop(scope, None)
            claimed = spent.jobs
        for scope, tat in written.items():
            # Starts given for now and not used are taken back.
            unused = plan.spent[scope] - got[scope]
            if unused and await store.put_bucket(
                scope, tat, back := refund(self._book.rate_of(scope), tat, unused)
            ):
                tat = back
            self._tats[scope] = tat
        return claimed

    # ------------------------------------------------------------------ what it held

    def _finish(self, now: datetime, plan: _Plan, exclude: Exclusions) -> None:
        """Account for what this claim held: the book (metrics, report), the wake-up time."""
        holds = self._held.update(plan.holds.holds(), exclude)
        # Kept holds count too: a scope left out of the read still waits for its slots.
        reasons = {h.reason for h in holds.values()}
        self.waiting_for_slots = bool(reasons & {HoldReason.CONCURRENCY, HoldReason.MAX_RUNNING})
        self.waiting_for_room = HoldReason.CAPACITY in reasons
        starts = [
            self._next_claim(h.scope)
            for h in holds.values()
            if h.reason in (HoldReason.RATE_LIMIT, HoldReason.KEY_RATE_LIMIT)
        ]
        self.wake_at = min((s for s in starts if s is not None), default=now if starts else None)

    def _next_claim(self, scope: str) -> datetime | None:
        """When a job held by the rate of ``scope`` may be claimed (None: now): its next
        start, less half of how far ahead it may be claimed (see ``_place``)."""
        book = self._book
        start = next_start(book.rate_of(scope), book.burst_of(scope), self._tats.get(scope))
        if start is None:
            return None
        return start - book.ahead_of_scope(scope) / 2

    def report_due(self, now: datetime) -> FlowReport | None:
        """The report to store now, if one is due (changed holds, or a second since)."""
        return self._held.report_due(now)


def _hold_for_room(plan: _Plan, job: Candidate) -> None:
    """Hold ``job``: its type's room ahead of the executors is full."""
    queued = -plan.room[job.job_type]
    plan.holds.add(room_scope(job.job_type), HoldReason.CAPACITY, job, queued)


def _fits(start: datetime | None, by: datetime) -> bool:
    """Whether a rate's next start (None: now) comes by ``by``."""
    return start is None or start <= by


def _whole_millis(moment: datetime) -> datetime:
    """``moment`` rounded up to a whole millisecond (what the stores and wake-ups keep;
    ``utc`` truncates, and a start must not come early)."""
    return utc(moment + timedelta(microseconds=999))
