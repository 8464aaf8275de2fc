"""The first GPU session, prepared: every GPU path checked in minutes, every result kept.

A lent GPU machine (one H100 or H200) comes by chance, for 15 minutes in all, with no network and no
Docker; its Python 3.12 has CUDA builds of PyTorch, JAX, Flax and Optax but not all of the harness's
host dependencies (pydantic and docker are missing). So the session is two steps:

    # here, where PyPI is reachable: cp312 manylinux wheels of every host dependency (a few MB)
    python benchmarks/gpu_session.py wheels build/gpu-wheels

    # there (device tool: carry ["build/gpu-wheels"], timeout_s 600):
    python3 benchmarks/gpu_session.py run "$OUT" --wheels build/gpu-wheels --device gpu

`run` installs the harness's requirements offline into a temporary prefix, pip deciding: what this
interpreter already satisfies stays as it is (the frameworks keep their own dependencies), what it lacks
or has too old comes from the wheels. It checks that the harness imports,
records `nvidia-smi` and both frameworks' build info, then runs the steps below in order of value, each
through the real CLI and the local backend, within a budget it enforces itself (`--budget`, seconds;
a step that would outlast it is interrupted as Ctrl-C would, and keeps what it finished). After each
step its run folders and logs are packed into one archive in OUT (at most 8 files of 16 MiB come back
from that machine): `session.log`, `session.json` and one `NN-step.tar.gz` per step that ran.

`--size tiny --device cpu` is the rehearsal (tests/test_gpu_session.py): the same script end to end
at tiny sizes, in a Python 3.12 environment that holds nothing but the GPU machine's packages
(benchmarks/gpu_machine_packages.txt).

Standard library only: it runs before the harness's dependencies are installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PART = 16 * 2**20  # the most one file may hold to come back from the device machine
KEPT_LOG = 2 * 2**20  # of a log longer than this, the archive keeps the end
WHEELS_CAP = 40 * 2**20  # the working tree that travels is capped at 64 MiB, the wheels included
RESERVE = 25.0  # seconds kept back from the budget to pack the last archive
GRACE = 20.0  # seconds an interrupted step gets to write what it finished
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")

# Each step: (name, frameworks it wants, harness arguments per size). Most valuable first: a session
# cut short still brings back the ceilings and the selftest. The ceilings come first because the
# selftest judges "% of achievable" against them: it finds them in the session's cache home instead
# of calibrating the machine a second time (61 s of an H100 session did that before).
SIZES = ("full", "tiny")
# Data-parallel runs (issue 59) ride in the mnist-gpt step: at most 8 files come back from the device
# machine (session.json, session.log, one archive a step), so no step of their own. On a one-GPU
# machine they are not applicable (`not_applicable`), on the CPU rehearsal two processes share the cores.
DATA_PARALLEL = {
    "full": [["run", "--suite", "gpt", "-p", "devices=2", "-p", "preset=gpt2-small", "-p", "batch_size=16",
              "-p", "dp_intervals=6", "-p", "dp_steps=10"],
             ["run", "--suite", "mnist", "-p", "dataset=synthetic", "-p", "devices=2", "-p", "batch_size=256"]],
    "tiny": [["run", "--suite", "gpt", "--smoke", "-p", "devices=2"]],
}  # fmt: skip
STEPS: list[tuple[str, tuple[str, ...], dict[str, list[list[str]]]]] = [
    ("calibrate", ("numpy", "jax", "pytorch"), {
        "full": [["calibrate"]],
        "tiny": [["calibrate", "--smoke"]],
    }),
    ("selftest", ("numpy", "jax", "flax", "pytorch"), {
        "full": [["selftest"]],
        "tiny": [["selftest", "--suites", "xla,jit"]],  # mnist: step 4
    }),
    ("xla", ("jax", "pytorch"), {
        "full": [["run", "--suite", "xla", "-p", "matrix_size=8192"]],
        "tiny": [["run", "--suite", "xla", "-p", "matrix_size=64", "--repeat", "3"]],
    }),
    # gpt first (it had never run on a GPU): the GPT-2-small preset in bf16 (tokens/s and MFU, issue 38),
    # 10 intervals of 20 steps.
    ("mnist-gpt", ("flax", "pytorch"), {
        "full": [["run", "--suite", "gpt", "--precision", "bf16", "-p", "preset=gpt2-small", "-p", "batch_size=16",
                  "-p", "steps=20", "-p", "intervals=10", "-p", "eval_windows=16"]]
                + [["run", "--suite", "mnist", "-p", "dataset=synthetic", "-p", "epochs=2", "--precision", p]
                   for p in ("fp32", "bf16")] + DATA_PARALLEL["full"],
        "tiny": [["run", "--suite", "mnist", "-p", "dataset=synthetic", "-p", "epochs=2", "-p", "train_samples=256",
                  "-p", "test_samples=128", "--precision", p] for p in ("fp32", "bf16")]
                + [["run", "--suite", "gpt", "--smoke", "--precision", "bf16"]] + DATA_PARALLEL["tiny"],
    }),
    # Inference (issue 60) rides here for the same 8-file cap: GPT-2-small generation with a KV cache in
    # float32 and bf16 (time to first token, decode tokens/s against the weights' bandwidth bound), and
    # resnet18's latency percentiles and throughput sweep.
    ("resnet18", ("flax", "pytorch"), {
        "full": [["run", "--suite", "resnet18", "-p", "dataset=synthetic", "-p", "epochs=3"]]
                + [["run", "--suite", "gpt", "-p", "mode=generate", "-p", "preset=gpt2-small", "-p", "prompt_len=128",
                    "-p", "new_tokens=128", "--precision", p] for p in ("fp32", "bf16")]
                + [["run", "--suite", "resnet18", "-p", "dataset=synthetic", "-p", "mode=infer"]],
        "tiny": [["run", "--suite", "resnet18", "-p", "dataset=synthetic", "-p", "epochs=2", "-p", "train_samples=64",
                  "-p", "test_samples=32", "-p", "batch_size=16", "-p", "image_size=16"],
                 ["run", "--suite", "gpt", "--smoke", "-p", "mode=generate"],
                 ["run", "--suite", "resnet18", "--smoke", "-p", "mode=infer"]],
    }),
    ("jit-pc", ("jax", "pytorch"), {
        "full": [["run", "--suite", "jit"], ["run", "--suite", "pc", "-p", "epochs=3"]],
        "tiny": [["run", "--suite", "jit", "-p", "max_length=100000", "-p", "total=1000000"],
                 ["run", "--suite", "pc", "-p", "epochs=2", "-p", "train_samples=512"]],
    }),
]  # fmt: skip
IMPORTS = {"numpy": "numpy", "jax": "jax", "flax": "flax", "pytorch": "torch"}


class Refused(Exception):
    """A session that cannot start: one line, exit 2."""


# -- here: the wheels ------------------------------------------------------------------------------------


def host_requirements() -> list[str]:
    """The harness's own requirements (pyproject's dependencies and its `gpu` extra), read, not copied:
    a dependency added there travels without anyone editing this script."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["gpu"]]


