"""The command line's parts: its arguments (`arguments`), what it prints (`output`), the
commands that fit (`fitting`) and those that read or move stored runs (`store_commands`).
`python -m core` (`core.__main__`) is its entry point.

Each command imports what it needs when it runs: `list`, `export`, `import` and a refused
option answer without starting JAX (about a second).
"""

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2
# The worker running the fit died (--scheduler): the run is stored as interrupted.
EXIT_INTERRUPTED = 3
# No worker of this project serves the device asked for on the cluster (--scheduler): nothing ran.
EXIT_NO_WORKER = 4
# `solve` stored its run, but the run is no certified solution (it diverged, stopped short or
# stalled, ran out of iterations or of time): a script tells it from a solution by the status.
EXIT_NOT_SOLVED = 5
