"""The environment of each framework's job, side by side, with the differing rows marked."""

from __future__ import annotations

from typing import Any

from harness.store.run_folder import Run


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, out)
    elif value is not None:
        out[prefix] = str(value)


def environment_rows(run: Run) -> tuple[list[str], list[tuple[str, list[str], bool]]]:
    """(frameworks, [(field, value per framework, differs)]) over every recorded field."""
    frameworks = [fw for fw, r in run.results.items() if r["status"] == "ok"]
    flat: dict[str, dict[str, str]] = {}
    for fw in frameworks:
        result = run.results[fw]
        fields: dict[str, str] = {}
        _flatten("", {"stack": result["stack"], "backend": result["backend"], "device": result["device"]}, fields)
        _flatten("settings", result["settings"], fields)
        env = dict(result["environment"])
        env.pop("launch", None)  # exit code and wall time are per job, not part of the stack
        _flatten("", env, fields)
        _flatten("image", result.get("image") or {}, fields)
        for key, value in fields.items():
            flat.setdefault(key, {})[fw] = value
    rows = []
    for key in sorted(flat):
        values = [flat[key].get(fw, "-") for fw in frameworks]
        # Only fields every framework records can "differ"; a jax-only flag is not a difference.
        differs = len(set(values)) > 1 and "-" not in values
        rows.append((key, values, differs))
    return frameworks, rows