def download_wheels(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none", *platforms,
           "-d", str(folder), *host_requirements()]  # fmt: skip
    subprocess.run(cmd, check=True)
    wheels = sorted(folder.glob("*.whl"))
    size = sum(w.stat().st_size for w in wheels)
    if size > WHEELS_CAP:
        raise Refused(
            f"{folder} holds {size / 2**20:.1f} MiB of wheels, over {WHEELS_CAP // 2**20} MiB: they would not travel"
        )
    return wheels


# -- there: install what is missing, then the steps ------------------------------------------------------


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(path: Path) -> str:
    """The distribution a wheel or a .dist-info folder is of, canonical (`typing_extensions` -> `typing-extensions`)."""
    return canonical(path.name.split("-", 1)[0])


def install(wheels: Path, prefix: Path) -> list[str]:
    """The harness's requirements, offline from `wheels` into `prefix`, with pip deciding: what this
    interpreter already satisfies is left as it is (the GPU machine's frameworks keep their own
    dependencies), what it lacks or has too old comes from the wheels. Returns what was installed."""
    if not list(wheels.glob("*.whl")):
        raise Refused(
            f"no wheels in {wheels}; run `python benchmarks/gpu_session.py wheels {wheels}` where PyPI is reachable"
        )
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), "--prefix",
           str(prefix), "--no-compile", "--no-cache-dir", "--disable-pip-version-check", *host_requirements()]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = next((line for line in reversed(proc.stderr.splitlines()) if line.startswith("ERROR")), "pip failed")
        raise Refused(f"the harness's requirements do not install from {wheels} offline ({last.strip()}); "
                      f"download them again with `python benchmarks/gpu_session.py wheels {wheels}` where PyPI is reachable")  # fmt: skip
    return sorted(wheel_name(p) for p in prefix.rglob("*.dist-info"))


def site_folder(prefix: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))


def import_check(env: dict[str, str]) -> None:
    """The harness's CLI and the modules its commands import late, in a fresh process: a host dependency
    missing from the wheels is named here, before any step."""
    probe = "import harness.cli.main, harness.core.result_types, harness.store.images, harness.backends.local, docker, pydantic"
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Refused(
            f"the harness does not import with these wheels ({last}); add it to pyproject.toml's dependencies"
        )


def installed_frameworks() -> list[str]:
    return [fw for fw, module in IMPORTS.items() if importlib.util.find_spec(module) is not None]


