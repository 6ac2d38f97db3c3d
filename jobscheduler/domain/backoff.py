"""Retry backoff: 2^attempt seconds, capped at 5 minutes (the seed's policy)."""

from __future__ import annotations

MAX_BACKOFF_SECONDS = 300.0


def backoff_seconds(attempt: int) -> float:
    """Delay before the retry that follows failed attempt number ``attempt`` (1-based)."""
    if attempt < 0:
        raise ValueError("attempt must be >= 0")
    if attempt >= 9:  # 2**9 = 512 > cap; avoids huge integers for silly attempt counts
        return MAX_BACKOFF_SECONDS
    return min(float(2**attempt), MAX_BACKOFF_SECONDS)
