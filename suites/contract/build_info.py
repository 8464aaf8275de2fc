"""What a stack was built for, read inside its image or environment, with or without a GPU.

    python -m suites.contract.build_info jax|pytorch|numpy      # one JSON object on stdout

`harness build --verify` and `harness doctor` send this file's source into a container as
`python -c` (so it must stay standard library only at import time, and self-contained); on a
machine without Docker it runs as the module above. Reported per stack: the framework and its
CUDA packages' versions; the CUDA and cuDNN versions the build was compiled against and the ones
it loads; the GPU architectures it carries kernels for (PyTorch's arch list; for JAX the cubins
and PTX inside the CUDA plugin, read from its fat binaries, and the targets of the `ptxas` that
XLA compiles its own kernels with); and the GPUs it sees (none on a CPU machine).
"""

from __future__ import annotations

import collections
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import mmap
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

# A fat binary (what nvcc embeds in a .so) starts with this magic; each entry after its 16-byte
# header is a PTX text (kind 1) or a cubin (kind 2) for one architecture (arch = major*10+minor).
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)
_ENTRY = struct.Struct("<HHIQ")  # kind, flags, header size, payload size
_ARCH_OFFSET = 28


def fatbin_archs(path: str | Path) -> dict[str, list[str]]:
    """{"sm": cubin targets, "ptx": PTX targets} of every fat binary embedded in a shared library."""
    found: dict[str, set[int]] = collections.defaultdict(set)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        pos = data.find(FATBIN_MAGIC)
        while pos != -1:
            version, header, size = struct.unpack_from("<HHQ", data, pos + 4)
            end = pos + header + size
            if version != 1 or header != 16 or end > len(data):
                pos = data.find(FATBIN_MAGIC, pos + 4)
                continue
            entry = pos + header
            while entry + 32 <= end:
                kind, _, entry_header, payload = _ENTRY.unpack_from(data, entry)
                if kind not in (1, 2) or entry_header < 32:
                    break
                arch = struct.unpack_from("<I", data, entry + _ARCH_OFFSET)[0]
                found["ptx" if kind == 1 else "sm"].add(arch)
                entry += entry_header + payload
            pos = data.find(FATBIN_MAGIC, end)
    return {
        "sm": [f"sm_{a}" for a in sorted(found["sm"])],
        "ptx": [f"compute_{a}" for a in sorted(found["ptx"])],
    }


def covers(targets: list[str], capability: str) -> bool:
    """Whether kernels for `targets` ("sm_80", "compute_90", ...) run on compute capability "8.6".

    A cubin runs on its own major version at the same or a higher minor (sm_80 on 8.6), as does a
    family target ("sm_100f"); an arch-specific one ("sm_90a") only on 9.0. Plain PTX is compiled
    by the driver for any capability at or above its own.
    """
    major, minor = (int(x) for x in capability.split("."))
    for target in targets:
        match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", target)
        if match is None:
            continue
        kind, t_major, t_minor, suffix = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        if suffix == "a":  # architecture-specific features: that exact capability only
            fits = (t_major, t_minor) == (major, minor)
        elif suffix == "f" or kind == "sm":  # a family, or a cubin: same major, same or higher minor
            fits = t_major == major and t_minor <= minor
        else:  # plain PTX: compiled by the driver for any capability at or above its own
            fits = (t_major, t_minor) <= (major, minor)
        if fits:
            return True
    return False