def _record(log: io.TextIOBase, title: str, cmd: list[str], env: dict[str, str]) -> None:
    log.write(f"\n## {title}: {' '.join(cmd)}\n")
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
        log.write(proc.stdout[-20000:] + proc.stderr[-4000:])
    except (OSError, subprocess.TimeoutExpired) as error:
        log.write(f"not recorded: {error}\n")
    log.flush()


def command(args: list[str], device: str, frameworks: list[str], results: Path) -> list[str]:
    """The CLI call of one step: selftest picks its frameworks itself; run and calibrate get the
    installed ones the step wants, through the local backend (that machine has no Docker)."""
    cmd = [sys.executable, "-m", "harness.cli", *args, "--device", device]
    if args[0] != "calibrate":  # calibrate keeps its ceilings in the cache home, not a run folder
        cmd += ["--results-dir", str(results)]
    if args[0] != "selftest":
        cmd += ["--frameworks", ",".join(frameworks), "--backend", "local", "-q"]
    return cmd


def gpus_needed(args: list[str]) -> int:
    """The GPUs a command's jobs need: a data-parallel run's `devices`, else one."""
    for value in args:
        if value.startswith("devices="):
            return max(1, int(value.split("=", 1)[1]))
    return 1


def not_applicable(args: list[str], device: str, gpus: int) -> str | None:
    """Why a command cannot run on this machine (it needs more GPUs than it has), or None. On the CPU
    rehearsal every command runs: a data-parallel run's processes share the cores."""
    need = gpus_needed(args)
    if device != "gpu" or gpus >= need:
        return None
    return f"{gpus} GPU{'s' if gpus != 1 else ''} here; this run needs {need}"


def gpu_count(env: dict[str, str]) -> int:
    """GPUs the machine shows (`nvidia-smi --list-gpus`: one line each); 0 where it cannot tell."""
    try:
        listed = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, env=env, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in listed.stdout.splitlines()) if listed.returncode == 0 else 0


def run_timed(cmd: list[str], env: dict[str, str], log_path: Path, seconds: float) -> tuple[int, bool]:
    """(exit code, interrupted by the budget). A step past its time gets SIGINT, as Ctrl-C: the harness
    stops, marks the rest interrupted and keeps what finished; then GRACE seconds, then SIGKILL."""
    with log_path.open("ab") as sink:
        sink.write(f"$ {' '.join(cmd)}\n".encode())
        sink.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        try:
            return proc.wait(timeout=max(seconds, 1.0)), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                return proc.wait(timeout=GRACE), True
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                return proc.wait(), True


def pack(step_dir: Path, archive: Path) -> int:
    """One archive of a step's run folders and logs, under PART: a long log keeps its end, and if the
    archive is still too large the logs are left out (the results never are)."""
    for keep_logs in (True, False):
        with tarfile.open(archive, "w:gz") as tar:
            for path in sorted(step_dir.rglob("*")):
                if not path.is_file() or path.is_symlink():
                    continue
                name = str(path.relative_to(step_dir.parent))
                is_log = path.suffix == ".log" or "logs" in path.parts
                if is_log and not keep_logs:
                    continue
                size = path.stat().st_size
                if is_log and size > KEPT_LOG:
                    with path.open("rb") as f:
                        f.seek(size - KEPT_LOG)
                        data = f.read()
                    info = tarfile.TarInfo(name + ".tail")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                else:
                    tar.add(path, arcname=name, recursive=False)
        if archive.stat().st_size < PART:
            return archive.stat().st_size
    archive.unlink()
    raise Refused(f"{step_dir.name}'s results alone are over {PART // 2**20} MiB packed")


