"""Flow control, the pure part: limits and rates, the fair claim order, rate buckets (GCRA)
and the words a held job is shown with. The scheduler's claim puts them together
(:mod:`jobscheduler.roles.scheduler.flow`); their state lives in the store."""

from __future__ import annotations

from ._fair import fair_order as fair_order
from ._held import FlowReport as FlowReport
from ._held import Hold as Hold
from ._held import HoldReason as HoldReason
from ._held import busiest_to_json as busiest_to_json
from ._held import hold_text as hold_text
from ._limits import LIMIT_FIELDS as LIMIT_FIELDS
from ._limits import MAX_SLOTS as MAX_SLOTS
from ._limits import MAX_WEIGHT as MAX_WEIGHT
from ._limits import LimitOverride as LimitOverride
from ._limits import Limits as Limits
from ._limits import Rate as Rate
from ._limits import TenantWeight as TenantWeight
from ._limits import check_weight as check_weight
from ._limits import free_slot as free_slot
from ._limits import key_scope as key_scope
from ._limits import rate_scope as rate_scope
from ._limits import room_scope as room_scope
from ._limits import scope_parts as scope_parts
from ._limits import scopes_of as scopes_of
from ._limits import slot_name as slot_name
from ._limits import slot_scope as slot_scope
from ._limits import type_scope as type_scope
from ._rate import Bucket as Bucket
from ._rate import allowance as allowance
from ._rate import next_start as next_start
from ._rate import refund as refund
from ._rate import spend as spend
