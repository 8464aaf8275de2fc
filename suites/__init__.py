"""Benchmark suites and the in-job runtime.

Everything under this package is mounted read-only into job containers. The contract
(`suites.contract`: what the host reads too) and the job-only runtime (`suites.runtime`) need only
the standard library at import; a suite's `impl_<framework>.py`
imports its framework lazily, inside `run`, so the host can read every `spec.py`
without any framework installed.
"""
