"""suites/runtime/nvml.py without a GPU: a stand-in `pynvml` module with NVML's calling conventions
(values in milliwatts and millijoules, bytes or str names, NVMLError subclasses by code)."""

from __future__ import annotations

import sys
import time
import types
from typing import Any

import pytest

from suites.runtime import nvml
from suites.runtime.nvml import COUNTER, SAMPLING, EnergyMeter, EnergyReading

NOT_SUPPORTED, DRIVER_NOT_LOADED, NOT_FOUND = 3, 9, 6


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fake_pynvml(
    *,
    driver: bool = True,
    counter: bool = True,
    power: bool = True,
    watts: float = 300.0,
    clock: FakeClock | None = None,
    unsupported: tuple[str, ...] = (),
) -> types.ModuleType:
    """A pynvml stand-in for two GPUs; `unsupported` names calls that raise NOT_SUPPORTED."""
    m = types.ModuleType("pynvml")

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(value)
            self.value = value

        def __str__(self) -> str:
            return {NOT_SUPPORTED: "Not Supported", DRIVER_NOT_LOADED: "Driver Not Loaded"}.get(self.value, "Unknown")

    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    consts = {
        "NVML_FEATURE_ENABLED": 1, "NVML_TEMPERATURE_GPU": 0, "NVML_CLOCK_SM": 1, "NVML_CLOCK_MEM": 2,
        "NVML_ERROR_NOT_SUPPORTED": NOT_SUPPORTED,
    }  # fmt: skip
    for key, value in consts.items():
        setattr(m, key, value)
    m.calls = []  # type: ignore[attr-defined]
    gpus = [
        {"name": b"NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa", "pci": "00000000:17:00.0"},
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-bbbb", "pci": "00000000:65:00.0"},
    ]

    def api(name: str, fn: Any) -> None:
        def wrapper(*args: Any) -> Any:
            m.calls.append(name)  # type: ignore[attr-defined]
            if name in unsupported:
                raise NVMLError(NOT_SUPPORTED)
            return fn(*args)

        setattr(m, name, wrapper)

    def init() -> None:
        if not driver:
            raise NVMLError(DRIVER_NOT_LOADED)

    def handle_by(key: str) -> Any:
        def find(value: str) -> int:
            for i, gpu in enumerate(gpus):
                if gpu[key] == value:
                    return i
            raise NVMLError(NOT_FOUND)

        return find

    started = (clock or FakeClock())()

    def energy(h: int) -> int:
        if not counter:
            raise NVMLError(NOT_SUPPORTED)
        return int(5_000_000 + watts * ((clock or FakeClock())() - started) * 1000)  # mJ

    def power_mw(h: int) -> int:
        if not power:
            raise NVMLError(NOT_SUPPORTED)
        return int(watts * 1000)

    api("nvmlInit", init)
    api("nvmlShutdown", lambda: None)
    api("nvmlSystemGetDriverVersion", lambda: b"580.95.05")
    api("nvmlSystemGetCudaDriverVersion_v2", lambda: 13000)
    api("nvmlSystemGetCudaDriverVersion", lambda: 13000)
    api("nvmlDeviceGetCount", lambda: len(gpus))
    api("nvmlDeviceGetHandleByIndex", lambda i: i if 0 <= i < len(gpus) else (_ for _ in ()).throw(NVMLError(2)))
    api("nvmlDeviceGetHandleByUUID", handle_by("uuid"))
    api("nvmlDeviceGetHandleByPciBusId", handle_by("pci"))
    api("nvmlDeviceGetName", lambda h: gpus[h]["name"])
    api("nvmlDeviceGetUUID", lambda h: gpus[h]["uuid"])
    api("nvmlDeviceGetClockInfo", lambda h, kind: {1: 345, 2: 2619}[kind])
    api("nvmlDeviceGetMaxClockInfo", lambda h, kind: {1: 1980, 2: 2619}[kind])
    api("nvmlDeviceGetEnforcedPowerLimit", lambda h: 700_000)
    api("nvmlDeviceGetPowerManagementLimit", lambda h: 650_000)
    api("nvmlDeviceGetPersistenceMode", lambda h: 1)
    api("nvmlDeviceGetMemoryInfo", lambda h: types.SimpleNamespace(total=85_520_809_984, free=1, used=2))
    api("nvmlDeviceGetEccMode", lambda h: [1, 0])
    api("nvmlDeviceGetTemperatureV", lambda h, sensor: 41)
    api("nvmlDeviceGetTemperature", lambda h, sensor: 40)
    api("nvmlDeviceGetTotalEnergyConsumption", energy)
    api("nvmlDeviceGetPowerUsage", power_mw)
    return m


