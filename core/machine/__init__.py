"""The machine a run holds: JAX runtime and processes, device queue, leases, time budget, memory, compile counts."""
