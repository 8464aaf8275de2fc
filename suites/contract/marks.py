"""Per-sample marks: why one timed sample of a metric should not be read like the others.

A time metric's `marks` field maps a reason below to the 0-based indices of its `samples` that
carry it (docs/result-schema.md). Marks name disturbed samples instead of averaging them in
silently; the statistics still include them, a picture tells them apart. One table so the job
side that writes a reason, the schema that accepts it and the legend that explains it read the
same words; a new reason is one line here.

Standard library only: imported by the job runtime and by the host.
"""

from __future__ import annotations

ESCAPED = "escaped"
CONTENDED = "contended"
THROTTLED = "throttled"
COMPILED = "compiled"

# reason -> the legend text a reader sees beside the marked samples.
MARKS: dict[str, str] = {
    ESCAPED: "work still running when the clock stopped (a device barrier after the sample found it)",
    CONTENDED: "the CPU was shared while the clock ran (other tasks, steal time, or the sample was pre-empted)",
    THROTTLED: "the GPU was held below its clocks (NVML: power cap, thermal, hardware slowdown)",
    COMPILED: "the framework compiled while the clock ran (a retrace: a new shape, dtype or static argument)",
}