# ---------------------------------------------------------------------------------------------
# environment()


def test_environment_reads_every_field_in_plain_units() -> None:
    env = nvml.environment(fake_pynvml())
    assert env is not None
    assert env["driver_version"] == "580.95.05" and env["cuda_driver_version"] == "13.0"
    assert len(env["gpus"]) == 2
    gpu = env["gpus"][0]
    assert gpu == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",  # bytes decoded
        "uuid": "GPU-aaaa",
        "sm_clock_mhz": 345,
        "sm_clock_max_mhz": 1980,
        "memory_clock_mhz": 2619,
        "memory_clock_max_mhz": 2619,
        "power_limit_w": 700.0,  # milliwatts -> watts
        "memory_bytes": 85_520_809_984,  # tells H100 SXM (80 GB) from NVL (94 GB) of one name
        "persistence_mode": True,
        "ecc_mode": True,
        "ecc_mode_pending": False,
        "temperature_c": 41,
    }


def test_unsupported_fields_are_none_and_older_calls_are_the_fallback() -> None:
    fake = fake_pynvml(
        unsupported=(
            "nvmlDeviceGetEccMode", "nvmlDeviceGetTemperatureV", "nvmlDeviceGetEnforcedPowerLimit",
            "nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetMemoryInfo",
        )
    )  # fmt: skip
    env = nvml.environment(fake)
    assert env is not None and env["cuda_driver_version"] == "13.0"
    gpu = env["gpus"][1]
    assert gpu["ecc_mode"] is None and gpu["ecc_mode_pending"] is None and gpu["persistence_mode"] is None
    assert gpu["temperature_c"] == 40 and gpu["power_limit_w"] == 650.0 and gpu["memory_bytes"] is None
    assert fake.calls[-1] == "nvmlShutdown"


def test_environment_is_none_without_pynvml_or_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert nvml.load() is None and nvml.environment() is None
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(driver=False))
    assert nvml.environment() is None
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    env = nvml.environment()
    assert env is not None and env["gpus"][0]["uuid"] == "GPU-aaaa"


# ---------------------------------------------------------------------------------------------
# Which GPU


@pytest.mark.parametrize(
    ("device_id", "visible", "expected"),
    [
        (None, "", 0),
        (None, "1", 1),
        (None, "GPU-bbbb,GPU-aaaa", 1),
        ("GPU-aaaa", "1", 0),
        ("00000000:65:00.0", None, 1),
        (1, "0", 1),
    ],
)
def test_select_gpu_follows_cuda_visible_devices_and_ids(device_id: Any, visible: str | None, expected: int) -> None:
    fake = fake_pynvml()
    assert nvml.select_gpu(fake, device_id, visible="" if visible is None else visible) == expected


def test_a_mig_instance_or_unknown_gpu_has_no_reading() -> None:
    fake = fake_pynvml()
    with pytest.raises(fake.NVMLError):
        nvml.select_gpu(fake, None, visible="MIG-1234")
    with EnergyMeter("GPU-zzzz", module=fake) as meter:
        pass
    assert meter.reading is not None and meter.reading.joules is None
    assert "GPU-zzzz" in str(meter.reading.reason)


# ---------------------------------------------------------------------------------------------
# Energy


def test_counter_method_reads_before_and_after() -> None:
    clock = FakeClock()
    fake = fake_pynvml(clock=clock, watts=250.0)
    with EnergyMeter(0, module=fake, clock=clock) as meter:
        clock.now += 2.0
    reading = meter.reading
    assert reading is not None and reading.method == COUNTER and reading.reason is None
    assert reading.joules == pytest.approx(500.0) and reading.watts == pytest.approx(250.0)
    assert fake.calls.count("nvmlDeviceGetPowerUsage") == 0  # no thread, no sampling
    assert fake.calls[-1] == "nvmlShutdown"


