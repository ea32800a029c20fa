"""The parts of a NodeProfile package's spec besides its image and interrupts: the packages it
depends on, the environment and resources of its stage pods (a node gate's validation containers
take the same two) and its uninstall settings. Must not do I/O.
"""

from __future__ import annotations

from pydantic import Field

from fleetwright.api.common import (
    DNS_LABEL_PATTERN,
    MAX_NAME,
    MAX_SHORT_STRING,
    ApiModel,
    LocalRule,
    exactly_one_of,
)

CONFIG_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
QUANTITY_MAX = 64


class PackageDependency(ApiModel):
    """A package of the same NodeProfile that must be complete on the node first."""

    name: str = Field(
        description="Name of another package in this profile's packages list.",
        max_length=MAX_SHORT_STRING,
        pattern=DNS_LABEL_PATTERN,
    )
    version: str = Field(
        description="The exact version of that package (must equal its version field).",
        min_length=1,
        max_length=128,
    )


class KeySelector(ApiModel):
    """A key in a Secret or ConfigMap in fleetwright's namespace."""

    name: str = Field(description="Name of the Secret or ConfigMap.", min_length=1, max_length=MAX_NAME)
    key: str = Field(
        description="The key to read.", min_length=1, max_length=MAX_NAME, pattern=CONFIG_KEY_PATTERN
    )
    optional: bool = Field(default=False, description="Whether a missing object or key is allowed.")


class EnvVarSource(ApiModel):
    """Where an environment variable's value comes from; exactly one source."""

    secret_key_ref: KeySelector | None = Field(
        default=None, description="A key of a Secret (the way to pass secrets)."
    )
    config_map_key_ref: KeySelector | None = Field(default=None, description="A key of a ConfigMap.")

    local_rules = (exactly_one_of("env-source-exactly-one", "secret_key_ref", "config_map_key_ref"),)


class EnvVar(ApiModel):
    """An environment variable for the package's stage pods (the orchestrator's own SKYHOOK_* variables
    are appended after these and win on a clash)."""

    name: str = Field(
        description="Variable name.", min_length=1, max_length=MAX_NAME, pattern=ENV_NAME_PATTERN
    )
    value: str | None = Field(
        default=None, description="Literal value. Exclusive with valueFrom.", max_length=32768
    )
    value_from: EnvVarSource | None = Field(
        default=None, description="Read the value from a Secret or ConfigMap key."
    )

    local_rules = (
        LocalRule(
            name="env-value-or-valuefrom",
            cel="!(has(self.value) && has(self.valueFrom))",
            message="value and valueFrom are mutually exclusive",
            field_path=".valueFrom",
            reason="FieldValueForbidden",
            check=lambda m: m.value is None or m.value_from is None,
        ),
    )


class PackageResources(ApiModel):
    """CPU and memory for the package's stage pods (Kubernetes quantities). Requests must not exceed
    limits."""

    cpu_request: str | None = Field(
        default=None, description="CPU request, e.g. `100m`.", max_length=QUANTITY_MAX
    )
    cpu_limit: str | None = Field(default=None, description="CPU limit, e.g. `1`.", max_length=QUANTITY_MAX)
    memory_request: str | None = Field(
        default=None, description="Memory request, e.g. `64Mi`.", max_length=QUANTITY_MAX
    )
    memory_limit: str | None = Field(
        default=None, description="Memory limit, e.g. `256Mi`.", max_length=QUANTITY_MAX
    )


class Uninstall(ApiModel):
    """Explicit uninstall: NodeWright never uninstalls implicitly (not on removal, not on downgrade)."""

    enabled: bool = Field(
        default=False,
        description="Whether the package may be uninstalled at all (its image implements the uninstall "
        "stage).",
    )
    apply: bool = Field(
        default=False,
        description="Uninstall the package from the targeted nodes now (requires enabled).",
    )

    local_rules = (
        LocalRule(
            name="uninstall-apply-needs-enabled",
            cel="!has(self.apply) || !self.apply || (has(self.enabled) && self.enabled)",
            message="apply requires enabled: true",
            field_path=".apply",
            check=lambda m: not m.apply or m.enabled,
        ),
    )
