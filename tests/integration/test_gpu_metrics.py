"""The integration tier's GPU metrics, end to end through the real Prometheus (Debian's package):
a value set on the exporter is answered by an instant query with dcgm-exporter's labels; a changed
XID shows in ``changes()``; a dropped node and failing scrapes give no data; a bad query is an
error, not an empty answer; the control API works from another process as it does in this one."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from fleetwright.local.gpuexporter import (
    PCIE_REPLAY_COUNTER,
    XID_ERRORS,
    ExporterClient,
    GpuExporter,
)
from fleetwright.local.gpumetrics import EXPORTER_JOB
from fleetwright.local.prometheus import LocalPrometheus, QueryError
from tests.support.engine import unique
from tests.support.gpumetrics import wait_no_data, wait_value
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def test_prometheus_answers_a_value_set_on_the_exporter_with_dcgm_labels(
    prometheus: LocalPrometheus, exporter: GpuExporter
) -> None:
    node = unique("gpu-node")
    exporter.add_node(node, gpus=4)
    exporter.set(node, XID_ERRORS, 79, gpu=2)
    sample = wait_value(prometheus, f'{XID_ERRORS}{{Hostname="{node}"}} != 0', 79)
    assert sample.labels["gpu"] == "2"
    assert sample.labels["device"] == "nvidia2"
    assert sample.labels["job"] == EXPORTER_JOB
    assert sample.labels["UUID"].startswith("GPU-")
    assert sample.labels["modelName"]
    # Every GPU of the node is served, the others healthy.
    healthy = prometheus.query(f'{XID_ERRORS}{{Hostname="{node}"}} == 0')
    assert sorted(s.labels["gpu"] for s in healthy) == ["0", "1", "3"]


def test_an_xid_that_changes_shows_in_changes_over_the_window(
    prometheus: LocalPrometheus, exporter: GpuExporter
) -> None:
    node = unique("gpu-node")
    exporter.add_node(node, gpus=1)
    changed = f'sum(changes({XID_ERRORS}{{Hostname="{node}"}}[1m]))'
    wait_value(prometheus, changed, 0)
    exporter.set(node, XID_ERRORS, 48)
    wait_value(prometheus, changed, 1)
    exporter.set(node, PCIE_REPLAY_COUNTER, 3)
    # increase() extrapolates over the window: some value above 0, not exactly 3.
    replays = f'sum(increase({PCIE_REPLAY_COUNTER}{{Hostname="{node}"}}[1m])) > 0'
    wait_for(lambda: prometheus.query(replays), what=replays)


def test_a_dropped_node_has_no_data_while_the_others_keep_theirs(
    prometheus: LocalPrometheus, exporter: GpuExporter
) -> None:
    gone, kept = unique("gpu-node"), unique("gpu-node")
    for node in (gone, kept):
        exporter.set(node, XID_ERRORS, 13)
    wait_value(prometheus, f'count({XID_ERRORS}{{Hostname=~"{gone}|{kept}"}} == 13)', 2)
    exporter.drop(gone)
    wait_no_data(prometheus, f'{XID_ERRORS}{{Hostname="{gone}"}}')
    assert prometheus.query(f'{XID_ERRORS}{{Hostname="{kept}", gpu="0"}}')[0].value == 13


def test_failing_scrapes_mark_the_target_down_and_leave_no_data_until_they_answer(
    prometheus: LocalPrometheus, exporter: GpuExporter
) -> None:
    node = unique("gpu-node")
    exporter.set(node, XID_ERRORS, 31)
    series = f'{XID_ERRORS}{{Hostname="{node}", gpu="0"}}'
    wait_value(prometheus, series, 31)
    exporter.fail_scrapes()
    down = {exporter.address: False}
    wait_for(lambda: prometheus.targets_up(EXPORTER_JOB) == down, what="the exporter's target down")
    wait_no_data(prometheus, series)
    exporter.fail_scrapes(False)
    wait_value(prometheus, series, 31)


def test_a_query_prometheus_cannot_parse_is_an_error(prometheus: LocalPrometheus) -> None:
    with pytest.raises(QueryError, match="parse error"):
        prometheus.query(f"rate({XID_ERRORS}[1m]")


def test_the_control_api_sets_drops_and_fails_over_http(
    prometheus: LocalPrometheus, exporter: GpuExporter
) -> None:
    client = ExporterClient(exporter.url)
    node = unique("gpu-node")
    client.add_node(node, gpus=2)
    client.set(node, XID_ERRORS, 94, gpu=1)
    wait_value(prometheus, f'{XID_ERRORS}{{Hostname="{node}"}} != 0', 94)
    client.fail_scrapes()
    assert exporter.scrape() is None
    client.fail_scrapes(False)
    client.drop(node)
    assert node not in exporter.nodes


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (f"/nodes/n/gpus/0/{XID_ERRORS}", "seventy-nine", "value"),
        (f"/nodes/n/gpus/first/{XID_ERRORS}", "79", "gpu"),
        ("/nodes/n/gpus/0/has-dash", "79", "metric"),
        ("/nodes/n", "eight", "gpus"),
    ],
)
def test_the_control_api_refuses_bad_input_naming_the_field(
    exporter: GpuExporter, path: str, body: str, field: str
) -> None:
    request = urllib.request.Request(f"{exporter.url}{path}", data=body.encode(), method="PUT")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert refused.value.read().decode().startswith(f"{field}: ")
    assert "n" not in exporter.nodes
