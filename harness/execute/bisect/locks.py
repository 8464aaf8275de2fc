"""Generated locks: the stack's own lock with one package pinned to another version, by hash.

A bisect changes exactly one package; every other pin (and hash) is the stack's, so a version that
needs other dependencies fails the venv build with pip's message instead of silently moving them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.core.errors import HarnessError
from harness.store.images import _MANYLINUX, normalize, pip_sources, sha256_file, wheel_fits
from harness.text.escape import plain

VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}")  # PEP 440-ish, and never "." or ".."
PACKAGE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")  # PEP 503/508 project name
_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==")
MAX_VERSIONS = 32
DOWNLOAD_TIMEOUT_S = 600.0


def check_package(name: str) -> str:
    if not PACKAGE.fullmatch(name):
        raise HarnessError(f"--package {plain(name)!r} is not a package name (letters, digits, '.', '_', '-')")
    return name


def check_version(version: str) -> str:
    if not VERSION.fullmatch(version):
        raise HarnessError(
            f"version {plain(version)!r} is not a version (up to 64 of letters, digits and . + ! _ -, e.g. 1.26.4)"
        )
    return version


def parse_versions(text: str) -> list[str]:
    versions = [check_version(v.strip()) for v in text.split(",") if v.strip()]
    if len(versions) < 2:
        raise HarnessError(f"--versions {plain(text)!r} names fewer than two versions; give e.g. 1.0,1.1,2.0")
    if len(versions) > MAX_VERSIONS:
        raise HarnessError(f"--versions names {len(versions)} versions; at most {MAX_VERSIONS} per bisect")
    if len(set(versions)) != len(versions):
        raise HarnessError(f"--versions {plain(text)!r} names a version twice; list each once")
    return versions


def download_command(package: str, version: str, dest: Path, find_links: list[Path], no_index: bool) -> list[str]:
    """pip download of the version's wheel for the images' platform: CPython 3.11, x86_64 glibc."""
    platforms = [arg for tag in [*_MANYLINUX, "any"] for arg in ("--platform", tag)]
    cmd = [sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", "3.11", "--implementation", "cp", *platforms, "-d", str(dest)]
    return cmd + ["--disable-pip-version-check", "--quiet", *pip_sources(find_links, no_index)]


def wheel_hashes(folder: Path, package: str) -> list[str]:
    """sha256 of every wheel in `folder` of this package that fits the images."""
    found = []
    for path in sorted(folder.iterdir()):
        fits = wheel_fits(path.name)
        # pip downloaded `package==version` alone (--no-deps): the name is the check left to make.
        if fits is not None and fits[0] == normalize(package):
            found.append(sha256_file(path))
    return found


def fetch_hashes(package: str, version: str, find_links: list[Path], no_index: bool) -> list[str]:
    """Downloads the version's wheel (pip's cache makes a second time cheap) and returns its hashes."""
    with tempfile.TemporaryDirectory(prefix="harness-bisect-") as tmp:
        cmd = download_command(package, version, Path(tmp), find_links, no_index)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"pip download {package}=={version} took over {DOWNLOAD_TIMEOUT_S:g} s") from None
        hashes = wheel_hashes(Path(tmp), package)
    if proc.returncode != 0 or not hashes:
        lines = [line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        why = lines[-1] if lines else "pip found no fitting wheel"
        raise HarnessError(
            f"no wheel of {package}=={version} for CPython 3.11 on x86_64 Linux ({plain(why)}); "
            "check the version, or give --find-links DIR"
        )
    return hashes


def generate_lock(base: str, package: str, version: str, hashes: list[str], note: str = "") -> str:
    """`base` with `package`'s entry (its `==` line and continuation lines) replaced by the new pin.

    A package the base does not lock is appended. Comment lines (`# via ...`) stay where they are.
    """
    check_package(package)
    check_version(version)
    if not hashes or not all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes):
        raise HarnessError(f"{package}=={version}: expected sha256 hashes of its wheels")
    entry = [f"{package}=={version} \\"] + [f"    --hash=sha256:{h} \\" for h in hashes]
    entry[-1] = entry[-1].removesuffix(" \\")
    entry.append(f"    # pinned by harness bisect{': ' + note if note else ''}")
    lines = iter(base.splitlines())
    out: list[str] = []
    replaced = False
    for line in lines:
        match = _ENTRY.match(line)
        if match and normalize(match.group(1)) == normalize(package):
            while line.rstrip().endswith("\\"):  # its continuation lines, up to the last line of all
                line = next(lines, "")
            out.extend(entry)
            replaced = True
        else:
            out.append(line)
    if not replaced:
        out.extend(entry)
    return "\n".join(out) + "\n"