def _packages(pattern: str) -> dict[str, str]:
    found = {}
    for dist in metadata.distributions():
        name = str(dist.metadata["Name"] or "")
        if re.fullmatch(pattern, name.lower().replace("_", "-")):
            found[name.lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def _version_number(value: Any, kind: str) -> str | None:
    """CUDA's 12090 -> 12.9, cuDNN's 90800 -> 9.8.0 (and 8902 -> 8.9.2); None when unknown."""
    if not isinstance(value, int) or value <= 0:
        return None
    if kind == "cuda":
        return f"{value // 1000}.{(value % 1000) // 10}"
    if value >= 90000:  # cuDNN 9: major*10000 + minor*100 + patch
        return f"{value // 10000}.{(value % 10000) // 100}.{value % 100}"
    return f"{value // 1000}.{(value % 1000) // 100}.{value % 100}"  # cuDNN 8: major*1000 + minor*100


def _ptxas(folder: Path) -> dict[str, Any] | None:
    tool = folder / "ptxas"
    if not tool.is_file():
        return None
    try:
        version = subprocess.run([str(tool), "--version"], capture_output=True, text=True, timeout=60).stdout
        usage = subprocess.run([str(tool), "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": str(error)}
    release = re.search(r"V(\d+\.\d+\.\d+)", version)
    targets = sorted(set(re.findall(r"'(sm_\d+[af]?)'", usage)), key=lambda t: (int(re.sub(r"\D", "", t)), t))
    return {"version": release.group(1) if release else None, "targets": targets}


def _jax() -> dict[str, Any]:
    import jax
    import jaxlib

    info: dict[str, Any] = {
        "framework": f"jax {jax.__version__}",
        "jaxlib": jaxlib.__version__,
        "packages": _packages(r"jax|jaxlib|jax-cuda\d+-(plugin|pjrt)|nvidia-.*"),
    }
    plugins = sorted(n for n in info["packages"] if re.fullmatch(r"jax-cuda\d+-plugin", n))
    for name in plugins:
        major = re.sub(r"\D", "", name)
        try:
            versions = importlib.import_module(f"jax_cuda{major}_plugin._versions")
        except ImportError as error:
            info[f"cuda{major}_plugin"] = {"error": str(error)}
            continue

        def read(fn: str, kind: str, module: Any = versions) -> str | None:
            try:
                return _version_number(getattr(module, fn)(), kind)
            except Exception:  # the *_get_version calls need the library, some need a driver
                return None

        info[f"cuda{major}_plugin"] = {
            "cuda_build": read("cuda_runtime_build_version", "cuda"),
            "cuda_runtime": read("cuda_runtime_get_version", "cuda"),
            "cudnn_build": read("cudnn_build_version", "cudnn"),
            "cudnn_runtime": read("cudnn_get_version", "cudnn"),
            "cuda_driver": read("cuda_driver_get_version", "cuda"),
        }
        pjrt = importlib.util.find_spec(f"jax_plugins.xla_cuda{major}")
        if pjrt is not None and pjrt.submodule_search_locations:
            folder = Path(next(iter(pjrt.submodule_search_locations)))
            libraries = sorted(folder.glob("*.so"))
            if libraries:
                info[f"cuda{major}_plugin"]["kernels"] = fatbin_archs(libraries[0])
        nvcc = importlib.util.find_spec("nvidia.cuda_nvcc")
        if nvcc is not None and nvcc.submodule_search_locations:
            info["ptxas"] = _ptxas(Path(next(iter(nvcc.submodule_search_locations))) / "bin")
    try:
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
    except RuntimeError:
        gpus = []
    info["backend"] = jax.default_backend()
    info["gpus"] = [{"name": d.device_kind, "cc": getattr(d, "compute_capability", None)} for d in gpus]
    return info


def _arch_list(torch: Any) -> list[str]:
    """torch.cuda.get_arch_list(). Some releases (2.10 among them) return [] when no GPU is
    visible; the same flags are then read where it reads them (torch._C._cuda_getArchFlags)."""
    listed = list(torch.cuda.get_arch_list())
    if listed or torch.version.cuda is None:
        return listed
    flags = getattr(torch._C, "_cuda_getArchFlags", lambda: None)()
    return str(flags).split() if flags else []


def _pytorch() -> dict[str, Any]:
    import torch

    cuda_built = torch.version.cuda is not None
    info: dict[str, Any] = {
        "framework": f"torch {torch.__version__}",
        "cuda": torch.version.cuda,
        "cudnn": _version_number(torch.backends.cudnn.version() if cuda_built else None, "cudnn"),
        "arch_list": _arch_list(torch),
        "packages": _packages(r"torch|triton|nvidia-.*|cuda-.*"),
        "compiler": shutil.which("g++") or shutil.which("c++"),
    }
    if cuda_built:
        try:
            info["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:
            info["nccl"] = None
        library = Path(torch.__file__).parent / "lib" / "libtorch_cuda.so"
        if library.is_file():
            info["kernels"] = fatbin_archs(library)
    available = torch.cuda.is_available()
    info["gpus"] = [
        {"name": torch.cuda.get_device_name(i), "cc": "{}.{}".format(*torch.cuda.get_device_capability(i))}
        for i in range(torch.cuda.device_count() if available else 0)
    ]
    return info


def _numpy() -> dict[str, Any]:
    import numpy

    return {"framework": f"numpy {numpy.__version__}", "packages": _packages(r"numpy|scipy"), "gpus": []}


PROBES = {"jax": _jax, "pytorch": _pytorch, "numpy": _numpy}


def describe(stack: str) -> dict[str, Any]:
    info = PROBES[stack]()
    info["stack"] = stack
    info["python"] = sys.version.split()[0]
    return info


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in PROBES:
        print(f"usage: python -m suites.contract.build_info {{{','.join(PROBES)}}}", file=sys.stderr)
        return 2
    print(json.dumps(describe(argv[0])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
