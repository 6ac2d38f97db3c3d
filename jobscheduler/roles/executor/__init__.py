"""The executor role: consume wake-ups, run handlers, settle outcomes."""
