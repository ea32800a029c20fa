"""Building blocks shared by fleetwright's resources: the model base class, local (CEL-mirrored) rules,
label selectors, tolerations, int-or-percent budgets and a subset of ``ObjectMeta``.

Owns the Kubernetes API conventions every model follows (camelCase JSON, unknown fields are errors,
strict scalar types, a description on every field). Must not do I/O or read the clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from fleetwright.api.keys import GROUP

VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# Passing this key in the validation context turns off the model-level rule check, so that
# ``fleetwright.api.validation`` can walk the tree itself and report each rule at its exact path.
SKIP_RULES_CONTEXT = "fleetwright.skipLocalRules"

# DNS-1123 label: used for package, compartment, step and window names (they end up in Job names,
# labels and workflow ids).
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A label key: optional DNS-subdomain prefix and a name part (Kubernetes validation, simplified).
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
PERCENT_PATTERN = r"^(100|[1-9][0-9]?|0)%$"

MAX_SHORT_STRING = 63
MAX_NAME = 253
MAX_LIST = 64


@dataclass(frozen=True)
class LocalRule:
    """A rule that needs only one object, enforced twice from this single definition: as a CEL
    ``x-kubernetes-validations`` entry in the generated CRD (the apiserver) and as a Python check
    (offline validation and the webhook). ``check`` returns True when the object is valid; it must
    agree with ``cel`` including how CRD defaults fill absent fields."""

    name: str
    cel: str
    message: str
    check: Callable[[Any], bool]
    field_path: str = ""
    reason: Literal[
        "FieldValueInvalid", "FieldValueRequired", "FieldValueForbidden", "FieldValueDuplicate"
    ] = "FieldValueInvalid"

    def to_crd(self) -> dict[str, str]:
        rule = {"rule": self.cel, "message": self.message, "reason": self.reason}
        if self.field_path:
            rule["fieldPath"] = self.field_path
        return rule


def exactly_one_of(name: str, first: str, second: str) -> LocalRule:
    """The rule that exactly one of two optional fields is set, from their Python names: the CEL and
    the message name them as the JSON does (camelCase), the check reads them as None or not."""
    first_json, second_json = to_camel(first), to_camel(second)
    return LocalRule(
        name=name,
        cel=f"has(self.{first_json}) != has(self.{second_json})",
        message=f"exactly one of {first_json} or {second_json} must be set",
        check=lambda m: (getattr(m, first) is None) != (getattr(m, second) is None),
    )


class ApiModel(BaseModel):
    """Base for every API object: camelCase JSON, strict types, unknown fields are errors."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
        frozen=False,
        validate_default=False,
    )

    # Rules local to one object of this class; see LocalRule.
    local_rules: ClassVar[tuple[LocalRule, ...]] = ()

    @model_validator(mode="after")
    def _check_local_rules(self, info: ValidationInfo) -> ApiModel:
        if isinstance(info.context, dict) and info.context.get(SKIP_RULES_CONTEXT):
            return self
        broken = [rule for rule in self.local_rules if not rule.check(self)]
        if broken:
            raise ValueError("; ".join(f"{r.message} (rule {r.name})" for r in broken))
        return self

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        # The same rules become the CRD's x-kubernetes-validations (see fleetwright.api.crdgen).
        schema = handler(core_schema)
        rules = cls.__dict__.get("local_rules", ())
        if rules:
            target = handler.resolve_ref_schema(schema)
            target["x-kubernetes-validations"] = [rule.to_crd() for rule in rules]
        return schema

    def broken_rules(self) -> Iterator[LocalRule]:
        """The local rules this object breaks (never raises)."""
        for rule in self.local_rules:
            try:
                ok = rule.check(self)
            except Exception:  # a buggy check must not crash validation; report it as broken
                ok = False
            if not ok:
                yield rule

    def to_k8s(self) -> dict[str, Any]:
        """The object as the Kubernetes API expects it: camelCase keys, no nulls."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# ---------------------------------------------------------------------------------------------
# Int or percent (maxUnavailable and friends)


def _check_int_or_percent(value: object) -> int | str:
    # A plain validator (not ``int | str``) so errors carry no union-branch segments in their path.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be an integer or a percentage string such as '10%'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("must be >= 0")
        return value
    if not re.fullmatch(PERCENT_PATTERN, value):
        raise ValueError(
            f"must be an integer or a percentage between 0% and 100% such as '10%', got {value!r}"
        )
    return value


IntOrPercent = Annotated[
    int | str,
    PlainValidator(_check_int_or_percent),
    # Value validations on an int-or-string apply to its string form only; a pattern (not CEL) keeps
    # the apiserver's CEL cost budget free for the rules that need it.
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": PERCENT_PATTERN,
            "maxLength": 4,
        }
    ),
]
"""A node count (``3``) or a percentage of the targeted nodes (``"10%"``), like Kubernetes'
``IntOrString``. Percentages round down, but never below one node."""


# ---------------------------------------------------------------------------------------------
# Label selectors and tolerations


SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelectorRequirement(ApiModel):
    """One requirement of a label selector (metav1.LabelSelectorRequirement)."""

    key: str = Field(
        description="The label key the requirement applies to.",
        min_length=1,
        max_length=317,
        pattern=LABEL_KEY_PATTERN,
    )
    operator: SelectorOperator = Field(
        description="How the key relates to the values: In, NotIn, Exists or DoesNotExist.",
    )
    values: list[Annotated[str, Field(max_length=MAX_SHORT_STRING)]] = Field(
        default_factory=list,
        description="Label values. Required (non-empty) for In and NotIn, forbidden for Exists and "
        "DoesNotExist.",
        max_length=MAX_LIST,
    )

    local_rules = (
        LocalRule(
            name="selector-values-required",
            cel="!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
            message="values must be non-empty when operator is In or NotIn",
            field_path=".values",
            reason="FieldValueRequired",
            check=lambda m: m.operator not in ("In", "NotIn") or len(m.values) > 0,
        ),
        LocalRule(
            name="selector-values-forbidden",
            cel="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || "
            "size(self.values) == 0",
            message="values must be empty when operator is Exists or DoesNotExist",
            field_path=".values",
            reason="FieldValueForbidden",
            check=lambda m: m.operator not in ("Exists", "DoesNotExist") or len(m.values) == 0,
        ),
    )


class LabelSelector(ApiModel):
    """A label query over nodes or pods (metav1.LabelSelector). All requirements are ANDed."""

    match_labels: dict[
        Annotated[str, Field(max_length=317, pattern=LABEL_KEY_PATTERN)],
        Annotated[str, Field(max_length=MAX_SHORT_STRING, pattern=LABEL_VALUE_PATTERN)],
    ] = Field(
        default_factory=dict,
        description="Labels that must all be present with exactly these values.",
        max_length=MAX_LIST,
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list,
        description="Set-based requirements; all must hold.",
        max_length=MAX_LIST,
    )

    def is_empty(self) -> bool:
        """True when the selector has no requirement (Kubernetes would read it as 'everything')."""
        return not self.match_labels and not self.match_expressions


SELECTOR_NONEMPTY_CEL = (
    "(has({s}.matchLabels) && size({s}.matchLabels) > 0) || "
    "(has({s}.matchExpressions) && size({s}.matchExpressions) > 0)"
)


def selector_nonempty_cel(path: str) -> str:
    """CEL: the selector at ``path`` (e.g. ``self.nodeSelector``) has at least one requirement."""
    return SELECTOR_NONEMPTY_CEL.format(s=path)


def selector_required(name: str, empty_would: str) -> LocalRule:
    """The rule that a model's ``selector`` has at least one requirement."""
    return LocalRule(
        name=name,
        cel=selector_nonempty_cel("self.selector"),
        message=f"selector must have at least one requirement (an empty selector would {empty_would})",
        field_path=".selector",
        reason="FieldValueRequired",
        check=lambda m: not m.selector.is_empty(),
    )


