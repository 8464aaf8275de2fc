"""The names a profile's files are written under, shared by the job (suites/runtime/profiling.py)
and the host that reads them back (harness/store/traces.py, harness/judge/attribution_rules.py)."""

from __future__ import annotations

STEP = "harness.step"  # the annotation around each profiled step, in every framework's trace
FOLDER = "profiles"  # under the job's artefact folder
SUFFIX = ".trace.json.gz"  # gzipped Chrome trace-event JSON
OPS_SUFFIX = ".ops.json"  # beside a JAX trace: what each XLA operation runs (suites/runtime/hlo_ops.py)
# `--profile-steps`: a profile is a look inside a few steady steps, not a second benchmark.
MAX_STEPS = 50
