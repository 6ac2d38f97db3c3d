"""The reaper role and start-up recovery: return stuck jobs to pending."""
