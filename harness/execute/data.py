"""`harness data fetch|import|list`: datasets for the training suites, prepared on the host; each
returns what cli/data.py prints (a summary line, the rows of the listing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.store.data import fetch as fetching
from harness.store.data import hub, imports, store
from harness.store.data.fetch import fetchable as fetchable  # re-exported: what `data fetch` knows
from harness.store.data.sources import IMPORTED as IMPORTED  # re-exported: what `data import` stores
from harness.store.data.sources import SOURCES
from harness.text.numbers import fmt_bytes
from suites.contract.datasets import fetch_command


def _summary(written: store.Written) -> str:
    m = written.manifest
    shapes = ", ".join(f"{k} {tuple(v['shape'])}" for k, v in m["arrays"].items())
    revision = f"revision {m['revision'][:12]}, " if m.get("revision") else ""
    return (
        f"{m['name']}: {shapes}; {fmt_bytes(m['bytes'])} in {written.folder} "
        f"({revision}fingerprint {m['fingerprint'][:16]})"
    )


def fetch(name: str, data_dir: Path, *, size: int, test_fraction: float, **options: Any) -> str:
    """Download a dataset (the hub by default), check it, store it: the line that says what was stored.
    `options`: store/data/fetch.py's (source, revision, mirrors, from_dir, force, keep_archives, seed).
    `data_dir` is resolved only once the options passed, so a bad option is said first."""
    imports.check_split_options(size, test_fraction)  # before minutes of downloading, not after
    written = fetching.fetch(name, data_dir.resolve(), size=size, test_fraction=test_fraction, **options)
    skipped = written.manifest.get("skipped_count") or 0
    return _summary(written) + (f"; skipped {skipped} unreadable images" if skipped else "")


def import_images(
    name: str, path: Path, data_dir: Path, *, size: int, test_fraction: float, seed: int, force: bool
) -> str:
    """Store a folder of class-labelled images, resized: the line that says what was stored."""
    if name not in IMPORTED:
        raise HarnessError(f"{name!r} is not importable; importable: {', '.join(IMPORTED)}")
    imports.check_split_options(size, test_fraction)
    written = imports.import_catsdogs(
        path, data_dir.resolve(), size=size, test_fraction=test_fraction, seed=seed, force=force, name=name
    )
    skipped = written.manifest.get("skipped") or []
    return _summary(written) + (f"; skipped {len(skipped)} unreadable files" if skipped else "")


def listing(folder: Path) -> list[list[str]]:
    """One row per known dataset and per dataset the folder holds: present, missing (with the command
    that fetches it) or invalid (why, and the command that writes it again)."""
    found, broken = store.present(folder)
    known = sorted(set(SOURCES) | set(hub.HUB) | set(IMPORTED))
    rows: list[list[str]] = []
    for name in known + [n for n in sorted(set(found) | set(broken)) if n not in known]:
        m = found.get(name)
        if name in broken:
            rows.append([name, "invalid", "-", "-", "-", "-", f"{broken[name]}; {fetch_command(name)} --force"])
            continue
        if m is None:
            rows.append([name, "missing", "-", "-", "-", "-", fetch_command(name)])
            continue
        arrays = m["arrays"]
        # Images (N, H, W, C) counted in samples, or a text corpus (N,) counted in bytes.
        kind = "tokens" if "train_tokens" in arrays else "images"
        train, test = arrays.get(f"train_{kind}", {}).get("shape"), arrays.get(f"test_{kind}", {}).get("shape")
        shape = "text (bytes)" if kind == "tokens" else "x".join(str(d) for d in train[1:]) if train else "-"
        rows.append(
            [name, "present", f"{train[0] if train else '-'} / {test[0] if test else '-'}", shape,
             fmt_bytes(m["bytes"]), (m.get("revision") or "-")[:12], m.get("created_at", "")]
        )  # fmt: skip
    return rows
