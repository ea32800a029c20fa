"""``fleetwright cluster up`` as a new user meets it: started from the repository, it prints how to
use it; a fresh shell that does only what it printed (source the environment file, apply the
examples, watch) gets a completed rollout, the training pods scheduled onto the simulated nodes,
the webhook answering, and a GPU made bad with the printed command answered by the stack's
Prometheus; SIGTERM stops every process of the stack."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fleetwright.local.gpuexporter import XID_ERRORS
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
FLEETWRIGHT = Path(sys.executable).with_name("fleetwright")
# What a fresh login shell has: nothing of the venv.
BARE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}


class Lines:
    """What a process prints, line by line, read on a thread (so a wait can time out)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._process = process
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, marker: str, timeout: float) -> list[str]:
        """The lines up to the one starting with ``marker``."""
        seen: list[str] = []

        def printed() -> bool:
            """Take the lines printed so far; True once ``marker``'s is among them."""
            with contextlib.suppress(queue.Empty):
                while (line := self._queue.get_nowait()) is not None:
                    seen.append(line)
                    if line.startswith(marker):
                        return True
                raise AssertionError("cluster up ended before it got ready:\n" + "\n".join(seen))
            return False

        what = f"cluster up to print {marker!r}"
        wait_for(printed, timeout, what, interval=0.2, details=lambda: "printed:\n" + "\n".join(seen))
        return seen

    def rest(self, timeout: float) -> str:
        """Everything else, once the process ended."""
        self._process.wait(timeout=timeout)
        seen = []
        while (line := self._queue.get(timeout=10)) is not None:
            seen.append(line)
        return "\n".join(seen)


def printed(output: str, pattern: str) -> str:
    match = re.search(pattern, output, re.MULTILINE)
    assert match is not None, f"{pattern!r} not in:\n{output}"
    return match.group(1)


def shell(script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=REPO,
        env=BARE_ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_cluster_up_gives_a_working_stack_its_instructions_reach(tmp_path: Path) -> None:
    workdir = tmp_path / "stack"
    process = subprocess.Popen(
        [str(FLEETWRIGHT), "cluster", "up", "--nodes", "3", "--workdir", str(workdir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = Lines(process)
    try:
        output = "\n".join(lines.until("Stop:", timeout=300))
        env_file = printed(output, r"^\s+source (\S+)")
        apply = printed(output, r"^\s+(kubectl apply -f \S+)")
        watch = printed(output, r"^\s+(fleetwright status \S+) --watch")
        profile = watch.split()[-1]
        for log in ("worker.log", "controller.log", "webhook.log", "kube-apiserver.log"):
            assert log in output
        assert f"Logs: {workdir}/logs/" in output
        done = shell(
            f"source {env_file} && {apply} && "
            f"kubectl wait --for=condition=Ready nodeprofile/{profile} --timeout=240s && "
            f"{watch} -o json"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        status = json.loads(done.stdout[done.stdout.index("{") :])
        assert status["phase"] == "Complete", status

        pods = shell(f"source {env_file} && kubectl get pods -n training -o json")
        assert pods.returncode == 0, pods.stderr
        placed = [p for p in json.loads(pods.stdout)["items"] if p["spec"].get("nodeName")]
        assert len(placed) == 4, "the trainer pods were not scheduled"

        found = shell(
            f"source {env_file} && temporal workflow count --address $FLEETWRIGHT_TEMPORAL_ADDRESS "
            f'--query \'FleetwrightProfile="{profile}" AND FleetwrightPhase="Complete"\''
        )
        # The rollout and its three node workflows, found by their search attributes.
        assert found.returncode == 0, found.stderr
        assert "Total: 4" in found.stdout, found.stdout

        # A GPU made bad with the printed command is answered by the stack's Prometheus.
        bad_gpu = printed(output, r"^\s+A bad GPU\s+(curl .+)$")
        node = printed(bad_gpu, r"/nodes/([^/]+)/")
        made = shell(f"source {env_file} && {bad_gpu}")
        assert made.returncode == 0, made.stderr
        query = f'{XID_ERRORS}{{Hostname="{node}"}} != 0'

        def answered() -> list[dict[str, object]] | None:
            argument = shlex.quote(f"query={query}")
            asked = shell(
                f'source {env_file} && curl -sf "$PROMETHEUS_URL/api/v1/query" --data-urlencode {argument}'
            )
            assert asked.returncode == 0, asked.stderr
            result: list[dict[str, object]] = json.loads(asked.stdout)["data"]["result"]
            return result or None

        (sample,) = wait_for(answered, what=f"{query} from the stack's Prometheus")
        assert sample["value"][1] == "79"
        assert sample["metric"]["gpu"] == "0"

        invalid = shell(
            f"source {env_file} && kubectl apply --dry-run=server -f - <<'EOF'\n"
            "apiVersion: fleetwright.io/v1alpha1\nkind: NodeProfile\nmetadata: {name: bad}\n"
            "spec: {allNodes: true, packages: [{name: a, version: '1.2', image: ghcr.io/x/a}]}\nEOF"
        )
        assert invalid.returncode != 0
        assert "spec.packages[0].version" in invalid.stderr, invalid.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        rest = lines.rest(timeout=120)
    assert process.returncode == 0, rest
    assert "stopped: no process left behind" in rest
    left = subprocess.run(["pgrep", "-af", str(workdir)], capture_output=True, text=True, check=False)
    assert left.stdout.strip() == "", f"processes left: {left.stdout}"
