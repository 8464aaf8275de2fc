"""The host–job contract: everything both the host (`harness/`) and a job read.

The suite spec and registry, the job spec and its settings, the result record and its marks, the
framework table, the statistics a job reports, the machine's identity, the precision classes, the
data files' format and the image's build probe. The host imports from here and nowhere else under
`suites/`; the job-only runtime (`suites/runtime/`: timing context, adapters, training loops,
contention, NVML) imports from here, never the reverse (tests/test_layering.py checks both).
Standard library only at import, like the runtime.
"""
