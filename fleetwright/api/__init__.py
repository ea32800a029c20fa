"""Pydantic models for fleetwright's resources and payloads. Pure: no I/O, no clock.

``nodeprofile`` and ``deploymentpolicy`` are the two custom resources (the single source of truth
for their CRDs, see ``crdgen``); ``common`` and ``status`` hold shared building blocks;
``validation`` checks what needs more than one object at a time.
"""

from fleetwright.api.common import (
    API_VERSION,
    VERSION,
    IntOrPercent,
    LabelSelector,
    resolve_int_or_percent,
)
from fleetwright.api.conditions import Condition
from fleetwright.api.deploymentpolicy import (
    BUILTIN_POLICY,
    ApprovalStep,
    BatchesStep,
    CanaryStep,
    Compartment,
    DeploymentPolicy,
    DeploymentPolicySpec,
    FailurePolicy,
    MaintenanceWindow,
    SoakStep,
    Step,
)
from fleetwright.api.keys import GROUP
from fleetwright.api.nodeprofile import (
    ConfigInterrupt,
    DrainSpec,
    Interrupt,
    NodeProfile,
    NodeProfileSpec,
    NodeProfileStatus,
    Package,
    PackageDependency,
)

__all__ = [
    "API_VERSION",
    "BUILTIN_POLICY",
    "GROUP",
    "VERSION",
    "ApprovalStep",
    "BatchesStep",
    "CanaryStep",
    "Compartment",
    "Condition",
    "ConfigInterrupt",
    "DeploymentPolicy",
    "DeploymentPolicySpec",
    "DrainSpec",
    "FailurePolicy",
    "IntOrPercent",
    "Interrupt",
    "LabelSelector",
    "MaintenanceWindow",
    "NodeProfile",
    "NodeProfileSpec",
    "NodeProfileStatus",
    "Package",
    "PackageDependency",
    "SoakStep",
    "Step",
    "resolve_int_or_percent",
]
