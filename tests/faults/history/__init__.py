"""A history checker for the job state machine, in the spirit of Jepsen's Elle: after a run,
read every job's record, its attempt records, every template's cron ledger and what the
executors reported, and name every way the whole history breaks a promise.

The rules (each a :class:`Rule`):

- ``lost-outcome``: an executor saw an outcome applied (its ``job completed``,
  ``job failed; will retry`` or ``job dead-lettered`` line) that the store does not hold:
  no attempt record of that outcome, or the job no longer in the status it wrote while no
  user action started a new run.
- ``double-completion``: two ``completed`` attempts in one run of a job, or more
  completion lines for a job than it has completed runs.
- ``left-final-status``: an attempt of a run after that run completed or was dead-lettered
  (only a user's retry, which starts a new run, may move a job out of a final status).
- ``early-start``: an attempt started before the job was due.
- ``double-run``: two runs of one template for one fire time.
- ``missing-run``: a fire time the template's catch-up policy gives a run, without one; or
  a spawned ledger record whose run does not exist.
- ``phantom-attempt``: an attempt record of an attempt that never started (no start time,
  or a number the job never reached).

Run it on any store after any run::

    python -m tests.faults.history --mongo-uri mongodb://127.0.0.1:27017 --database js \\
        --log executor-1.log --log executor-2.log
    python -m tests.faults.history --sqlite data/jobscheduler.db --log dev.log

It prints each violation with the job's whole history and exits 1 if there is any.
"""

from .rules import History, Report, Reported, Rule, Violation, check
from .run import check_store, describe, parse_reports, read_history

__all__ = [
    "History",
    "Report",
    "Reported",
    "Rule",
    "Violation",
    "check",
    "check_store",
    "describe",
    "parse_reports",
    "read_history",
]
