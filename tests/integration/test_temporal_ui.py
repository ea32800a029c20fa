"""The Temporal Web UI as the rollout console: headless Chromium (driven over the DevTools
protocol, networking features off, loopback only) opens the dev server's page for a running
rollout workflow and finds its summary and details (profile, packages, policy) and its current
details (phase, step, the table of node counts) as rendered, then the page of one of its node
workflows and finds its summary (node, packages, stages) and details (profile, policy, the
rollout that started it). The screenshots are kept under
test-artifacts/ (a test never writes into the checkout: docs/observability.md says how the docs'
picture is refreshed from it)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import websocket
from temporalio.client import Client

from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.workflows.ids import node_workflow_id, rollout_workflow_id
from tests.support.stack import Rollout, RunningController
from tests.support.waiting import until, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
FLAGS = (
    "--headless",
    "--no-sandbox",  # root in CI
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,"
    # The UI renders Markdown details in a sandboxed iframe: keep it in-process, readable below.
    "IsolateOrigins,site-per-process",
    "--disable-site-isolation-trials",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    # Only loopback resolves: nothing the UI or the browser might fetch can leave the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--window-size=1600,1100",
)


BODY_TEXT = "document.body ? document.body.innerText : ''"


@dataclass
class Browser:
    """One headless Chromium with one page, over a DevTools websocket.

    Chromium's stderr goes to a file, never to a pipe: an undrained pipe fills up with its warnings
    (more of them under load) and then Chromium blocks writing them, and every DevTools call times
    out. Text is read with ``Runtime.evaluate`` in each frame, not with the DOM domain: once a
    client asks for the document, Chromium streams it every DOM mutation of the live-updating UI,
    and under load each call waded through thousands of those events."""

    profile: Path
    process: subprocess.Popen[bytes] | None = None
    socket: Any = None
    _id: int = 0

    @property
    def log(self) -> Path:
        return self.profile.parent / "chromium.log"

    def start(self) -> None:
        self.profile.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [chromium(), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        port = self._devtools_port(timeout=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            pages = [t for t in json.loads(r.read()) if t["type"] == "page"]
        self.socket = websocket.create_connection(
            pages[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True
        )

    def _devtools_port(self, timeout: float) -> int:
        """The port Chromium writes to ``DevToolsActivePort`` in its profile once it listens."""
        active = self.profile / "DevToolsActivePort"
        process = self.process
        assert process is not None

        def alive() -> None:
            if process.poll() is not None:
                raise RuntimeError(f"chromium exited {process.returncode}: {self.log.read_text()[-2000:]}")

        def port() -> int | None:
            lines = active.read_text().splitlines() if active.exists() else []
            return int(lines[0]) if lines and lines[0].isdigit() else None

        found: int = wait_for(port, timeout, "chromium to listen", interval=0.1, alive=alive)
        return found

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.socket.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message["result"])

    def evaluate(self, expression: str, context: int | None = None) -> Any:
        where = {} if context is None else {"contextId": context}
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, **where)
        return result["result"].get("value")

    def text(self) -> str:
        return str(self.evaluate(BODY_TEXT) or "")

    def frame_texts(self) -> list[str]:
        """The text of every frame of the page: the UI renders each Markdown field (summary,
        details, current details) in a sandboxed frame of its own."""
        tree = self.call("Page.getFrameTree")["frameTree"]
        texts = []
        for frame in _frames(tree):
            try:
                world = self.call("Page.createIsolatedWorld", frameId=frame, worldName="fleetwright-test")
                texts.append(
                    str(
                        self.evaluate(
                            "document.body ? document.body.innerText : ''", world["executionContextId"]
                        )
                        or ""
                    )
                )
            except RuntimeError:
                continue  # the frame was replaced meanwhile (the details re-rendered): read it next time
        return texts

    def click(self, label: str) -> bool:
        """Click the first link or button whose text is ``label``; False when there is none yet."""
        expression = (
            "(() => { const e = [...document.querySelectorAll('a, button')]"
            f".find(e => e.innerText.trim() === {json.dumps(label)}); if (e) e.click(); return !!e; }})()"
        )
        return bool(self.evaluate(expression))

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def stop(self) -> None:
        if self.socket is not None:
            self.socket.close()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _frames(tree: dict[str, Any]) -> Iterator[str]:
    yield tree["frame"]["id"]
    for child in tree.get("childFrames", []):
        yield from _frames(child)


def words(text: str) -> str:
    """``text`` with every run of whitespace (tabs between cells, the cells' em spaces) one space."""
    return " ".join(text.split())


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        raise RuntimeError("chromium is not installed: run tools/setup.sh (Debian package chromium)")
    return found


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    started = Browser(tmp_path / "chromium-profile")
    started.start()
    try:
        yield started
    finally:
        started.stop()


def workflow_url(server: LocalTemporal, workflow_id: str, run_id: str) -> str:
    quoted = urllib.parse.quote(workflow_id, safe="")
    return f"{server.ui_url}/namespaces/{server.namespace}/workflows/{quoted}/{run_id}/history"


async def test_the_ui_shows_a_rollouts_progress_and_what_each_workflow_was_started_with(
    temporal_server: LocalTemporal,
    temporal_client: Client,
    controller: RunningController,
    rollout: Rollout,
    browser: Browser,
) -> None:
    await asyncio.to_thread(rollout.apply)
    await asyncio.to_thread(rollout.wait_ready, 120)
    handle = temporal_client.get_workflow_handle(rollout_workflow_id(rollout.name))
    description = await handle.describe()
    assert description.status is not None
    assert description.status.name == "RUNNING"  # the rollout waits for the next change
    browser.call("Page.enable")
    browser.call("Page.navigate", url=workflow_url(temporal_server, handle.id, description.run_id))
    await until(lambda: handle.id in browser.text(), 60, "the rollout's page", interval=0.5)
    # The summary, the details and the current details are under the User Metadata tab, each a
    # Markdown field rendered in a frame of its own: wait until all three show their content.
    await until(lambda: browser.click("User Metadata"), 30, "the User Metadata tab", interval=0.5)
    shown = await until(
        lambda: metadata(browser, rollout.name),
        60,
        "the rollout's summary, details and current details",
        interval=0.5,
        details=browser.frame_texts,
    )
    summary, details, current = shown
    assert summary.startswith(f"NodeProfile {rollout.name}: tuning@"), summary
    assert re.search(r"Packages tuning@\S+ Policy \S+: maxUnavailable \d+", details), details
    # Node workflows are no children of the rollout: the details say how to list them.
    assert f'WorkflowType="fleetwright.node" AND FleetwrightProfile="{rollout.name}"' in current, current
    # The progress table, as rendered: a header of node counts, then the counts.
    assert re.search(r"\bStep done\b", current), current
    row = re.search(r"maxUnavailable (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", current)
    assert row is not None, current
    assert (int(row.group(1)), int(row.group(2))) == (len(rollout.nodes), 3)
    # The picture once the frames are laid out (the UI sizes each frame to its content).
    await until(lambda: browser.evaluate(FRAMES_LAID_OUT), 30, "the frames laid out", interval=0.5)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "temporal-ui-rollout.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 10_000
    await _node_page(temporal_server, temporal_client, browser, rollout, handle.id)


async def _node_page(
    server: LocalTemporal, client: Client, browser: Browser, rollout: Rollout, rollout_id: str
) -> None:
    """A node workflow's page: its summary names the node, its packages and its stages; its
    details add the profile, the policy and the rollout that started it."""
    node = rollout.nodes[0]
    handle = client.get_workflow_handle(node_workflow_id(rollout.name, node))
    description = await handle.describe()
    browser.call("Page.navigate", url=workflow_url(server, handle.id, description.run_id))
    await until(lambda: handle.id in browser.text(), 60, "the node's page", interval=0.5)
    await until(lambda: browser.click("User Metadata"), 30, "the User Metadata tab", interval=0.5)
    summary, details = await until(
        lambda: node_metadata(browser, node),
        60,
        "the node workflow's summary and details",
        interval=0.5,
        details=browser.frame_texts,
    )
    assert re.fullmatch(rf"{re.escape(node)}: tuning@\S+ \([\w-]+(, [\w-]+)*\)", summary), summary
    started_with = (
        rf"NodeProfile {rollout.name} \(generation 1\) Packages tuning@\S+ Stages [\w-]+(, [\w-]+)* "
        rf"Policy {rollout.name} Rollout {re.escape(rollout_id)}"
    )
    assert re.search(started_with, details), details
    await until(lambda: browser.evaluate(FRAMES_LAID_OUT), 30, "the frames laid out", interval=0.5)
    shot = ARTIFACTS / "temporal-ui-node.png"
    browser.screenshot(shot)
    assert shot.stat().st_size > 10_000


FRAMES_LAID_OUT = (
    "[...document.querySelectorAll('iframe')].every(f => f.clientHeight > 0)"
    " && document.fonts.status === 'loaded'"
)


def metadata(browser: Browser, profile: str) -> tuple[str, str, str] | None:
    """The rendered summary, details and current details of the profile's rollout, once all three
    show it (whitespace collapsed), else None."""
    texts = [words(t) for t in browser.frame_texts()]
    summary = [t for t in texts if t.startswith(f"NodeProfile {profile}:")]
    details = [t for t in texts if t.startswith(f"NodeProfile {profile} (generation")]
    current = [t for t in texts if t.startswith(f"{profile} — Complete") and "maxUnavailable" in t]
    if summary and details and current:
        return summary[0], details[0], current[0]
    return None


def node_metadata(browser: Browser, node: str) -> tuple[str, str] | None:
    """The rendered summary and details of the node's workflow, once both show (whitespace
    collapsed), else None."""
    texts = [words(t) for t in browser.frame_texts()]
    summary = [t for t in texts if t.startswith(f"{node}: ")]
    details = [t for t in texts if t.startswith(f"Node {node} NodeProfile")]
    if summary and details:
        return summary[0], details[0]
    return None
