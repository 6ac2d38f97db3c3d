"""Metrics, health checks and structured logs: what every role reports and how."""
