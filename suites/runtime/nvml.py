"""NVIDIA driver facts and energy readings through NVML, for GPU jobs. Optional in every way.

NVML is the driver's management library; Python reaches it through `pynvml` (the PyPI package
nvidia-ml-py, pinned in the cuda12 images). Without the module, without a driver, or on a GPU
that lacks a counter, the functions here return None or a reading that says why it has no
number: a missing energy figure is fine, a made-up one is not.

- `environment()`: driver and CUDA driver version and, per GPU, clocks, power limit,
  persistence mode, ECC mode and temperature (the facts that make two GPU numbers comparable).
- `EnergyMeter`: the energy of a timed region. Preferred method: the total-energy counter
  (`nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver loaded, Volta and newer)
  read at both ends. Fallback: `nvmlDeviceGetPowerUsage` sampled on a background thread and
  integrated (trapezoids). Either way NVML refreshes what it reports every ~20-100 ms, so a
  region spanning fewer than MIN_UPDATES refreshes gets no number, only the reason.

NVML numbers GPUs by PCI order and ignores CUDA_VISIBLE_DEVICES; `select_gpu` maps the job's
device to NVML's (by UUID or PCI bus id where the framework gives one).
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from typing import Any, Protocol

# NVML refreshes power and the energy counter every ~20-100 ms depending on the GPU; a region
# must span this many refreshes before its energy is worth a number (the two ends' unknown phase
# within a refresh then costs at most ~2/MIN_UPDATES of it).
MIN_UPDATES = 10
# The slowest refresh period NVML is documented to use; the counter method cannot see its
# refreshes (reading them would mean polling), so it assumes the worst.
SLOWEST_UPDATE_S = 0.1
# How often the fallback thread reads the power: well below the fastest refresh (20 ms).
SAMPLE_INTERVAL_S = 0.005

COUNTER = "total_energy_counter"
SAMPLING = "power_sampling"


def load() -> Any | None:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _cuda_version(number: int) -> str:
    """NVML's 12040 -> '12.4' (major * 1000 + minor * 10)."""
    return f"{number // 1000}.{(number % 1000) // 10}"


@contextmanager
def _session(nvml: Any) -> Iterator[None]:
    nvml.nvmlInit()
    try:
        yield
    finally:
        with suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _read(nvml: Any, fn: Callable[[], Any]) -> Any:
    """One NVML field; None where this GPU or driver does not support it."""
    try:
        return fn()
    except nvml.NVMLError:
        return None


