"""The notifier role: failure notifications sent to webhooks (:mod:`.loop`, :mod:`.sender`)."""
