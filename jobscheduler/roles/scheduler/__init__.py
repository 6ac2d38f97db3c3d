"""The scheduler role: while leading, claim due jobs, publish wake-ups, fire cron templates."""
