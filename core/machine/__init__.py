"""The machine a run is on: JAX runtime and native settings, compile counts and their
reasons, its state while a run is timed, memory estimates, multi-process JAX."""