def _gpu(nvml: Any, index: int) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)

    def field_(name: str, *args: Any) -> Any:
        fn = getattr(nvml, name, None)
        return None if fn is None else _read(nvml, lambda: fn(handle, *args))

    def milli(value: Any) -> float | None:
        return None if value is None else value / 1000.0

    temperature = field_("nvmlDeviceGetTemperatureV", nvml.NVML_TEMPERATURE_GPU)
    if temperature is None:  # the older call, deprecated in newer drivers
        temperature = field_("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU)
    persistence = field_("nvmlDeviceGetPersistenceMode")
    ecc = field_("nvmlDeviceGetEccMode")
    enabled = nvml.NVML_FEATURE_ENABLED
    power_limit = field_("nvmlDeviceGetEnforcedPowerLimit")
    if power_limit is None:
        power_limit = field_("nvmlDeviceGetPowerManagementLimit")
    name, uuid = field_("nvmlDeviceGetName"), field_("nvmlDeviceGetUUID")
    memory = field_("nvmlDeviceGetMemoryInfo")  # total tells variants of one name apart (H100 PCIe/NVL)
    total = getattr(memory, "total", None)
    return {
        "index": index,
        "name": None if name is None else _text(name),
        "uuid": None if uuid is None else _text(uuid),
        "sm_clock_mhz": field_("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
        "sm_clock_max_mhz": field_("nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_SM),
        "memory_clock_mhz": field_("nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
        "memory_clock_max_mhz": field_("nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_MEM),
        "power_limit_w": milli(power_limit),
        "memory_bytes": total if isinstance(total, int) and total > 0 else None,
        "persistence_mode": None if persistence is None else persistence == enabled,
        # (current, pending): a pending change applies at the next reboot
        "ecc_mode": None if ecc is None else ecc[0] == enabled,
        "ecc_mode_pending": None if ecc is None else ecc[1] == enabled,
        "temperature_c": temperature,
    }


def environment(module: Any | None = None) -> dict[str, Any] | None:
    """Driver, CUDA driver and per-GPU facts; None when pynvml or the NVIDIA driver is missing."""
    nvml = module if module is not None else load()
    if nvml is None:
        return None
    try:
        with _session(nvml):
            cuda = _read(nvml, nvml.nvmlSystemGetCudaDriverVersion_v2)
            if cuda is None:
                cuda = _read(nvml, nvml.nvmlSystemGetCudaDriverVersion)
            return {
                "source": "nvml",
                "driver_version": _text(nvml.nvmlSystemGetDriverVersion()),
                # the newest CUDA this driver runs (a cu13 wheel needs 13.x here)
                "cuda_driver_version": None if cuda is None else _cuda_version(int(cuda)),
                "gpus": [_gpu(nvml, i) for i in range(int(nvml.nvmlDeviceGetCount()))],
            }
    except nvml.NVMLError:  # no driver (library not found, driver not loaded) or no permission
        return None


# ---------------------------------------------------------------------------------------------
# Which NVML device a job uses


def select_gpu(nvml: Any, device_id: str | int | None = None, visible: str | None = None) -> Any:
    """NVML's handle for the job's GPU (inside an NVML session).

    `device_id`: a UUID ("GPU-..."), a PCI bus id ("00000000:17:00.0"), or an NVML index. None:
    the first entry of CUDA_VISIBLE_DEVICES (`visible`, default the environment's) if it names a
    GPU, else NVML index 0. A MIG instance ("MIG-...") has no energy counter of its own: an
    NVMLError says so.
    """
    if device_id is None:
        entries = (os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible).split(",")
        first = entries[0].strip()
        device_id = int(first) if first.isdigit() else (first or 0)
    if isinstance(device_id, int):
        return nvml.nvmlDeviceGetHandleByIndex(device_id)
    if device_id.startswith("MIG-"):
        raise nvml.NVMLError(nvml.NVML_ERROR_NOT_SUPPORTED)
    if device_id.startswith("GPU-"):
        return nvml.nvmlDeviceGetHandleByUUID(device_id)
    return nvml.nvmlDeviceGetHandleByPciBusId(device_id)


# ---------------------------------------------------------------------------------------------
# Energy of a timed region


@dataclass
class EnergyReading:
    """One region's energy. `joules` is None exactly when `reason` says why there is no number."""

    joules: float | None
    seconds: float
    method: str | None  # COUNTER, SAMPLING, or None when neither works here
    reason: str | None = None
    updates: int | None = None  # power refreshes seen (SAMPLING only)
    samples: int = 0  # power readings taken (SAMPLING only)

    @property
    def watts(self) -> float | None:
        return None if self.joules is None or self.seconds <= 0 else self.joules / self.seconds

    def as_record(self) -> dict[str, Any]:
        record = asdict(self)
        record["mean_power_w"] = self.watts
        return record


def _no_reading(seconds: float, reason: str, method: str | None = None) -> EnergyReading:
    return EnergyReading(None, seconds, method, reason)


class EnergyMeter:
    """`with EnergyMeter() as meter: <region, synchronised at its end>` then `meter.reading`.

    The region must end with the framework's synchronisation inside the `with` block (the
    energy of work still queued would otherwise fall outside it). One meter measures one
    region; NVML is initialised on entry and shut down on exit.
    """

    def __init__(
        self,
        device_id: str | int | None = None,
        *,
        module: Any | None = None,
        interval_s: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
        prefer_counter: bool = True,
    ) -> None:
        self.device_id = device_id
        self.module = module
        self.interval_s = interval_s
        self.clock = clock
        self.prefer_counter = prefer_counter
        self.reading: EnergyReading | None = None
        self._nvml: Any = None
        self._handle: Any = None
        self._method: str | None = None
        self._problem: str | None = None
        self._start = 0.0
        self._start_mj = 0
        self._points: list[tuple[float, float]] = []  # (time, watts)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- set-up: which method works on this GPU ------------------------------------------------
    def _open(self) -> None:
        nvml = self.module if self.module is not None else load()
        if nvml is None:
            self._problem = "pynvml (nvidia-ml-py) is not installed"
            return
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as error:
            self._problem = f"NVML did not start ({_text(error)}): no NVIDIA driver here"
            return
        self._nvml = nvml
        try:
            self._handle = select_gpu(nvml, self.device_id)
        except nvml.NVMLError as error:
            self._problem = f"NVML has no energy readings for GPU {self.device_id!r} ({_text(error)})"
            return
        counter = _read(nvml, lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        if self.prefer_counter and counter is not None:
            self._method = COUNTER
        elif _read(nvml, lambda: nvml.nvmlDeviceGetPowerUsage(self._handle)) is not None:
            self._method = SAMPLING
        else:
            self._problem = "this GPU reports neither an energy counter nor its power draw through NVML"

    def _close(self) -> None:
        if self._nvml is not None:
            with suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
            self._nvml = None

    # -- the fallback: sample the power on a thread ----------------------------------------------
    def _sample(self) -> None:
        nvml = self._nvml
        while True:
            try:
                watts = nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
            except nvml.NVMLError:
                watts = None
            if watts is not None:
                self._points.append((self.clock(), watts))
            if self._stop.wait(self.interval_s):
                return

    def clock_state(self) -> tuple[float | None, int | None]:
        """(SM clock in MHz, clock-event reason bits) now; (None, None) where NVML cannot say.

        Read after each timed sample (outside its clock): a sample during which the GPU was held
        back (power cap, thermal, a hardware slowdown) is marked `throttled` (contention.py).
        """
        nvml, handle = self._nvml, self._handle
        if nvml is None or handle is None:
            return None, None
        sm = _read(nvml, lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        # Renamed in NVML 12.2 (throttle -> clocks event); the old name stays in older drivers.
        reasons_of = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        reasons = _read(nvml, lambda: reasons_of(handle)) if reasons_of is not None else None
        return (float(sm) if sm is not None else None), (int(reasons) if reasons is not None else None)

    def __enter__(self) -> EnergyMeter:
        self._open()
        if self._method == COUNTER:
            self._start_mj = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        elif self._method == SAMPLING:
            self._stop.clear()
            self._points = []
            self._thread = threading.Thread(target=self._sample, name="nvml-power", daemon=True)
        self._start = self.clock()
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        seconds = self.clock() - self._start
        try:
            if self._method == COUNTER:
                end_mj = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
                self.reading = _from_counter(seconds, end_mj - self._start_mj)
            elif self._method == SAMPLING:
                self._stop.set()
                if self._thread is not None:
                    self._thread.join()
                self.reading = _from_samples(seconds, self._points)
            else:
                self.reading = _no_reading(seconds, self._problem or "no NVML method available")
        except Exception as error:  # NVMLError at the end (GPU lost, ...): no number, say why
            self.reading = _no_reading(seconds, f"NVML failed at the end of the region: {error}", self._method)
        finally:
            self._close()


def _from_counter(seconds: float, delta_mj: int) -> EnergyReading:
    needed = MIN_UPDATES * SLOWEST_UPDATE_S
    if seconds < needed:
        return _no_reading(
            seconds,
            f"region of {seconds:.3g} s is shorter than {MIN_UPDATES} refreshes of NVML's energy counter "
            f"(up to {SLOWEST_UPDATE_S * 1000:.0f} ms each, {needed:.3g} s): time a longer region",
            COUNTER,
        )
    if delta_mj < 0:  # the counter restarted (driver reload) during the region
        return _no_reading(seconds, "NVML's energy counter went backwards (driver reloaded?)", COUNTER)
    return EnergyReading(delta_mj / 1000.0, seconds, COUNTER)


def _from_samples(seconds: float, points: Sequence[tuple[float, float]]) -> EnergyReading:
    """Trapezoid integral of the sampled power over the region, if it saw enough refreshes."""
    updates = sum(1 for a, b in zip(points, points[1:], strict=False) if a[1] != b[1])
    if len(points) < 2 or updates < MIN_UPDATES:
        return EnergyReading(
            None,
            seconds,
            SAMPLING,
            f"region of {seconds:.3g} s saw {updates} refreshes of NVML's power reading (every ~20-100 ms); "
            f"{MIN_UPDATES} are needed for an energy figure: time a longer region",
            updates,
            len(points),
        )
    joules = sum((t1 - t0) * (w0 + w1) / 2.0 for (t0, w0), (t1, w1) in zip(points, points[1:], strict=False))
    # the thread's first and last samples fall just inside the region: stretch to its length
    covered = points[-1][0] - points[0][0]
    if covered > 0:
        joules *= seconds / covered
    return EnergyReading(joules, seconds, SAMPLING, None, updates, len(points))


# ---------------------------------------------------------------------------------------------
# Into the result


class Recorder(Protocol):
    """What the job context offers (suites.runtime.context.Context satisfies it)."""

    def value(
        self, name: str, samples: float | Sequence[float], *, unit: str, better: str = ..., description: str = ...
    ) -> None: ...

    def note(self, text: str) -> None: ...


METHOD_TEXT = {
    COUNTER: "NVML total-energy counter (nvmlDeviceGetTotalEnergyConsumption) read before and after",
    SAMPLING: "NVML power (nvmlDeviceGetPowerUsage) sampled every 5 ms on a thread and integrated",
}


def record_energy(
    ctx: Recorder, region: str, readings: Sequence[EnergyReading], samples_per_region: int, tag: str = ""
) -> None:
    """`energy per <region><tag>` (J) and `energy per sample<tag>` (mJ) from the regions with a number.

    `tag` keeps variants apart (" [low-overhead]"). Regions without a number (too short, no
    counter) are left out and their reason is noted; no metric at all when none has one. Every
    metric's description names the method.
    """
    good = [r for r in readings if r.joules is not None]
    reasons = list(dict.fromkeys(r.reason for r in readings if r.joules is None and r.reason))
    for reason in reasons:
        ctx.note(f"energy per {region}{tag}: no figure for some regions: {reason}")
    if not good:
        return
    methods = {r.method for r in good}
    if len(methods) != 1:  # mixing a counter with an integral would blur the figure
        ctx.note(f"energy per {region}{tag}: regions were measured by different methods; not recorded")
        return
    method = METHOD_TEXT.get(str(good[0].method), str(good[0].method))
    joules = [float(r.joules) for r in good if r.joules is not None]
    ctx.value(
        f"energy per {region}{tag}",
        joules,
        unit="J",
        better="lower",
        description=f"GPU energy of one {region} ({method}); the whole board, including idle draw",
    )
    if samples_per_region > 0:
        ctx.value(
            f"energy per sample{tag}",
            [1000.0 * j / samples_per_region for j in joules],
            unit="mJ",
            better="lower",
            description=f"energy per {region} / {samples_per_region} samples ({method})",
        )
    ctx.note(f"energy per {region}{tag}: {len(joules)} of {len(readings)} regions measured; {method}")
