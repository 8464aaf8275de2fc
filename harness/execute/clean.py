"""`harness clean`: remove containers, volumes and networks that a killed harness left behind (by label).

What a live harness owns (harness/core/owner.py) is kept: removing a running run's container would end
its job as "exited with code 137".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.core import owner
from harness.core.errors import HarnessError
from harness.core.schema import RUN_ID
from harness.store.images import LABEL, connect
from harness.text.escape import plain

RUN_LABEL = f"{LABEL}.run-id"
OWNER_LABEL = f"{LABEL}.{owner.LABEL_KEY}"


@dataclass
class Cleaned:
    containers: list[str]
    volumes: list[str]
    kept: list[str] = field(default_factory=list)  # names a live harness still owns
    networks: list[str] = field(default_factory=list)  # a data-parallel job's own (harness/backends/docker_ranks.py)


def clean(run_id: str | None = None) -> Cleaned:
    if run_id is not None and not RUN_ID.fullmatch(run_id):
        raise HarnessError(
            f"--run {plain(run_id)!r} is not a run id; give one (e.g. --run 20250101-120000-xla-1a2b), "
            "or leave --run out for every run"
        )
    selector = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
    cleaned = Cleaned([], [])
    with connect(timeout=60) as engine:
        for container in engine.client.containers.list(all=True, filters={"label": selector}):
            if owner.is_live(_owner(container.labels)):
                cleaned.kept.append(plain(container.name))
                continue
            container.remove(force=True)  # a stopped one, or one whose harness died
            cleaned.containers.append(plain(container.name))
        for listed, removed, options in (
            (engine.client.volumes.list, cleaned.volumes, {"force": True}),
            (engine.client.networks.list, cleaned.networks, {}),  # a network after its containers
        ):
            for thing in listed(filters={"label": selector}):
                attrs = thing.attrs if isinstance(thing.attrs, dict) else {}
                if owner.is_live(_owner(attrs.get("Labels"))):
                    cleaned.kept.append(plain(thing.name))
                    continue
                thing.remove(**options)
                removed.append(plain(thing.name))
    return cleaned


def _owner(labels: object) -> object:
    """The owner label of an object's labels as the engine reports them: anything may be planted
    there (a label is any string), so owner.is_live reads it as hostile."""
    return labels.get(OWNER_LABEL) if isinstance(labels, dict) else None
