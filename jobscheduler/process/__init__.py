"""Process assembly: the adapters a deployment uses, the roles in one nursery tree, the metrics
and health listener, readiness probes and ``dev``'s lock on its file."""