def test_a_region_shorter_than_ten_refreshes_gets_no_number() -> None:
    clock = FakeClock()
    fake = fake_pynvml(clock=clock)
    with EnergyMeter(0, module=fake, clock=clock) as meter:
        clock.now += 0.5  # < 10 x 100 ms
    reading = meter.reading
    assert reading is not None and reading.joules is None and reading.watts is None
    assert reading.method == COUNTER and "shorter than 10 refreshes" in str(reading.reason)


def test_sampling_fallback_integrates_the_power_on_a_thread() -> None:
    fake = fake_pynvml(counter=False)
    readings = iter(range(10**6))
    fake.nvmlDeviceGetPowerUsage = lambda h: 200_000 + 1000 * (next(readings) % 2)  # refreshes every read
    with EnergyMeter(0, module=fake, interval_s=0.002) as meter:
        time.sleep(0.2)
    reading = meter.reading
    assert reading is not None and reading.method == SAMPLING, reading
    assert reading.joules is not None and reading.samples >= 11 and reading.updates is not None
    assert reading.joules == pytest.approx(200.5 * reading.seconds, rel=0.01)


def test_integration_and_its_refusal() -> None:
    ramp = [(0.1 * i, 100.0 + 10 * i) for i in range(11)]  # 100 -> 200 W over 1 s: 150 J
    assert nvml._from_samples(1.0, ramp).joules == pytest.approx(150.0)
    stretched = nvml._from_samples(1.1, ramp)  # samples cover 1 s of a 1.1 s region
    assert stretched.joules == pytest.approx(165.0)
    flat = [(0.1 * i, 100.0) for i in range(50)]  # the reading never refreshed: no number
    refused = nvml._from_samples(5.0, flat)
    assert refused.joules is None and refused.updates == 0 and "refreshes" in str(refused.reason)
    assert nvml._from_samples(1.0, ramp[:5]).joules is None  # only 4 refreshes


def test_no_method_no_module_no_driver_each_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    cases = {
        "neither an energy counter nor its power": fake_pynvml(counter=False, power=False),
        "no NVIDIA driver": fake_pynvml(driver=False),
    }
    for why, fake in cases.items():
        with EnergyMeter(module=fake) as meter:
            pass
        assert meter.reading is not None and meter.reading.joules is None and why in str(meter.reading.reason)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with EnergyMeter() as meter:
        pass
    assert meter.reading is not None and "not installed" in str(meter.reading.reason)


def test_nvml_failing_at_the_end_gives_a_reason_not_a_number() -> None:
    clock = FakeClock()
    fake = fake_pynvml(clock=clock)
    with EnergyMeter(0, module=fake, clock=clock) as meter:
        clock.now += 5.0
        fake.nvmlDeviceGetTotalEnergyConsumption = lambda h: (_ for _ in ()).throw(fake.NVMLError(15))
    assert meter.reading is not None and meter.reading.joules is None
    assert "end of the region" in str(meter.reading.reason)


# ---------------------------------------------------------------------------------------------
# Into the result


class Recorder:
    def __init__(self) -> None:
        self.values: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []

    def value(self, name: str, samples: Any, *, unit: str, better: str = "higher", description: str = "") -> None:
        self.values[name] = {"samples": samples, "unit": unit, "better": better, "description": description}

    def note(self, text: str) -> None:
        self.notes.append(text)


def test_record_energy_per_epoch_and_per_sample_with_the_method() -> None:
    ctx = Recorder()
    readings = [
        EnergyReading(120.0, 1.2, COUNTER),
        EnergyReading(None, 0.4, COUNTER, "region of 0.4 s is shorter than 10 refreshes"),
        EnergyReading(100.0, 1.0, COUNTER),
    ]
    nvml.record_energy(ctx, "epoch", readings, samples_per_region=1000, tag=" [low-overhead]")
    epoch, sample = ctx.values["energy per epoch [low-overhead]"], ctx.values["energy per sample [low-overhead]"]
    assert epoch["samples"] == [120.0, 100.0] and epoch["unit"] == "J" and epoch["better"] == "lower"
    assert sample["samples"] == [pytest.approx(120.0), pytest.approx(100.0)] and sample["unit"] == "mJ"
    assert "nvmlDeviceGetTotalEnergyConsumption" in epoch["description"]
    assert any("shorter than 10 refreshes" in n for n in ctx.notes) and any("2 of 3" in n for n in ctx.notes)


