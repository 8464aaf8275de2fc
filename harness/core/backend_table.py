"""Every backend by name, and the module that implements it: the one table the rest derives from.

`RUNS`: the backends `harness run` starts jobs through. Each is one module holding a class that
satisfies `harness.backends.base.Backend` (its `name` is the key here) and
`from_options(options: BackendOptions) -> Backend`; harness/backends/base.py imports the module by
this path only when that backend is asked for, so no backend's imports (Docker's SDK, Slurm's
package) load for another. `--backend`'s choices, the plan's list and docs/extending.md follow
this table, and tests/test_backend_contract.py fails when an entry lacks any of them.

`EXPORTS`: targets a plan is written for but that no `harness run` drives (`harness export k8s`,
`docker compose up`); they are recorded in plans and collected back, so a plan names them too.

Plain data, importing nothing: the plan (below the backends) reads it as well as backends/base.py.
"""

from __future__ import annotations

RUNS: dict[str, str] = {
    "local": "harness.backends.local",
    "docker": "harness.backends.docker_backend",
    "slurm": "harness.backends.slurm.backend",
}
EXPORTS: dict[str, str] = {"kubernetes": "harness.backends.k8s", "compose": "harness.backends.compose_steps"}
