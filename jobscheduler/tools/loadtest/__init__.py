"""``jobscheduler loadtest``: send jobs over HTTP at a target rate and report latencies."""
