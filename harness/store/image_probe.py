"""What a stack image was built for: suites/contract/build_info.py run inside it, no GPU needed.

`harness build --verify` runs it after each build and prints the framework, the CUDA and cuDNN
versions it was compiled against and loads, and the GPU architectures it carries kernels for;
a cuda12 image that turns out to hold no CUDA build fails the command. `harness doctor` uses
the same probe (with a GPU request) to see whether the image has kernels for the GPU it finds.

The probe's output comes from inside a container and is treated as untrusted: parsed as one
JSON object, every field type-checked before use, text stripped of control characters.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.stack_facts import STACKS, of_stack
from harness.core.stack_facts.facts import as_dict, clean
from harness.store.images import Engine, Ensured, StackImage, connect

PROBE_SOURCE = Path(__file__).resolve().parents[2] / "suites" / "contract" / "build_info.py"
# The hardening of a job container, minus what a probe does not need.
_CONTAINER = {
    "network_mode": "none",
    "read_only": True,
    "tmpfs": {"/tmp": "rw,exec,size=256m"},
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges"],
    "remove": True,
    "stdout": True,
    "stderr": False,
}


def parse(output: str) -> dict[str, Any]:
    """The probe's JSON object (its last stdout line); a HarnessError when it is not one."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    try:
        info = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        info = None
    if not isinstance(info, dict) or not isinstance(info.get("framework"), str):
        shown = clean(lines[-1] if lines else "nothing", 120)
        raise HarnessError(f"the image's build probe printed {shown!r}, not its JSON report; rebuild the image")
    return info


def probe(engine: Engine, tag: str, stack: str, **container: Any) -> dict[str, Any]:
    """Run the build probe in `tag`; extra keyword arguments go to `containers.run` (a GPU request)."""
    import docker.errors

    source = PROBE_SOURCE.read_text()
    try:
        raw = engine.client.containers.run(tag, ["python", "-c", source, stack], **{**_CONTAINER, **container})
    except docker.errors.ContainerError as error:
        stderr = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else str(error.stderr)
        last = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or ["no output"]
        raise HarnessError(
            f"the build probe failed in {tag} (exit {error.exit_status}): {clean(last[0])}; rebuild it with "
            f"`harness build --stacks {stack}`"
        ) from None
    except docker.errors.APIError as error:
        raise HarnessError(f"the build probe could not start in {tag}: {clean(error.explanation or error)}") from None
    return parse(raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw))


def _known_stack(info: dict[str, Any]) -> str | None:
    """The stack the report names, when it is one of ours (the report comes from a container)."""
    stack = info.get("stack")
    return stack if isinstance(stack, str) and stack in STACKS else None


def problems(variant: str, info: dict[str, Any]) -> list[str]:
    """Why the probed image is not the variant it claims to be (empty: it is)."""
    if (stack := _known_stack(info)) is None:
        return [f"the probe reports stack {clean(info.get('stack'), 40)!r}, not one this harness declares"]
    gpu = of_stack(stack).gpu
    if variant != "cuda12" or gpu is None:  # a CPU variant, or a stack with no GPU variant at all
        return []
    return gpu.build_problems(variant.removeprefix("cuda"), info)


def summary(info: dict[str, Any]) -> list[str]:
    """The probe's findings as a few readable lines."""
    lines = [clean(info.get("framework")) + f" (Python {clean(info.get('python'))})"]
    stack = _known_stack(info)
    lines += of_stack(stack).summary(info) if stack is not None else []
    gpus = (
        [as_dict(g) for g in info.get("gpus", []) if isinstance(g, dict)] if isinstance(info.get("gpus"), list) else []
    )
    seen = ", ".join(f"{clean(g.get('name'))} (cc {clean(g.get('cc'))})" for g in gpus)
    lines.append(
        f"GPUs visible: {seen or 'none'}" + (f" (backend {clean(info['backend'])})" if "backend" in info else "")
    )
    return lines


def gpu_kernel_problem(info: dict[str, Any], capability: str) -> str | None:
    """Why this image cannot run kernels on a GPU of `capability` ("9.0"); None when it can."""
    if (stack := _known_stack(info)) is None:
        return f"the probe reports stack {clean(info.get('stack'), 40)!r}, not one this harness declares"
    if (gpu := of_stack(stack).gpu) is None or not re.fullmatch(r"\d+\.\d+", capability):
        return None
    return gpu.kernel_problem(info, capability)


def verify_images(done: list[Ensured]) -> None:
    """Probe each built image and print what it holds; fail when one is not what its variant says."""
    failed: list[str] = []
    with connect() as engine:
        for result in done:
            image: StackImage = result.image
            info = probe(engine, image.tag, image.stack)
            print(f"{image.stack}: verify {image.tag}", flush=True)
            for line in summary(info):
                print(f"  {line}", flush=True)
            named = info.get("stack")
            mismatch = (
                [] if named == image.stack else [f"the probe reports stack {clean(named, 40)!r}, not {image.stack}"]
            )
            for problem in mismatch or problems(image.variant, info):
                print(f"  PROBLEM: {problem}", flush=True)
                failed.append(f"{image.stack}: {problem}")
    if failed:
        raise HarnessError(f"--verify: {'; '.join(failed)}; regenerate the locks (images/lock.sh) and rebuild")
