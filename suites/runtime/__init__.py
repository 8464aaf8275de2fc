"""The job side of the harness, job only: the timing context, framework adapters, training loops,
contention and sync checks, CUDA graphs, NVML. What the host also reads is in `suites.contract`."""
