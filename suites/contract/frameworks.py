"""Framework names (as typed on the command line) -> the stack (image) they run in, and the
contract every framework's adapter module fulfils.

Adding a framework means one entry here, an adapter module beside it that satisfies
`Adapter`, and `impl_<framework>.py` modules in the suites that support it (docs/extending.md
lists the rest: image, locks, compose service; tests/test_contract.py checks them all).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol, cast

from suites.contract.settings import Settings


class Barrier(Protocol):
    """What a framework adapter provides for an asynchronous device."""

    def pending(self) -> bool:
        """Non-blocking: is any computation on the job's devices still running?"""
        ...

    def wait(self) -> None:
        """Block until every computation on the job's devices has finished."""
        ...


class Adapter(Protocol):
    """What the job runner needs from a framework; imported only inside the job."""

    def configure(self, settings: Settings) -> dict[str, Any]:
        """Apply the fairness settings (threads, precision, x64); return what is now in force."""
        ...

    def device(self, settings: Settings) -> Any:
        """The device object suites place their arrays on."""
        ...

    def initialise(self, settings: Settings) -> None:
        """Bring the device runtime up (client, CUDA context) so that its cost is timed apart."""
        ...

    def sync(self, out: Any) -> None:
        """Wait until `out` is computed (every timed call ends with it)."""
        ...

    def barrier_for(self, settings: Settings) -> Barrier | None:
        """A device-wide barrier for sync-escape detection; None where nothing runs asynchronously."""
        ...

    def holds_work(self, out: Any) -> bool:
        """Whether a timed call's output contains something `sync` can wait on."""
        ...

    def precision_probe(self, settings: Settings) -> dict[str, Any]:
        """The arithmetic really used, measured (contract/precision.py)."""
        ...

    def environment(self, settings: Settings) -> dict[str, Any]:
        """Versions and device facts recorded in every result."""
        ...


ADAPTER_FUNCTIONS = (
    "configure",
    "device",
    "initialise",
    "sync",
    "barrier_for",
    "holds_work",
    "precision_probe",
    "environment",
)


@dataclass(frozen=True)
class Framework:
    name: str
    stack: str
    adapter: str  # module fulfilling `Adapter`, imported only inside the job
    description: str
    modules: tuple[str, ...]  # what importing the framework means (timed apart as `import_s`)
    # Where it can compute (suites/contract/job_spec.py DEVICES): the plan refuses any other --device
    # before a job starts, instead of a job that starts only to fail.
    devices: tuple[str, ...] = ("cpu", "gpu")


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework(
            "numpy",
            "numpy",
            "suites.runtime.adapter_numpy",
            "NumPy/SciPy, eager, host CPU",
            ("numpy", "scipy"),
            devices=("cpu",),
        ),
        Framework("jax", "jax", "suites.runtime.adapter_jax", "JAX (jit, grad, vmap)", ("jax",)),
        Framework("flax", "jax", "suites.runtime.adapter_jax", "Flax NNX + Optax on JAX", ("jax", "flax", "optax")),
        Framework("pytorch", "pytorch", "suites.runtime.adapter_pytorch", "PyTorch (eager, torch.compile)", ("torch",)),
    )
}

STACKS: tuple[str, ...] = tuple(sorted({f.stack for f in FRAMEWORKS.values()}))


def load_adapter(framework: Framework) -> Adapter:
    """Import the framework's adapter module (inside the job: it imports the framework)."""
    module = importlib.import_module(framework.adapter)
    missing = [name for name in ADAPTER_FUNCTIONS if not callable(getattr(module, name, None))]
    if missing:
        raise TypeError(f"{framework.adapter} does not fulfil the Adapter contract: missing {', '.join(missing)}")
    return cast(Adapter, module)
