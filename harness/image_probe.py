"""What a stack image was built for: suites/runtime/build_info.py run inside it, no GPU needed.

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

from harness.errors import HarnessError
from harness.images import Engine, Ensured, StackImage, connect
from suites.runtime.build_info import covers

PROBE_SOURCE = Path(__file__).resolve().parent.parent / "suites" / "runtime" / "build_info.py"
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


def clean(value: Any, limit: int = 200) -> str:
    """Text from the container, safe to print on a terminal."""
    return re.sub(r"[^\x20-\x7e]", "?", str(value))[:limit]


def _strings(value: Any) -> list[str]:
    return [clean(v, 40) for v in value] if isinstance(value, list) and all(isinstance(v, str) for v in value) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


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


def _cuda_plugins(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: _dict(v) for k, v in info.items() if re.fullmatch(r"cuda\d+_plugin", k)}


def problems(variant: str, info: dict[str, Any]) -> list[str]:
    """Why the probed image is not the variant it claims to be (empty: it is)."""
    if variant != "cuda12" or info.get("stack") == "numpy":
        return []
    wanted = variant.removeprefix("cuda")
    found: list[str] = []
    if info.get("stack") == "pytorch":
        cuda = info.get("cuda")
        if not (isinstance(cuda, str) and cuda.split(".")[0] == wanted):
            found.append(f"torch reports CUDA {clean(cuda)!s}, not {wanted}.x")
        if not _strings(info.get("arch_list")):
            found.append("torch.cuda.get_arch_list() is empty: no GPU kernels in this build")
        if not info.get("cudnn"):
            found.append("torch finds no cuDNN")
    elif info.get("stack") == "jax":
        plugin = _cuda_plugins(info).get(f"cuda{wanted}_plugin")
        if plugin is None:
            found.append(f"no jax-cuda{wanted}-plugin package")
        else:
            build = plugin.get("cuda_build")
            if not (isinstance(build, str) and build.split(".")[0] == wanted):
                found.append(f"the CUDA plugin was built against CUDA {clean(build)}, not {wanted}.x")
            if not _strings(_dict(plugin.get("kernels")).get("sm")):
                found.append("the CUDA plugin carries no GPU kernels")
        if not _strings(_dict(info.get("ptxas")).get("targets")):
            found.append("no ptxas in the image (XLA compiles its GPU kernels with it)")
    return found


def _kernels(value: Any) -> str:
    kernels = _dict(value)
    sm, ptx = _strings(kernels.get("sm")), _strings(kernels.get("ptx"))
    return " ".join(sm) + (f" + PTX {' '.join(ptx)}" if ptx else "") if sm or ptx else "none found"


def _span(targets: list[str]) -> str:
    plain = [t for t in targets if re.fullmatch(r"sm_\d+", t)]
    return f"{plain[0]}..{plain[-1]} ({len(targets)} targets)" if plain else "none"


def summary(info: dict[str, Any]) -> list[str]:
    """The probe's findings as a few readable lines."""
    packages = _dict(info.get("packages"))
    lines = [clean(info.get("framework")) + f" (Python {clean(info.get('python'))})"]
    if info.get("stack") == "pytorch":
        if info.get("cuda"):
            lines.append(
                f"CUDA {clean(info.get('cuda'))}, cuDNN {clean(info.get('cudnn'))}, NCCL {clean(info.get('nccl'))}, "
                f"triton {clean(packages.get('triton', 'absent'))}"
            )
            lines.append(f"torch.cuda.get_arch_list(): {' '.join(_strings(info.get('arch_list'))) or 'empty'}")
            lines.append(f"cubins/PTX in libtorch_cuda.so: {_kernels(info.get('kernels'))}")
        else:
            lines.append("CPU build (torch.version.cuda is None)")
        lines.append(f"C++ compiler for torch.compile: {clean(info.get('compiler') or 'none')}")
    for name, plugin in sorted(_cuda_plugins(info).items()):
        major = name.removeprefix("cuda").removesuffix("_plugin")
        lines.append(
            f"jax-cuda{major}-plugin {clean(packages.get(f'jax-cuda{major}-plugin'))}, "
            f"jax-cuda{major}-pjrt {clean(packages.get(f'jax-cuda{major}-pjrt'))}: built against CUDA "
            f"{clean(plugin.get('cuda_build'))}, cuDNN {clean(plugin.get('cudnn_build'))}; loads CUDA "
            f"{clean(plugin.get('cuda_runtime'))}, cuDNN {clean(plugin.get('cudnn_runtime'))}"
        )
        lines.append(f"cubins/PTX in the PJRT plugin: {_kernels(plugin.get('kernels'))}")
    if "ptxas" in info:
        ptxas = _dict(info.get("ptxas"))
        lines.append(
            f"ptxas {clean(ptxas.get('version'))} (XLA's kernel compiler) targets {_span(_strings(ptxas.get('targets')))}"
        )
    gpus = [_dict(g) for g in info.get("gpus", []) if isinstance(g, dict)] if isinstance(info.get("gpus"), list) else []
    seen = ", ".join(f"{clean(g.get('name'))} (cc {clean(g.get('cc'))})" for g in gpus)
    lines.append(
        f"GPUs visible: {seen or 'none'}" + (f" (backend {clean(info['backend'])})" if "backend" in info else "")
    )
    return lines


def gpu_kernel_problem(info: dict[str, Any], capability: str) -> str | None:
    """Why this image cannot run kernels on a GPU of `capability` ("9.0"); None when it can."""
    if not re.fullmatch(r"\d+\.\d+", capability):
        return None
    if info.get("stack") == "pytorch":
        targets = _strings(info.get("arch_list"))
        if targets and not covers(targets, capability):
            return f"torch was built for {' '.join(targets)} only"
    elif info.get("stack") == "jax":
        ptxas = _strings(_dict(info.get("ptxas")).get("targets"))
        if ptxas and not covers(ptxas, capability):
            return f"the image's ptxas cannot compile for compute capability {capability}"
        for name, plugin in _cuda_plugins(info).items():
            kernels = _dict(plugin.get("kernels"))
            targets = _strings(kernels.get("sm")) + _strings(kernels.get("ptx"))
            if targets and not covers(targets, capability):
                return f"the {name.replace('_', '-')} carries kernels for {' '.join(targets)} only"
    return None


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
            for problem in problems(image.variant, info):
                print(f"  PROBLEM: {problem}", flush=True)
                failed.append(f"{image.stack}: {problem}")
    if failed:
        raise HarnessError(f"--verify: {'; '.join(failed)}; regenerate the locks (images/lock.sh) and rebuild")
