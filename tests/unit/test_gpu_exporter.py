"""The GPU exporter's series: dcgm-exporter's names, types and labels, per node and GPU, in the
text format Prometheus parses; healthy until set; dropped nodes and failing scrapes; bad input
named."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetwright.local.gpuexporter import (
    HEALTH_COUNTERS,
    PCIE_REPLAY_COUNTER,
    ROW_REMAP_FAILURE,
    UNCORRECTABLE_REMAPPED_ROWS,
    XID_ERRORS,
    GpuExporter,
)

pytestmark = pytest.mark.unit

DCGM_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}


def families(exporter: GpuExporter) -> dict[str, tuple[str, list[tuple[dict[str, str], float]]]]:
    text = exporter.scrape()
    assert text is not None
    return {
        family.name: (family.type, [(sample.labels, sample.value) for sample in family.samples])
        for family in text_string_to_metric_families(text)
    }


def test_a_node_serves_every_health_series_of_each_gpu_at_zero_with_dcgm_labels() -> None:
    exporter = GpuExporter()
    exporter.add_node("gpu-node-0001", gpus=2, model="NVIDIA A100-SXM4-80GB")
    served = families(exporter)
    assert set(served) == set(HEALTH_COUNTERS)
    assert {name: kind for name, (kind, _) in served.items()} == {
        XID_ERRORS: "gauge",
        UNCORRECTABLE_REMAPPED_ROWS: "counter",
        ROW_REMAP_FAILURE: "gauge",
        PCIE_REPLAY_COUNTER: "counter",
    }
    samples = served[XID_ERRORS][1]
    assert [labels["gpu"] for labels, _ in samples] == ["0", "1"]
    assert all(set(labels) == DCGM_LABELS and value == 0 for labels, value in samples)
    first, second = (labels for labels, _ in samples)
    assert first["Hostname"] == "gpu-node-0001"
    assert first["device"] == "nvidia0"
    assert first["modelName"] == "NVIDIA A100-SXM4-80GB"
    assert first["UUID"].startswith("GPU-")
    assert first["UUID"] != second["UUID"]
    assert first["pci_bus_id"] != second["pci_bus_id"]


def test_set_changes_one_gpus_series_and_serves_a_new_node_healthy_otherwise() -> None:
    exporter = GpuExporter()
    exporter.set("gpu-node-0002", XID_ERRORS, 79, gpu=3)
    exporter.set("gpu-node-0002", PCIE_REPLAY_COUNTER, 12.5, gpu=0)
    served = families(exporter)
    xid = {labels["gpu"]: value for labels, value in served[XID_ERRORS][1]}
    assert xid == {str(gpu): (79 if gpu == 3 else 0) for gpu in range(8)}
    replays = {labels["gpu"]: value for labels, value in served[PCIE_REPLAY_COUNTER][1]}
    assert replays["0"] == 12.5
    assert replays["1"] == 0


def test_a_renamed_field_can_be_served_too() -> None:
    exporter = GpuExporter()
    exporter.set("gpu-node-0003", "DCGM_EXP_XID_ERRORS_COUNT", 2, gpu=1)
    kind, samples = families(exporter)["DCGM_EXP_XID_ERRORS_COUNT"]
    assert kind == "gauge"
    assert [(labels["gpu"], value) for labels, value in samples] == [("1", 2)]


def test_a_dropped_node_serves_nothing_until_set_again() -> None:
    exporter = GpuExporter()
    exporter.add_node("kept", gpus=1)
    exporter.set("gone", XID_ERRORS, 48)
    exporter.drop("gone")
    hosts = {labels["Hostname"] for labels, _ in families(exporter)[XID_ERRORS][1]}
    assert hosts == {"kept"}
    exporter.set("gone", ROW_REMAP_FAILURE, 1)
    served = families(exporter)
    assert {labels["Hostname"] for labels, _ in served[XID_ERRORS][1]} == {"kept", "gone"}
    # Back without the value it had before it was dropped.
    assert all(value == 0 for labels, value in served[XID_ERRORS][1] if labels["Hostname"] == "gone")


def test_failing_scrapes_answer_nothing_until_answering_again() -> None:
    exporter = GpuExporter()
    exporter.add_node("gpu-node-0004", gpus=1)
    exporter.fail_scrapes()
    assert exporter.scrape() is None
    exporter.fail_scrapes(False)
    assert XID_ERRORS in families(exporter)
    assert exporter.scrapes == 2


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda e: e.set("n", "1bad", 1), "metric"),
        (lambda e: e.set("n", "has-dash", 1), "metric"),
        (lambda e: e.set("n", XID_ERRORS, 1, gpu=-1), "gpu"),
        (lambda e: e.add_node("n", gpus=0), "gpus"),
    ],
)
def test_bad_input_is_refused_naming_the_field(call: object, field: str) -> None:
    exporter = GpuExporter()
    with pytest.raises(ValueError, match=f"^{field}:"):
        call(exporter)  # type: ignore[operator]
    assert exporter.nodes == []
