"""Running and timing a fit in this process: spec -> queued, measured run -> result (stored by `stored_run`)."""
