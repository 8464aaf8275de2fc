"""Exceptions a suite raises to end a job with a clear status instead of a traceback."""


class Skip(Exception):
    """The workload cannot run here (framework lacks the feature, no GPU, ...): status skipped."""


class JobError(Exception):
    """A configuration problem inside the job (e.g. --device gpu without a visible GPU)."""
