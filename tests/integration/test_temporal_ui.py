"""The Temporal Web UI as the rollout console: headless Chromium (driven over the DevTools
protocol, networking features off, loopback only) opens the dev server's page for a running
rollout workflow and finds the profile, its phase and its node count on it. The screenshot is kept
under test-artifacts/ and refreshes docs/img/temporal-ui-rollout.png for the README."""

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

from fleetwright.localcluster.temporal import LocalTemporal
from fleetwright.workflows.rollout import rollout_workflow_id
from tests.support.stack import Rollout, RunningController, until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
DOCS_SCREENSHOT = REPO / "docs" / "img" / "temporal-ui-rollout.png"
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


@dataclass
class Browser:
    """One headless Chromium with one page, over a DevTools websocket."""

    profile: Path
    process: subprocess.Popen[str] | None = None
    socket: Any = None
    _id: int = 0

    def start(self) -> None:
        self.process = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stderr is not None
        for line in self.process.stderr:
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                port = found.group(1).split(":")[2].split("/")[0]
                break
        else:
            raise RuntimeError("chromium exited before DevTools listened")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.loads(r.read()) if t["type"] == "page"]
        self.socket = websocket.create_connection(
            pages[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True
        )

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.socket.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message["result"])

    def text(self) -> str:
        expression = "document.body ? document.body.innerText : ''"
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return str(result["result"].get("value") or "")

    def all_text(self) -> str:
        """Every text node of the page including its iframes (the details' sandboxed frame)."""
        root = self.call("DOM.getDocument", depth=-1, pierce=True)["root"]
        return " ".join(_texts(root))

    def click(self, label: str) -> bool:
        """Click the first link or button whose text is ``label``; False when there is none yet."""
        expression = (
            "(() => { const e = [...document.querySelectorAll('a, button')]"
            f".find(e => e.innerText.trim() === {json.dumps(label)}); if (e) e.click(); return !!e; }})()"
        )
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return bool(result["result"].get("value"))

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


def _texts(node: dict[str, Any]) -> Iterator[str]:
    if node.get("nodeName") in ("SCRIPT", "STYLE"):
        return
    if node.get("nodeType") == 3 and node.get("nodeValue", "").strip():
        yield node["nodeValue"].strip()
    frames = [node["contentDocument"]] if "contentDocument" in node else []
    for child in [*node.get("children", []), *frames]:
        yield from _texts(child)


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


async def test_the_ui_shows_a_running_rollouts_profile_phase_and_node_count(
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
    await until(lambda: rollout.name in browser.text(), 60, "the rollout's page", interval=0.5)
    # The workflow's current details (the progress table) are under its User Metadata tab.
    await until(lambda: browser.click("User Metadata"), 30, "the User Metadata tab", interval=0.5)
    wanted = ("Current Details", rollout.name, "Complete", "targeted")
    text = await until(
        lambda: (t := browser.all_text()) and all(w in t for w in wanted) and t,
        60,
        "the rollout's current details",
        interval=0.5,
        details=lambda: browser.all_text()[-3000:],
    )
    assert f"nodeprofile/{rollout.name}" in text
    # Node workflows are no children of the rollout: the details say how to list them.
    assert f'WorkflowType="fleetwright.node" AND FleetwrightProfile="{rollout.name}"' in text, text[-2000:]
    # The progress table, as rendered: step, then targeted and updated node counts.
    row = re.search(r"maxUnavailable (\S+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", text)
    assert row is not None, text[-2000:]
    assert (row.group(1), int(row.group(2)), int(row.group(3))) == ("done", len(rollout.nodes), 3)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "temporal-ui-rollout.png"
    await asyncio.sleep(1)  # let the last render settle for the picture
    browser.screenshot(shot)
    DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, DOCS_SCREENSHOT)
    assert shot.stat().st_size > 10_000
