"""``jobscheduler bench``: benchmarks against a fresh stack (prints figures; not a test)."""
