"""Host side of the benchmark harness: plans jobs, runs them isolated, reads JSON, reports.

Never imports a framework: everything it knows about a job comes from the result file.
"""

__version__ = "0.1.0"
