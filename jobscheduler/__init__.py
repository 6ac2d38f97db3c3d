"""jobscheduler: one-off and cron jobs on trio; see the README and the docs site."""

from jobscheduler.errors import PermanentError as PermanentError
