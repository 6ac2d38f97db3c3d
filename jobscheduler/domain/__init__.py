"""The domain: jobs, their one state machine, cron, attempts, keys, audit records and what clients
send, validated. Pure: no I/O, no web framework."""
