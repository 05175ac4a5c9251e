"""Who holds what, across processes and machines: the device queue (one timed run per device),
leases that say their owner is alive, and the time one run may hold the device."""