def test_record_energy_records_nothing_it_cannot_stand_behind() -> None:
    ctx = Recorder()
    nvml.record_energy(ctx, "epoch", [EnergyReading(None, 0.1, COUNTER, "too short")], samples_per_region=10)
    assert ctx.values == {} and ctx.notes == ["energy per epoch: no figure for some regions: too short"]
    mixed = Recorder()
    nvml.record_energy(mixed, "epoch", [EnergyReading(1.0, 1, COUNTER), EnergyReading(1.0, 1, SAMPLING)], 10)
    assert mixed.values == {} and "different methods" in mixed.notes[0]
    assert EnergyReading(50.0, 2.0, COUNTER).as_record()["mean_power_w"] == 25.0


# ---------------------------------------------------------------------------------------------
# Wiring: the job context meters GPU regions outside the clocks (suites/__main__ passes the meter)


def _gpu_context(clock: FakeClock, module: Any, repeat: int = 4) -> Any:
    from suites.contract.registry import all_suites
    from suites.runtime.context import Context

    spec = all_suites()["xla"]
    return Context(
        spec, "jax", spec.resolve({}), repeat=repeat, warmup=0, device=None, device_kind="gpu", sync=lambda o: None,
        clock=clock, energy_meter=lambda: EnergyMeter(module=module, clock=clock),
    )  # fmt: skip


def test_measure_records_the_energy_per_call_of_its_timed_loop() -> None:
    clock = FakeClock()
    module = fake_pynvml(clock=clock, watts=300.0)
    ctx = _gpu_context(clock, module, repeat=4)

    def call() -> int:
        clock.now += 0.5  # each call takes 0.5 s of a 300 W board: 150 J
        return 1

    ctx.measure("matmul", call)
    energy = next(m for m in ctx.metrics if m["name"] == "energy per call: matmul")
    assert energy["unit"] == "J" and energy["samples"] == [pytest.approx(150.0, rel=1e-3)]
    assert "total_energy_counter" in energy["description"]
    # The meter was read around the four timed calls only: the first call's 150 J is not in it.
    assert [m["samples"] for m in ctx.metrics if m["name"] == "matmul"] == [[0.5] * 4]


def test_measure_notes_why_a_region_has_no_energy_figure() -> None:
    clock = FakeClock()
    ctx = _gpu_context(clock, fake_pynvml(clock=clock, counter=False, power=False), repeat=2)
    ctx.measure("tiny", lambda: 1)
    assert [m["name"] for m in ctx.metrics] == ["tiny"]
    assert any(n.startswith("energy per call of tiny: no figure") for n in ctx.notes)


def test_training_records_energy_per_steady_epoch_without_epoch_one() -> None:
    from suites.runtime import training

    clock = FakeClock()
    ctx = _gpu_context(clock, fake_pynvml(clock=clock, watts=200.0))
    seconds = iter([3.0, 1.0, 1.0, 1.0])  # epoch 1 compiles

    def run_epoch(e: int) -> int:
        clock.now += next(seconds)
        return e

    history = training.train(ctx, epochs=4, run_epoch=run_epoch, read=lambda out: (0.5, 90.0), samples_per_epoch=100)
    assert [e.energy.joules for e in history.epochs] == [pytest.approx(j, rel=1e-3) for j in (600, 200, 200, 200)]
    training.record(ctx, history)
    per_epoch = next(m for m in ctx.metrics if m["name"] == "energy per epoch")
    assert per_epoch["samples"] == [pytest.approx(200.0, rel=1e-3)] * 3
    per_sample = next(m for m in ctx.metrics if m["name"] == "energy per sample")
    assert per_sample["unit"] == "mJ" and per_sample["samples"][0] == pytest.approx(2000.0, rel=1e-3)


def test_gpu_jobs_number_devices_in_pci_order_like_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from suites.contract.settings import Settings, apply_environment, recorded_variables

    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_ORDER"})  # no leaks
    apply_environment(Settings(device="cpu", threads=None, x64=False))
    assert "CUDA_DEVICE_ORDER" not in recorded_variables()
    apply_environment(Settings(device="gpu", threads=None, x64=False))
    assert recorded_variables()["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
