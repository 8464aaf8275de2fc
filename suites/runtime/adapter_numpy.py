"""NumPy/SciPy: eager, synchronous; nothing to synchronise."""

from __future__ import annotations

from typing import Any

from suites.contract import precision
from suites.contract.errors import JobError
from suites.contract.settings import Settings


def configure(settings: Settings) -> dict[str, Any]:
    if settings.device == "gpu":
        raise JobError("numpy runs on the host CPU only; drop numpy from --frameworks for --device gpu")
    return {"float64_default": True, "float32_matmul": "float32", **threads_in_use()}


def after_work(settings: Settings) -> dict[str, Any]:
    """The thread pools again once the work has run: a suite that used SciPy's linear algebra has
    loaded SciPy's own OpenBLAS by then (suites/__main__.py updates the precision record with it)."""
    return threads_in_use()


def threads_in_use() -> dict[str, Any]:
    blas = blas_threads()
    return {
        # BLAS/LAPACK threads (matmul, inverse, solve), read back from the loaded libraries;
        # NumPy's elementwise functions (sin, cos, add) always run on one thread.
        "compute_threads": max((p["threads"] for p in blas if p["threads"]), default=None) if blas else None,
        "blas_threads": blas,
    }


def blas_threads() -> list[dict[str, Any]] | None:
    """Thread count of every BLAS/OpenMP pool loaded so far (None: threadpoolctl missing). SciPy's
    linear algebra is not imported to see its pool: that import is a third of a NumPy job's time
    (0.3 of 0.9 s), paid in every round whether the suite uses SciPy or not; `after_work` reads
    the pools again when the work is done."""
    import numpy  # noqa: F401  (threadpoolctl only sees libraries already loaded)

    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    return [
        {"api": p.get("internal_api"), "library": p.get("prefix"), "threads": p.get("num_threads")}
        for p in threadpool_info()
    ]


def device(settings: Settings) -> str:
    return "cpu"


def initialise(settings: Settings) -> None:
    """The host CPU needs no bringing up."""


def sync(out: Any) -> None:
    """NumPy returns finished arrays."""


def barrier_for(settings: Settings) -> None:
    """NumPy is synchronous: no work can outlive a call, so there is no barrier."""
    return None


def holds_work(out: Any) -> bool:
    return True  # synchronous: whatever it returned, the work is done


def precision_probe(settings: Settings) -> dict[str, Any]:
    """The matmul probe through NumPy's float32 BLAS (NumPy has no convolution of its own)."""
    matmul = precision.matmul_probe()
    return precision.measured_record(matmul.measure(matmul.lhs @ matmul.rhs), None)


def environment(settings: Settings) -> dict[str, Any]:
    import numpy

    env: dict[str, Any] = {"versions": {"numpy": numpy.__version__}}
    try:
        import scipy

        env["versions"]["scipy"] = scipy.__version__
    except ImportError:
        pass
    try:
        config = numpy.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        env["blas"] = {"name": blas.get("name"), "version": blas.get("version")}
    except Exception:  # older numpy: no dict mode; the version is enough
        env["blas"] = None
    try:
        from threadpoolctl import threadpool_info

        env["thread_pools"] = [
            {"api": p.get("internal_api"), "threads": p.get("num_threads")} for p in threadpool_info()
        ]
    except ImportError:
        pass
    env["device"] = {"kind": "cpu", "name": "host CPU"}
    return env
