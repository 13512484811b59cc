"""Reading and writing runs: the run directory (event files, run.json), loading it back as one
frame with clocks aligned, the Kineto (PyTorch profiler) importer, the Perfetto export."""
