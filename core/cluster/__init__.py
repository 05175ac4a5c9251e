"""The only place that knows Dask: start or join the cluster that runs fits, send it work,
follow that work's progress, cancel it, and turn a worker that died into an interrupted run.

The dashboard's server and the command line (with --scheduler) submit here; fits, device
probes, inspections and pitfall demonstrations run in worker processes and come back as
plain data, so the server never imports JAX, jaxlib or torch. What runs on a worker is in
`worker_setup` (each worker's start: its devices, its resources, warm imports, recycling)
and `tasks` (the work); what the submitter uses is `connection`, `board`, `submit` and
`stored`; `channel` is the wire between the two.
"""

# Here, not in `connection`, so that a command that runs in its own process can read it
# without importing Dask.
SCHEDULER_ENV = "PLNLAB_SCHEDULER"
