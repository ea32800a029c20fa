"""Every field of the CRDs' spec is driven through the rollout engine by some workflow- or
integration-tier test, and every enum value is (so no field or value can again be accepted without
behaviour behind it).

How it cannot pass vacuously: the record is what actually reached the engine during this session
(``tests/support/fieldcoverage.py`` wraps ``convert.rollout_spec``, the one door from the API
models into the engine, and records only while a workflow or integration test runs); a field
counts only with a value that is neither empty nor its schema default, so objects read back from
the API server (which carry every default) cover nothing by themselves; the list of fields comes
from the generated CRDs, so a new field is required the moment it is added. It runs last
(``tests/conftest.py`` orders it), and only judges a session that ran every workflow and
integration test file with nothing deselected; a partial run (``-m integration``, one file) is
skipped with the reason, since it cannot know what the other tests set.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fieldcoverage import KINDS, RECORDER, requirements

pytestmark = pytest.mark.integration

TESTS = Path(__file__).resolve().parents[1]
EXERCISING_DIRS = ("workflow", "integration")

# What no workflow or integration test drives yet, measured by a run of both tiers whole. The list
# may only shrink: a new gap fails the test, and so does an entry here that a test now covers.
KNOWN_GAPS = frozenset(
    {
        "DeploymentPolicy.spec.compartments[].failure.action",
        "DeploymentPolicy.spec.compartments[].failure.action=halt",
        "DeploymentPolicy.spec.compartments[].failure.action=rollback",
        "DeploymentPolicy.spec.compartments[].failure.failureThreshold",
        "DeploymentPolicy.spec.compartments[].failure.maxFailedNodes",
        "DeploymentPolicy.spec.compartments[].maxUnavailable",
        "DeploymentPolicy.spec.compartments[].name",
        "DeploymentPolicy.spec.compartments[].selector.matchExpressions[].key",
        "DeploymentPolicy.spec.compartments[].selector.matchExpressions[].operator",
        "DeploymentPolicy.spec.compartments[].selector.matchExpressions[].operator=DoesNotExist",
        "DeploymentPolicy.spec.compartments[].selector.matchExpressions[].operator=Exists",
        "DeploymentPolicy.spec.compartments[].selector.matchExpressions[].operator=In",
        "DeploymentPolicy.spec.compartments[].selector.matchExpressions[].operator=NotIn",
        "DeploymentPolicy.spec.compartments[].selector.matchExpressions[].values",
        "DeploymentPolicy.spec.compartments[].selector.matchLabels",
        "DeploymentPolicy.spec.compartments[].steps[].approval.timeoutSeconds",
        "DeploymentPolicy.spec.compartments[].steps[].batches.batchThreshold",
        "DeploymentPolicy.spec.compartments[].steps[].batches.delta",
        "DeploymentPolicy.spec.compartments[].steps[].batches.growthFactor",
        "DeploymentPolicy.spec.compartments[].steps[].batches.initial",
        "DeploymentPolicy.spec.compartments[].steps[].batches.maxBatchSize",
        "DeploymentPolicy.spec.compartments[].steps[].batches.resetBatchStateOnCompletion",
        "DeploymentPolicy.spec.compartments[].steps[].batches.safetyLimit",
        "DeploymentPolicy.spec.compartments[].steps[].batches.soakSeconds",
        "DeploymentPolicy.spec.compartments[].steps[].batches.strategy",
        "DeploymentPolicy.spec.compartments[].steps[].batches.strategy=exponential",
        "DeploymentPolicy.spec.compartments[].steps[].batches.strategy=fixed",
        "DeploymentPolicy.spec.compartments[].steps[].batches.strategy=linear",
        "DeploymentPolicy.spec.compartments[].steps[].canary.count",
        "DeploymentPolicy.spec.compartments[].steps[].canary.selector.matchExpressions[].key",
        "DeploymentPolicy.spec.compartments[].steps[].canary.selector.matchExpressions[].operator",
        "DeploymentPolicy.spec.compartments[].steps[].canary.selector.matchExpressions[].operator=DoesNotExist",
        "DeploymentPolicy.spec.compartments[].steps[].canary.selector.matchExpressions[].operator=Exists",
        "DeploymentPolicy.spec.compartments[].steps[].canary.selector.matchExpressions[].operator=In",
        "DeploymentPolicy.spec.compartments[].steps[].canary.selector.matchExpressions[].operator=NotIn",
        "DeploymentPolicy.spec.compartments[].steps[].canary.selector.matchExpressions[].values",
        "DeploymentPolicy.spec.compartments[].steps[].canary.selector.matchLabels",
        "DeploymentPolicy.spec.compartments[].steps[].name",
        "DeploymentPolicy.spec.compartments[].steps[].soak.durationSeconds",
        "DeploymentPolicy.spec.compartments[].steps[].soak.healthGate.nodeConditions[].status",
        "DeploymentPolicy.spec.compartments[].steps[].soak.healthGate.nodeConditions[].status=False",
        "DeploymentPolicy.spec.compartments[].steps[].soak.healthGate.nodeConditions[].status=True",
        "DeploymentPolicy.spec.compartments[].steps[].soak.healthGate.nodeConditions[].status=Unknown",
        "DeploymentPolicy.spec.compartments[].steps[].soak.healthGate.nodeConditions[].type",
        "DeploymentPolicy.spec.compartments[].steps[].soak.healthGate.nodeReady",
        "DeploymentPolicy.spec.failure.failureThreshold",
        "DeploymentPolicy.spec.steps[].approval.timeoutSeconds",
        "DeploymentPolicy.spec.steps[].batches.batchThreshold",
        "DeploymentPolicy.spec.steps[].batches.delta",
        "DeploymentPolicy.spec.steps[].batches.maxBatchSize",
        "DeploymentPolicy.spec.steps[].batches.resetBatchStateOnCompletion",
        "DeploymentPolicy.spec.steps[].batches.safetyLimit",
        "DeploymentPolicy.spec.steps[].batches.soakSeconds",
        "DeploymentPolicy.spec.steps[].batches.strategy=linear",
        "DeploymentPolicy.spec.steps[].canary.selector.matchExpressions[].key",
        "DeploymentPolicy.spec.steps[].canary.selector.matchExpressions[].operator",
        "DeploymentPolicy.spec.steps[].canary.selector.matchExpressions[].operator=DoesNotExist",
        "DeploymentPolicy.spec.steps[].canary.selector.matchExpressions[].operator=Exists",
        "DeploymentPolicy.spec.steps[].canary.selector.matchExpressions[].operator=In",
        "DeploymentPolicy.spec.steps[].canary.selector.matchExpressions[].operator=NotIn",
        "DeploymentPolicy.spec.steps[].canary.selector.matchExpressions[].values",
        "DeploymentPolicy.spec.steps[].canary.selector.matchLabels",
        "DeploymentPolicy.spec.steps[].soak.healthGate.nodeConditions[].status",
        "DeploymentPolicy.spec.steps[].soak.healthGate.nodeConditions[].status=False",
        "DeploymentPolicy.spec.steps[].soak.healthGate.nodeConditions[].status=True",
        "DeploymentPolicy.spec.steps[].soak.healthGate.nodeConditions[].status=Unknown",
        "DeploymentPolicy.spec.steps[].soak.healthGate.nodeConditions[].type",
        "DeploymentPolicy.spec.steps[].soak.healthGate.nodeReady",
        "DeploymentPolicy.spec.windows[].durationSeconds",
        "DeploymentPolicy.spec.windows[].schedule",
        "DeploymentPolicy.spec.windows[].timeZone",
        "NodeProfile.spec.additionalTolerations[].effect",
        "NodeProfile.spec.additionalTolerations[].effect=",
        "NodeProfile.spec.additionalTolerations[].effect=NoExecute",
        "NodeProfile.spec.additionalTolerations[].effect=NoSchedule",
        "NodeProfile.spec.additionalTolerations[].effect=PreferNoSchedule",
        "NodeProfile.spec.additionalTolerations[].key",
        "NodeProfile.spec.additionalTolerations[].operator",
        "NodeProfile.spec.additionalTolerations[].operator=Equal",
        "NodeProfile.spec.additionalTolerations[].operator=Exists",
        "NodeProfile.spec.additionalTolerations[].tolerationSeconds",
        "NodeProfile.spec.additionalTolerations[].value",
        "NodeProfile.spec.drain.deleteEmptyDirData",
        "NodeProfile.spec.drain.disableEviction",
        "NodeProfile.spec.drain.gracePeriodSeconds",
        "NodeProfile.spec.drain.onTimeout",
        "NodeProfile.spec.drain.onTimeout=wait",
        "NodeProfile.spec.drain.timeoutSeconds",
        "NodeProfile.spec.nodeSelector.matchExpressions[].key",
        "NodeProfile.spec.nodeSelector.matchExpressions[].operator",
        "NodeProfile.spec.nodeSelector.matchExpressions[].operator=DoesNotExist",
        "NodeProfile.spec.nodeSelector.matchExpressions[].operator=Exists",
        "NodeProfile.spec.nodeSelector.matchExpressions[].operator=In",
        "NodeProfile.spec.nodeSelector.matchExpressions[].operator=NotIn",
        "NodeProfile.spec.nodeSelector.matchExpressions[].values",
        "NodeProfile.spec.packages[].configInterrupts[].interrupt.services",
        "NodeProfile.spec.packages[].configInterrupts[].interrupt.type=noop",
        "NodeProfile.spec.packages[].configInterrupts[].interrupt.type=restartAllServices",
        "NodeProfile.spec.packages[].configInterrupts[].interrupt.type=restart_all_services",
        "NodeProfile.spec.packages[].configInterrupts[].interrupt.type=service",
        "NodeProfile.spec.packages[].digest",
        "NodeProfile.spec.packages[].env[].valueFrom.configMapKeyRef.key",
        "NodeProfile.spec.packages[].env[].valueFrom.configMapKeyRef.name",
        "NodeProfile.spec.packages[].env[].valueFrom.configMapKeyRef.optional",
        "NodeProfile.spec.packages[].env[].valueFrom.secretKeyRef.key",
        "NodeProfile.spec.packages[].env[].valueFrom.secretKeyRef.name",
        "NodeProfile.spec.packages[].env[].valueFrom.secretKeyRef.optional",
        "NodeProfile.spec.packages[].interrupt.services",
        "NodeProfile.spec.packages[].interrupt.type=noop",
        "NodeProfile.spec.packages[].interrupt.type=restartAllServices",
        "NodeProfile.spec.packages[].interrupt.type=restart_all_services",
        "NodeProfile.spec.packages[].interrupt.type=service",
        "NodeProfile.spec.packages[].resources.cpuLimit",
        "NodeProfile.spec.packages[].resources.cpuRequest",
        "NodeProfile.spec.packages[].resources.memoryLimit",
        "NodeProfile.spec.packages[].resources.memoryRequest",
        "NodeProfile.spec.packages[].uninstall.apply",
        "NodeProfile.spec.podNonInterruptLabels.matchExpressions[].key",
        "NodeProfile.spec.podNonInterruptLabels.matchExpressions[].operator",
        "NodeProfile.spec.podNonInterruptLabels.matchExpressions[].operator=DoesNotExist",
        "NodeProfile.spec.podNonInterruptLabels.matchExpressions[].operator=Exists",
        "NodeProfile.spec.podNonInterruptLabels.matchExpressions[].operator=In",
        "NodeProfile.spec.podNonInterruptLabels.matchExpressions[].operator=NotIn",
        "NodeProfile.spec.podNonInterruptLabels.matchExpressions[].values",
        "NodeProfile.spec.podNonInterruptLabels.matchLabels",
    }
)


def _partial_run(session: pytest.Session) -> list[str]:
    expected = {p for d in EXERCISING_DIRS for p in (TESTS / d).glob("test_*.py")}
    ran = {item.path for item in session.items}
    reasons = [f"{p.relative_to(TESTS)} not in the session" for p in sorted(expected - ran)]
    reasons += [
        f"{nodeid} deselected"
        for nodeid in sorted(RECORDER.deselected)
        if nodeid.split("/")[1] in EXERCISING_DIRS
    ]
    return reasons


def test_every_crd_spec_field_and_enum_value_reaches_the_engine(request: pytest.FixtureRequest) -> None:
    partial = _partial_run(request.session)
    if partial:
        pytest.skip("needs every workflow and integration test in the session: " + "; ".join(partial[:5]))
    wanted = set().union(*(requirements(kind) for kind in KINDS))
    missing = wanted - RECORDER.seen
    new_gaps, closed = sorted(missing - KNOWN_GAPS), sorted(KNOWN_GAPS - missing)
    report = (
        "CRD fields or enum values no workflow/integration test drives:\n"
        + "\n".join(new_gaps)
        + "\n\nKNOWN_GAPS entries a test now covers (remove them):\n"
        + "\n".join(closed)
    )
    assert (new_gaps, closed) == ([], []), report
