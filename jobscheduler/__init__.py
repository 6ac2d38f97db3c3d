"""jobscheduler: one-off and cron jobs on trio; see the README."""

from jobscheduler.errors import PermanentError as PermanentError
