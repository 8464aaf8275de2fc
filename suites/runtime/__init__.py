"""The job side of the harness: timing contract, environment capture, result files."""
