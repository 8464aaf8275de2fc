"""Benchmark suites and the in-job runtime.

Everything under this package is mounted read-only into job containers. The runtime
(`suites.runtime`) needs only the standard library; a suite's `impl_<framework>.py`
imports its framework lazily, inside `run`, so the host can read every `spec.py`
without any framework installed.
"""
