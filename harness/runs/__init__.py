"""Running experiments: the runner, sweeps, run folders, shards and their merge, dry runs,
sequential comparisons, and the Python API."""
