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
   starts of picks that were not claimed.

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

from jobscheduler.domain.flow import (
    FlowReport,
    Hold,
    HoldReason,
    Limits,
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
from jobscheduler.domain.model import Job
from jobscheduler.roles.deps import Deps
from jobscheduler.store.query import Candidate, Exclusions, Pick

from .holds import HeldBook, add_hold
from .room import Room

log = logging.getLogger(__name__)

#: Seconds between two reads of the overrides, weights and executors' capacity.
REFRESH = 1.0
#: A full key's due jobs a claim steps over, per type, to find the others (the first claim
#: after each :data:`REFRESH` steps over all of them).
HELD_KEY_WALK = 1000
_NO_LIMITS = Limits()


@attrs.define
class _Plan:
    """One claim's working state: the slots and starts it has left, what it picked, what
    it held and why."""

    taken: dict[str, set[int]]
    room: dict[str, int]
    tats: dict[str, datetime | None]
    left: dict[str, int] = attrs.field(factory=dict)
    spent: Counter[str] = attrs.field(factory=Counter)
    picks: list[Pick] = attrs.field(factory=list)
    #: The rate scopes each pick spends.
    rates_of: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    holds: dict[str, Hold] = attrs.field(factory=dict)


class FlowClaimer:
    """Claims fairly within the limits; the dispatch loop's claim when FLOW_CONTROL is on."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._defaults: Mapping[str, Limits] = deps.registry.limits()
        self._overrides: dict[tuple[str, str], Limits] = {}
        #: limits_of's answers since the overrides were last read.
        self._limits: dict[tuple[str, str], Limits] = {}
        self._weights: dict[str, int] = {}
        self._room = Room(deps.settings.claim_ahead)
        self._refreshed: datetime | None = None
        self._walked: datetime | None = None
        self._tats: dict[str, datetime | None] = {}
        self._held = HeldBook(deps.metrics)
        self._turn = 0
        #: When a start held back by a rate may go (None: nothing is held by a rate).
        self.wake_at: datetime | None = None
        #: The last claim held jobs for slots: a finishing job frees them.
        self.waiting_for_slots = False
        #: The last claim held jobs for room ahead of the executors: a pick makes some.
        self.waiting_for_room = False

    # ------------------------------------------------------------------ limits

    def limits_of(self, tenant_id: str, job_type: str) -> Limits:
        found = self._limits.get((tenant_id, job_type))
        if found is None:
            base = self._defaults.get(job_type, _NO_LIMITS)
            override = self._overrides.get((tenant_id, job_type))
            found = base if override is None else override.over(base)
            self._limits[(tenant_id, job_type)] = found
        return found

    @property
    def _limited(self) -> bool:
        return bool(self._defaults or self._overrides)

    async def _refresh(self, now: datetime) -> bool:
        """Read the overrides, weights and capacity again if :data:`REFRESH` has passed
        (True: it did)."""
        if self._refreshed is not None and now - self._refreshed < timedelta(seconds=REFRESH):
            return False
        store = self._deps.store
        self._overrides = {
            (o.tenant_id, o.job_type): o.limits for o in await store.limit_overrides()
        }
        self._limits = {}
        self._weights = {w.tenant_id: w.weight for w in await store.tenant_weights()}
        capacity: Counter[str] = Counter()
        for beat in await store.live_workers(now):
            for job_type in beat.job_types if beat.capacity else ():
                capacity[job_type] += beat.capacity
        self._room.capacity = dict(capacity)
        self._refreshed = now
        return True

    # ------------------------------------------------------------------ the claim

    async def claim(self, now: datetime, batch: int) -> list[Job]:
        """Claim up to ``batch`` due jobs fairly within the limits (see the module doc)."""
        store = self._deps.store
        refreshed = await self._refresh(now)
        taken: dict[str, set[int]] = defaultdict(set)
        if self._limited:
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
        candidates = await store.fair_candidates(now, batch, exclude)
        room = await self._room.left(store, candidates, now, recount=refreshed)
        plan = _Plan(taken=taken, room=room, tats=dict(self._tats))
        await self._read_buckets(candidates, plan)
        self._turn += 1
        for job in fair_order(candidates, self._weights, turn=self._turn):
            if len(plan.picks) >= batch:
                break
            self._place(job, now, plan)
        claimed = await self._commit(now, plan)
        self._room.claimed(claimed)
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
            limits = self.limits_of(parts[0], parts[1])
            full = limits.max_running if kind == "t" else limits.concurrency
            if full is None or len(held) < full:
                continue
            if kind == "t":
                types.add((parts[0], parts[1]))
            else:
                keys.add((parts[0], parts[1], parts[2]))
        for scope, tat in self._tats.items():
            kind, parts = scope_parts(scope)
            limits = self.limits_of(parts[0], parts[1])
            rate = limits.rate_limit if len(parts) == 2 else limits.key_rate_limit
            if rate is not None and allowance(rate, limits.burst_of(rate), tat, now) == 0:
                if len(parts) == 2:
                    types.add((parts[0], parts[1]))
                else:
                    keys.add((parts[0], parts[1], parts[2]))
        return Exclusions(types=frozenset(types), keys=frozenset(keys), walk=walk)

    async def _read_buckets(self, candidates: Iterable[Candidate], plan: _Plan) -> None:
        scopes: set[str] = set()
        for job in candidates:
            limits = self.limits_of(job.tenant_id, job.job_type)
            if limits.rate_limit is not None:
                scopes.add(rate_scope(job.tenant_id, job.job_type))
            if limits.key_rate_limit is not None and job.concurrency_key is not None:
                scopes.add(rate_scope(job.tenant_id, job.job_type, job.concurrency_key))
        if scopes:
            stored = await self._deps.store.buckets(sorted(scopes))
            for scope in scopes:
                plan.tats[scope] = stored.get(scope)

    def _place(self, job: Candidate, now: datetime, plan: _Plan) -> None:
        """Pick ``job`` if every limit has room for it; else record why it is held."""
        tenant, job_type, key = job.tenant_id, job.job_type, job.concurrency_key
        limits = self.limits_of(tenant, job_type)
        ahead = self._room.ahead(job_type)
        if ahead + plan.room[job_type] <= 0:
            # room is minus what is queued (and picked in this claim)
            add_hold(
                plan.holds, room_scope(job_type), HoldReason.CAPACITY, job, -plan.room[job_type]
            )
            return
        if limits is _NO_LIMITS or limits.empty:
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
                add_hold(plan.holds, scope, HoldReason.MAX_RUNNING, job, used, limits.max_running)
                return
        if limits.concurrency is not None and key is not None:
            scope = key_scope(tenant, job_type, key)
            key_index = free_slot(plan.taken[scope], limits.concurrency)
            if key_index is None:
                used = len(plan.taken[scope])
                add_hold(plan.holds, scope, HoldReason.CONCURRENCY, job, used, limits.concurrency)
                return
        rates: list[str] = []
        for rate, reason in (
            (limits.rate_limit, HoldReason.RATE_LIMIT),
            (limits.key_rate_limit if key is not None else None, HoldReason.KEY_RATE_LIMIT),
        ):
            if rate is None:
                continue
            per_key = reason is HoldReason.KEY_RATE_LIMIT
            scope = rate_scope(tenant, job_type, key if per_key else None)
            if scope not in plan.left:
                plan.left[scope] = allowance(rate, limits.burst_of(rate), plan.tats.get(scope), now)
            if plan.left[scope] <= 0:
                add_hold(plan.holds, scope, reason, job, limit=rate)
                return
            rates.append(scope)
        pick = Pick(job_id=job.id)
        if type_index is not None:
            scope = type_scope(tenant, job_type)
            plan.taken[scope].add(type_index)
            pick = attrs.evolve(pick, type_slot=slot_name(scope, type_index))
        if key_index is not None and key is not None:
            scope = key_scope(tenant, job_type, key)
            plan.taken[scope].add(key_index)
            pick = attrs.evolve(pick, key_slot=slot_name(scope, key_index))
        for scope in rates:
            plan.left[scope] -= 1
            plan.spent[scope] += 1
        plan.room[job_type] -= 1
        plan.rates_of[job.id] = tuple(rates)
        plan.picks.append(pick)

    async def _commit(self, now: datetime, plan: _Plan) -> list[Job]:
        """Spend the rates, claim the picks, take back what was spent and not claimed."""
        store = self._deps.store
        written: dict[str, datetime] = {}
        lost: set[str] = set()
        for scope, starts in plan.spent.items():
            rate = self._rate_of(scope)
            read = plan.tats.get(scope)
            tat = spend(rate, read, now, starts)
            if await store.put_bucket(scope, read, tat):
                written[scope] = tat
            else:
                lost.add(scope)  # another leader spent it meanwhile: claim none of it
                self._tats.pop(scope, None)
        picks = [p for p in plan.picks if not lost.intersection(plan.rates_of[p.job_id])]
        claimed = await store.claim_picks(now, picks) if picks else []
        got = Counter(scope for job in claimed for scope in plan.rates_of[job.id])
        for scope, tat in written.items():
            unused = plan.spent[scope] - got[scope]
            if unused and await store.put_bucket(
                scope, tat, back := refund(self._rate_of(scope), tat, unused)
            ):
                tat = back
            self._tats[scope] = tat
        return claimed

    def _rate_of(self, scope: str) -> Rate:
        _, parts = scope_parts(scope)
        limits = self.limits_of(parts[0], parts[1])
        rate = limits.rate_limit if len(parts) == 2 else limits.key_rate_limit
        assert rate is not None, scope
        return rate

    # ------------------------------------------------------------------ what it held

    def _finish(self, now: datetime, plan: _Plan, exclude: Exclusions) -> None:
        """Account for what this claim held: the book (metrics, report), the wake-up time."""
        holds = self._held.update(plan.holds, exclude)
        # Kept holds count too: a scope left out of the read still waits for its slots.
        reasons = {h.reason for h in holds.values()}
        self.waiting_for_slots = bool(reasons & {HoldReason.CONCURRENCY, HoldReason.MAX_RUNNING})
        self.waiting_for_room = HoldReason.CAPACITY in reasons
        starts = [
            next_start(self._rate_of(h.scope), self._burst_of(h.scope), self._tats.get(h.scope))
            for h in holds.values()
            if h.reason in (HoldReason.RATE_LIMIT, HoldReason.KEY_RATE_LIMIT)
        ]
        self.wake_at = min((s for s in starts if s is not None), default=now if starts else None)

    def _burst_of(self, scope: str) -> int:
        _, parts = scope_parts(scope)
        return self.limits_of(parts[0], parts[1]).burst_of(self._rate_of(scope))

    def report_due(self, now: datetime) -> FlowReport | None:
        """The report to store now, if one is due (changed holds, or a second since)."""
        return self._held.report_due(now)