def save(out: Path, summary: dict[str, Any]) -> None:
    (out / "session.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def session(out: Path, wheels: Path, device: str, size: str, budget: float, only: list[str] | None = None) -> int:
    start = time.monotonic()
    deadline = start + budget
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-session-"))
    prefix = work / "prefix"
    try:
        chosen = install(wheels, prefix)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site_folder(prefix)), str(REPO)]),
                   PYTHONUNBUFFERED="1", HARNESS_CACHE_HOME=str(work / "home"), HARNESS_BACKEND="local")  # fmt: skip
        import_check(env)
    except Refused:
        shutil.rmtree(work, ignore_errors=True)
        raise
    have = installed_frameworks()
    summary: dict[str, Any] = {"device": device, "size": size, "budget_s": budget, "python": sys.version.split()[0],
                               "installed": chosen, "frameworks": have, "steps": []}  # fmt: skip
    with (out / "session.log").open("w", encoding="utf-8") as log:
        log.write(
            f"# GPU session: device {device}, size {size}, budget {budget:.0f} s, python {sys.version.split()[0]}\n"
        )
        log.write(f"installed from the wheels: {', '.join(chosen) or 'nothing'}\n")
        log.write(f"frameworks here: {', '.join(have)}\n")
        _record(log, "nvidia-smi", ["nvidia-smi"], env)
        for stack in ("pytorch", "jax"):
            _record(log, f"build info {stack}", [sys.executable, "-m", "suites.contract.build_info", stack], env)
        numbered = list(enumerate(STEPS, start=1))
        if only is not None:  # the steps named, in the order named (a second call after a cut-short first)
            numbered = [next(n for n in numbered if n[1][0] == name) for name in only]
        gpus = gpu_count(env) if device == "gpu" else 0
        for number, (name, wants, sizes) in numbered:
            entry: dict[str, Any] = {"step": name, "commands": [], "exit_codes": [], "interrupted": False}
            summary["steps"].append(entry)
            frameworks = [fw for fw in wants if fw in have and not (device == "gpu" and fw == "numpy")]
            step_dir = work / "steps" / f"{number:02d}-{name}"
            step_dir.mkdir(parents=True)
            for args in sizes[size]:
                why = not_applicable(args, device, gpus)
                if why is not None:
                    entry.setdefault("not_applicable", []).append(f"{' '.join(args)}: {why}")
                    log.write(f"\n## step {number} {name}: not applicable: {' '.join(args)}: {why}\n")
                    continue
                left = deadline - time.monotonic() - RESERVE
                if left < 10:
                    entry["skipped"] = "the budget was spent"
                    break
                if args[0] != "selftest" and not frameworks:
                    entry["skipped"] = f"none of {', '.join(wants)} is installed"
                    break
                cmd = command(args, device, frameworks, step_dir / "results")
                began = time.monotonic()
                code, cut = run_timed(cmd, env, step_dir / "step.log", left)
                entry["commands"].append(" ".join(cmd[3:]))
                entry["exit_codes"].append(code)
                entry["seconds"] = round(entry.get("seconds", 0.0) + time.monotonic() - began, 1)
                entry["interrupted"] = entry["interrupted"] or cut
                log.write(f"\n## step {number} {name}: exit {code}{' (budget: interrupted)' if cut else ''}, "
                          f"{time.monotonic() - began:.0f} s: {' '.join(cmd[3:])}\n")  # fmt: skip
                log.flush()
            if name == "calibrate":  # the ceilings live in the cache home: keep its files with the step
                for found in (work / "home").rglob("*.json"):
                    kept = step_dir / "cache-home" / found.relative_to(work / "home")
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(found, kept)
            if entry["commands"]:
                entry["archive"] = f"{number:02d}-{name}.tar.gz"
                entry["archive_bytes"] = pack(step_dir, out / entry["archive"])
            save(out, summary)  # after every step: a call cut short still brings back what ran
        summary["seconds"] = round(time.monotonic() - start, 1)
        log.write(f"\nsession: {summary['seconds']:.0f} s of a {budget:.0f} s budget\n")
    save(out, summary)
    shutil.rmtree(work, ignore_errors=True)
    finished = all(
        s.get("skipped") is None and not s["interrupted"] and all(c in (0, 3) for c in s["exit_codes"])
        for s in summary["steps"]
    )
    return 0 if finished else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("wheels", help="download the host dependencies' cp312 wheels (here, with PyPI)")
    get.add_argument("folder", type=Path)
    go = sub.add_parser("run", help="install what is missing and run the steps (there)")
    go.add_argument("out", type=Path, help="where the archives and the session log go ($OUT)")
    go.add_argument("--wheels", type=Path, required=True)
    go.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    go.add_argument("--size", choices=SIZES, default="full")
    go.add_argument("--budget", type=float, default=420.0, help="seconds for the whole session (default 420)")
    go.add_argument(
        "--steps", help=f"only these steps, in this order (comma-separated: {', '.join(n for n, _, _ in STEPS)})"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "wheels":
            wheels = download_wheels(args.folder)
            print(f"{len(wheels)} wheels, {sum(w.stat().st_size for w in wheels) / 2**20:.1f} MiB in {args.folder}")
            return 0
        if not 60 <= args.budget <= 3600:
            raise Refused(f"--budget {args.budget:g} is outside 60..3600 seconds")
        only = None
        if args.steps is not None:
            only = [name.strip() for name in args.steps.split(",") if name.strip()]
            unknown = [name for name in only if name not in {n for n, _, _ in STEPS}]
            if unknown or not only or len(set(only)) != len(only):
                names = ", ".join(n for n, _, _ in STEPS)
                raise Refused(f"--steps {args.steps!r}: name each step once, from {names}")
        return session(args.out, args.wheels, args.device, args.size, args.budget, only)
    except Refused as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as error:
        print(f"error: {' '.join(map(str, error.cmd[:4]))} ... exited {error.returncode}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
