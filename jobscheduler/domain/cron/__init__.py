"""Cron templates: 5-field expressions read in a time zone under a stated DST policy, the
catch-up and overlap policies of a scheduler pass, jitter, previews, and the ledger's
records of every fire time.

The implementation lives in private modules; this package re-exports the public names
(``validate`` and ``next_fire`` keep their old meaning: UTC unless a zone is given).
"""

from __future__ import annotations

from ._catchup import MAX_SPAWNS_PER_PASS as MAX_SPAWNS_PER_PASS
from ._catchup import ON_TIME_GRACE as ON_TIME_GRACE
from ._catchup import SKIP_COUNT_LIMIT as SKIP_COUNT_LIMIT
from ._catchup import Plan as Plan
from ._catchup import plan_pass as plan_pass
from ._expression import MAX_EXPRESSION_LENGTH as MAX_EXPRESSION_LENGTH
from ._expression import min_interval as min_interval
from ._expression import validate as validate
from ._expression import wall_times as wall_times
from ._fires import DstFold as DstFold
from ._fires import DstGap as DstGap
from ._fires import Fire as Fire
from ._fires import fires_between as fires_between
from ._fires import iter_fires as iter_fires
from ._fires import next_fire as next_fire
from ._ledger import Occurrence as Occurrence
from ._ledger import OccurrenceStatus as OccurrenceStatus
from ._ledger import SkipReason as SkipReason
from ._policy import DEFAULT_POLICY as DEFAULT_POLICY
from ._policy import POLICY_FIELDS as POLICY_FIELDS
from ._policy import CatchUp as CatchUp
from ._policy import CronPolicy as CronPolicy
from ._policy import Overlap as Overlap
from ._policy import format_duration as format_duration
from ._policy import jitter_offset as jitter_offset
from ._policy import parse_duration_field as parse_duration_field
from ._policy import parse_policy as parse_policy
from ._zones import zone as zone
