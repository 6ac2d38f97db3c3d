"""jobscheduler: one-off and cron jobs on trio; see the README."""

from .errors import PermanentError as PermanentError
