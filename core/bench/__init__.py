"""Many runs side by side: the benchmark grid and suite, time to solution, the device-count
sweep, and `solve`'s choice of the fastest configuration they measured."""
