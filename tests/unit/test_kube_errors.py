"""The Kubernetes adapter maps API failures onto the retryable/permanent taxonomy."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from fleetwright.errors import ForbiddenError, NodeGoneError, NotFoundError, PermanentError, RetryableError
from fleetwright.kube.errors import classified, classify

pytestmark = pytest.mark.unit


def api_error(status: int, message: str = "boom") -> ApiException:
    error = ApiException(status=status, reason="Reason")
    error.body = json.dumps({"kind": "Status", "message": message})
    return error


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (403, ForbiddenError),
        (404, NotFoundError),
        (409, RetryableError),
        (429, RetryableError),
        (500, RetryableError),
        (503, RetryableError),
        (400, PermanentError),
        (422, PermanentError),
    ],
)
def test_status_codes_map_to_the_taxonomy(status: int, kind: type[Exception]) -> None:
    error = classify(api_error(status, "nodes is forbidden"), "get node x")
    assert isinstance(error, kind)
    assert "get node x: nodes is forbidden" in str(error)


def test_classified_translates_and_chains() -> None:
    with pytest.raises(ForbiddenError) as caught, classified("list pods"):
        raise api_error(403)
    assert isinstance(caught.value.__cause__, ApiException)


def test_unreachable_server_is_retryable() -> None:
    with pytest.raises(RetryableError, match="unreachable"), classified("get node"):
        raise ConnectionRefusedError("connection refused")


def test_a_404_about_the_node_itself_says_the_node_is_gone() -> None:
    error = classify(api_error(404, 'nodes "n1" not found'), "cordon node n1", NodeGoneError)
    assert isinstance(error, NodeGoneError)
    assert isinstance(error, NotFoundError)  # still permanent: retrying cannot bring it back
    assert error.reason == "NodeGone"
    # Only the 404 changes meaning; the rest of the taxonomy is the same for node calls.
    assert isinstance(classify(api_error(503), "cordon node n1", NodeGoneError), RetryableError)
    with pytest.raises(NodeGoneError), classified("patch node n1 metadata", not_found=NodeGoneError):
        raise api_error(404)
