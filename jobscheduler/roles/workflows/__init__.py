"""Workflows in the roles: creating one, settling its steps as they end, the user's cancel
and retry, a handler's spawned children, and the reaper's sweeps. Every role that ends a
step (the executor, the reaper, the API) settles it through :class:`.settle.Settler`."""