class Toleration(ApiModel):
    """A toleration added to fleetwright's package pods (corev1.Toleration)."""

    key: str = Field(
        default="",
        description="The taint key the toleration matches. Must be set: an empty key with Exists would "
        "tolerate every taint, and the drain would then evict fleetwright's own pods (NodeWright #296).",
        max_length=317,
    )
    operator: Literal["Exists", "Equal"] = Field(
        default="Equal",
        description="Exists matches any value of the key; Equal matches only `value`.",
    )
    value: str = Field(
        default="",
        description="The taint value to match when operator is Equal.",
        max_length=MAX_SHORT_STRING,
    )
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="",
        description="The taint effect to match; empty matches all effects.",
    )
    toleration_seconds: int | None = Field(
        default=None,
        description="For NoExecute: how long the pod stays bound after the taint appears; absent means "
        "forever.",
        ge=0,
    )

    local_rules = (
        LocalRule(
            name="toleration-no-wildcard",
            cel="has(self.key) && size(self.key) > 0",
            message="key must be set: a wildcard toleration would make the drain evict fleetwright's own "
            "pods",
            field_path=".key",
            reason="FieldValueRequired",
            check=lambda m: len(m.key) > 0,
        ),
        LocalRule(
            name="toleration-exists-no-value",
            cel="!has(self.operator) || self.operator != 'Exists' || !has(self.value) || size(self.value) "
            "== 0",
            message="value must be empty when operator is Exists",
            field_path=".value",
            reason="FieldValueForbidden",
            check=lambda m: m.operator != "Exists" or m.value == "",
        ),
    )


# ---------------------------------------------------------------------------------------------
# Metadata


class ObjectMeta(BaseModel):
    """The subset of metav1.ObjectMeta fleetwright reads. Other metadata is ignored (the apiserver
    owns it), so objects read from the cluster parse unchanged."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    name: str = Field(
        default="", description="The object's name (cluster-scoped, unique per kind).", max_length=MAX_NAME
    )
    generation: int | None = Field(
        default=None, description="Sequence number of the desired state; set by the apiserver."
    )
    resource_version: str | None = Field(
        default=None, description="Opaque version for optimistic concurrency."
    )
    uid: str | None = Field(default=None, description="Unique id assigned by the apiserver.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels of the object.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations of the object.")
    creation_timestamp: datetime | None = Field(default=None, description="When the object was created.")
    deletion_timestamp: datetime | None = Field(default=None, description="When deletion was requested.")
    finalizers: list[str] = Field(default_factory=list, description="Finalizers holding the object.")
