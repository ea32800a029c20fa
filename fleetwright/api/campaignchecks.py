"""The Campaign checks CEL cannot do, on a parsed spec (beyond its profile's, which are a
NodeProfile's): check names unique, and every stage's fleet gate naming a defined check
(``policychecks.check_names``, as a DeploymentPolicy's gates). Never raises, never does I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetwright.api.campaign import CampaignSpec
from fleetwright.api.policychecks import check_names

if TYPE_CHECKING:
    from fleetwright.api.validation import Result


def check_campaign_spec(spec: CampaignSpec, result: Result) -> None:
    named = [
        (f"spec.stages[{i}].checks[{j}]", name, "stage-unknown-check")
        for i, stage in enumerate(spec.stages)
        for j, name in enumerate(stage.checks)
    ]
    check_names(spec.health_checks, named, result)
