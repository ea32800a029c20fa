"""The fleetwright process's settings: one pydantic model, read from the environment
(``FLEETWRIGHT_*``) or a JSON file. The Helm chart's values schema is generated from it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fleetwright.workflows.payloads import EngineSettings


class WorkerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    temporal_address: str = Field(default="127.0.0.1:7233", description="Temporal frontend host:port.")
    temporal_namespace: str = Field(default="default", description="Temporal namespace.")
    task_queue: str = Field(default="fleetwright", description="Task queue of the workflows and activities.")
    kubeconfig: Path | None = Field(
        default=None, description="Kubeconfig path; in-cluster config when unset."
    )
    max_concurrent_activities: int = Field(default=200, ge=1, description="Activity slots (threads).")
    engine: EngineSettings = Field(default_factory=EngineSettings, description="Rollout engine knobs.")

    @classmethod
    def load(cls, path: Path | None = None) -> WorkerSettings:
        """From a JSON file (``FLEETWRIGHT_SETTINGS`` or ``path``), then ``FLEETWRIGHT_*`` overrides."""
        data: dict[str, object] = {}
        source = path or (
            Path(os.environ["FLEETWRIGHT_SETTINGS"]) if "FLEETWRIGHT_SETTINGS" in os.environ else None
        )
        if source is not None:
            data.update(json.loads(source.read_text()))
        for field in ("temporal_address", "temporal_namespace", "task_queue", "kubeconfig"):
            value = os.environ.get(f"FLEETWRIGHT_{field.upper()}")
            if value:
                data[field] = value
        return cls.model_validate(data)
