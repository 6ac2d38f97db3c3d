"""The job state machine: every status change is built here, and nowhere else.

Each transition is a pure function returning a :class:`Change`: ONE conditional update of
one job, whose ``expect`` names the job's current status (and, from ``claimed`` on, the
claim token) and whose ``set`` is what the update writes. Stores only know how to apply a
Change atomically ("update where every expectation holds"); when it matches nothing the
transition lost a race and the caller must not act on it.

::

    pending -claim-> queued -pick-> claimed -start-> running -complete-> completed
      ^  ^  ^          |                 |              |-fail, attempts < max-> pending
      |  |  '-requeue--'                 |              '-fail, attempts >= max-> dlq
      |  |                               |                (or permanent failure)
      |  '--recover: no heartbeat for CLAIM_TIMEOUT (a failed attempt) ---'
      '-----release: shutdown hands the job back (attempt not counted) ---'

``attempts`` counts attempts *started*: ``start`` increments it (so a job completed on its
first try reads 1, matching ``JobContext.attempt``); ``fail`` and ``recover`` of a running
job do not count again and dead-letter once ``attempts >= maxAttempts``; ``release`` takes
the started attempt back. Every transition that ends an attempt carries its
:class:`~jobscheduler.domain.attempts.Attempt` record, which the store appends beside the job when
(and only when) the transition applies.

User actions, each one conditional update too::

    pending/queued/claimed -cancel-> cancelled        (a stale wake-up then loses its pick)
    running -request_cancel-> running + cancelRequestedAt -finish_cancel (executor)-> cancelled
    dlq/cancelled -retry-> pending (attempts reset to 0, a Replay record kept)
    template: pending -pause-> paused -resume-> pending (next fire from now, no burst)
              pending/paused/dlq -retire-> cancelled;  update_template edits it in place

Workflow steps (jobs with a ``workflow_id``) are stored ``waiting`` and leave it by their
own transitions; every transition above that ends a step also marks it (``step_dirty``) for
its workflow to act on::

    waiting -release_step-> pending;  waiting -cancel_step-> cancelled (a parent failed)
    dlq/cancelled -retry_step-> waiting;  settle_step clears the mark
    workflow record: creating -open-> running -finish-> completed/failed/cancelled, ...

The transitions live in four private modules, re-exported here: ``_lifecycle`` (the
:class:`Change` and what the roles write), ``_templates`` (a cron template's moves as it
fires), ``_user_actions`` (what a user asks for) and ``_workflow`` (the steps' and the
workflow records' moves); the status sets (:data:`UNFINISHED`, :data:`IN_FLIGHT`,
:data:`FINAL`, :data:`CANCELLABLE`, :data:`RETRYABLE`) in ``_statuses``.
"""

from __future__ import annotations

from ._lifecycle import SLOT_FIELDS as SLOT_FIELDS
from ._lifecycle import Change as Change
from ._lifecycle import attempt_record as attempt_record
from ._lifecycle import claim_fields as claim_fields
from ._lifecycle import complete as complete
from ._lifecycle import fail as fail
from ._lifecycle import heartbeat as heartbeat
from ._lifecycle import mark_settling as mark_settling
from ._lifecycle import pick as pick
from ._lifecycle import recover as recover
from ._lifecycle import release as release
from ._lifecycle import requeue as requeue
from ._lifecycle import start as start
from ._statuses import CANCELLABLE as CANCELLABLE
from ._statuses import FINAL as FINAL
from ._statuses import HOLDING_SLOTS as HOLDING_SLOTS
from ._statuses import IN_FLIGHT as IN_FLIGHT
from ._statuses import RETRYABLE as RETRYABLE
from ._statuses import UNFINISHED as UNFINISHED
from ._templates import advance_template as advance_template
from ._templates import advance_template_holding as advance_template_holding
from ._templates import dead_letter_template as dead_letter_template
from ._templates import instance_key as instance_key
from ._templates import release_buffered as release_buffered
from ._templates import spawn_instance as spawn_instance
from ._user_actions import cancel as cancel
from ._user_actions import finish_cancel as finish_cancel
from ._user_actions import pause as pause
from ._user_actions import request_cancel as request_cancel
from ._user_actions import resume as resume
from ._user_actions import retire as retire
from ._user_actions import retry as retry
from ._user_actions import update_template as update_template
from ._workflow import WorkflowChange as WorkflowChange
from ._workflow import abandon_workflow as abandon_workflow
from ._workflow import cancel_step as cancel_step
from ._workflow import finish_workflow as finish_workflow
from ._workflow import note_spawns as note_spawns
from ._workflow import open_workflow as open_workflow
from ._workflow import release_step as release_step
from ._workflow import released as released
from ._workflow import reopen_workflow as reopen_workflow
from ._workflow import request_workflow_cancel as request_workflow_cancel
from ._workflow import retry_step as retry_step
from ._workflow import settle_step as settle_step
