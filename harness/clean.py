"""`harness clean`: remove containers and volumes that a killed harness left behind (by label)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.images import LABEL, connect

RUN_LABEL = f"{LABEL}.run-id"


@dataclass
class Cleaned:
    containers: list[str]
    volumes: list[str]


def clean(run_id: str | None = None) -> Cleaned:
    selector = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
    with connect(timeout=60) as engine:
        containers = engine.client.containers.list(all=True, filters={"label": selector})
        names = []
        for container in containers:
            container.remove(force=True)  # a running one is killed first
            names.append(container.name)
        volumes = engine.client.volumes.list(filters={"label": selector})
        volume_names = []
        for volume in volumes:
            volume.remove(force=True)
            volume_names.append(volume.name)
    return Cleaned(names, volume_names)
