"""The controller's list+watch loop (``kube.listwatch``) against a scripted apiserver: after a watch
answers 410 Gone it relists at once (no error backoff), delivers the fresh snapshot and resumes
watching from the new list's resourceVersion; other failures back off and relist too."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from fleetwright.kube import listwatch
from fleetwright.kube.listwatch import ListWatch, WatchEvent

pytestmark = pytest.mark.unit


def node(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}}


GONE = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}


@dataclass
class Response:
    """A watch response as the client returns it unread: the events as JSON lines, in odd-sized
    chunks (a line may span chunks)."""

    events: list[dict[str, Any]]
    closed: bool = False

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        body = b"".join(json.dumps(event).encode() + b"\n" for event in self.events)
        for start in range(0, len(body), 7):
            yield body[start : start + 7]

    def close(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        pass


@dataclass
class ScriptedServer:
    """Lists return the next snapshot; each watch plays the next script: its events (a 410 Gone
    arrives as an ERROR event, as the apiserver sends it), or an error raised by the call."""

    lists: list[dict[str, Any]]
    watches: list[tuple[list[dict[str, Any]], Exception | None]]
    stop: threading.Event
    list_calls: int = 0
    list_options: list[dict[str, Any]] = field(default_factory=list)
    watched_from: list[str] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)

    def list_node(self, **options: Any) -> Any:
        """The raw response the loop reads (it asks for JSON, not the client's models)."""
        if options.get("watch"):
            return self._watch(**options)
        self.list_calls += 1
        self.list_options.append(options)
        return SimpleNamespace(
            data=json.dumps(self.lists[min(self.list_calls, len(self.lists)) - 1]).encode()
        )

    def _watch(self, *, resource_version: str, _preload_content: bool, **_options: Any) -> Response:
        assert _preload_content is False  # read as JSON lines, never as the client's models
        self.watched_from.append(resource_version)
        if len(self.watched_from) > len(self.watches):
            self.stop.set()  # the script is over: the loop ends within this window
            return Response([])
        events, error = self.watches[len(self.watched_from) - 1]
        if error is not None:
            raise error
        self.responses.append(Response(events))
        return self.responses[-1]


@pytest.fixture
def stop() -> threading.Event:
    return threading.Event()


def run(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> tuple[ListWatch, list[WatchEvent]]:
    class FakeClient:
        @staticmethod
        def CoreV1Api(_api: Any) -> ScriptedServer:
            return server

    monkeypatch.setattr(listwatch, "client", FakeClient)
    delivered: list[WatchEvent] = []
    watcher = ListWatch(api=object(), kind="nodes", deliver=delivered.append, stop=server.stop, **options)  # type: ignore[arg-type]
    watcher.run()
    return watcher, delivered


def test_a_410_gone_relists_at_once_and_resumes_from_the_new_version(
    stop: threading.Event, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    added = {"type": "ADDED", "object": node("n2", "7")}
    modified = {"type": "MODIFIED", "object": node("n3", "21")}
    server = ScriptedServer(
        lists=[
            {"metadata": {"resourceVersion": "5"}, "items": [node("n1", "4")]},
            {"metadata": {"resourceVersion": "20"}, "items": [node("n1", "4"), node("n3", "19")]},
        ],
        watches=[
            ([added, GONE], None),
            ([modified], None),
        ],
        stop=stop,
    )
    with caplog.at_level(logging.WARNING, logger=listwatch.__name__):
        watcher, delivered = run(server, monkeypatch)
    assert server.list_calls == 2
    # The first watch from the first list; after 410 a relist, then watches from ITS version on.
    assert server.watched_from == ["5", "20", "21"]
    assert [e.type for e in delivered] == ["SYNC", "ADDED", "SYNC", "MODIFIED"]
    assert [o["metadata"]["name"] for o in delivered[2].items] == ["n1", "n3"]
    assert delivered[3].obj == node("n3", "21")
    assert caplog.records == []  # a 410 is routine, not a failure
    assert watcher._backoff == 0.0
    assert all(response.closed for response in server.responses)  # no connection left open


def test_a_410_answer_to_the_watch_request_relists_at_once_too(
    stop: threading.Event, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server = ScriptedServer(
        lists=[
            {"metadata": {"resourceVersion": "5"}, "items": []},
            {"metadata": {"resourceVersion": "20"}, "items": []},
        ],
        watches=[([], ApiException(status=410, reason="Expired: too old resource version"))],
        stop=stop,
    )
    with caplog.at_level(logging.WARNING, logger=listwatch.__name__):
        watcher, delivered = run(server, monkeypatch)
    assert server.watched_from == ["5", "20"]
    assert [e.type for e in delivered] == ["SYNC", "SYNC"]
    assert caplog.records == []
    assert watcher._backoff == 0.0


def test_any_other_watch_failure_backs_off_and_relists(
    stop: threading.Event, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server = ScriptedServer(
        lists=[
            {"metadata": {"resourceVersion": "5"}, "items": []},
            {"metadata": {"resourceVersion": "9"}, "items": []},
        ],
        watches=[([], ApiException(status=500, reason="boom"))],
        stop=stop,
    )
    monkeypatch.setattr(ListWatch, "max_backoff_seconds", 0.01)
    with caplog.at_level(logging.WARNING, logger=listwatch.__name__):
        _, delivered = run(server, monkeypatch)
    assert server.list_calls == 2
    assert server.watched_from == ["5", "9"]
    assert [e.type for e in delivered] == ["SYNC", "SYNC"]
    assert "relisting" in caplog.text


def test_a_list_is_read_in_pages_and_delivered_as_one_slimmed_snapshot(
    stop: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    fat = {"metadata": {"name": "n1", "resourceVersion": "4"}, "spec": {"big": "x" * 100}}
    added = {"type": "ADDED", "object": {**node("n3", "31"), "spec": {"big": "y"}}}
    server = ScriptedServer(
        lists=[
            {"metadata": {"resourceVersion": "30", "continue": "page-2"}, "items": [fat]},
            {"metadata": {"resourceVersion": "30"}, "items": [node("n2", "29")]},
        ],
        watches=[([added], None)],
        stop=stop,
    )
    _, delivered = run(server, monkeypatch, slim=lambda obj: {"metadata": obj["metadata"]})
    assert [o.get("_continue") for o in server.list_options] == [None, "page-2"]
    assert {o["limit"] for o in server.list_options} == {listwatch.LIST_PAGE}
    assert server.watched_from[0] == "30"
    assert [e.type for e in delivered] == ["SYNC", "ADDED"]
    assert delivered[0].items == (node("n1", "4"), node("n2", "29"))  # both pages, slimmed
    assert delivered[1].obj == node("n3", "31")
