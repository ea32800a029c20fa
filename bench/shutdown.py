"""Every fleetwright process role stops cleanly: cycles of start -> rollout -> SIGTERM, under CPU load.

Each cycle starts the product's own entry points as the chart runs them (``fleetwright worker``
with each ``worker_role``: all, workflows and activities on one task queue; ``fleetwright
controller``; ``fleetwright webhook``), bumps the example profile's version so a new rollout
runs to Complete through those processes, then sends SIGTERM to all of them at once. A cycle
passes when every process exits 0 and no log holds a fatal error. Busy-looping processes keep
every core loaded meanwhile (``--load``), which is when a late native thread at interpreter exit
showed up.

    .venv/bin/python bench/shutdown.py --cycles 50 --load 2
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from fleetwright import certs
from fleetwright.api.crdgen import CRDS, rendered_files
from fleetwright.local import examples
from fleetwright.local.controlplane import ClusterOptions, LocalCluster
from fleetwright.local.kubectl import wait_established
from fleetwright.local.kubelet import SimulatedKubelet
from fleetwright.local.loopback import LOOPBACK, free_port
from fleetwright.local.nodes import stage_pod_timing
from fleetwright.local.temporalserver import LocalTemporal
from fleetwright.process.settings import WorkerSettings, process_environment
from fleetwright.workflows.enginesettings import EngineSettings
from fleetwright.workflows.search import REGISTRATION

if not __package__:  # run as a file (python bench/shutdown.py): the repository root holds bench/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.harness import manifest

FLEETWRIGHT = Path(sys.executable).with_name("fleetwright")
PROFILE, POLICY = "shutdown", "shutdown-policy"
# (process name, command, FLEETWRIGHT_* overrides)
ROLES: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("worker-all", "worker", {"WORKER_ROLE": "all"}),
    ("worker-workflows", "worker", {"WORKER_ROLE": "workflows"}),
    ("worker-activities", "worker", {"WORKER_ROLE": "activities"}),
    ("controller", "controller", {}),
    ("webhook", "webhook", {}),
)
FATAL = ("Fatal Python error", "Segmentation fault")


def manifests(version: str) -> str:
    profile = examples.profile(PROFILE, version=version, interrupt=None, policy=POLICY)
    policy = examples.policy(POLICY, max_unavailable=2)
    return yaml.safe_dump_all([manifest(policy, POLICY), manifest(profile, PROFILE)])


def rolled_out(cluster: LocalCluster, within: float) -> bool:
    """The profile's latest generation is Complete."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        got = cluster.kubectl("get", "nodeprofile", PROFILE, "-o", "json", check=False)
        if got.returncode == 0:
            body = json.loads(got.stdout)
            status = body.get("status") or {}
            current = status.get("observedGeneration") == body["metadata"]["generation"]
            if current and status.get("phase") == "Complete":
                return True
        time.sleep(0.5)
    return False


def cycle(cluster: LocalCluster, env: dict[str, str], rundir: Path, index: int) -> dict[str, Any]:
    running: dict[str, subprocess.Popen[bytes]] = {}
    logs = {name: rundir / f"{index:03d}-{name}.log" for name, _, _ in ROLES}
    for name, command, overrides in ROLES:
        process_env = {**env, **{f"FLEETWRIGHT_{k}": v for k, v in overrides.items()}}
        with logs[name].open("wb") as out:
            running[name] = subprocess.Popen(
                [str(FLEETWRIGHT), command], env=process_env, stdout=out, stderr=subprocess.STDOUT
            )
    started = time.monotonic()
    cluster.kubectl("apply", "-f", "-", input=manifests(f"1.0.{index + 1}"))
    completed = rolled_out(cluster, within=300)
    rollout_seconds = time.monotonic() - started
    for process in running.values():
        process.send_signal(signal.SIGTERM)
    codes: dict[str, int] = {}
    for name, process in running.items():
        try:
            codes[name] = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            codes[name] = process.wait()
    fatal = {n: line for n, path in logs.items() for line in _fatal_lines(path)}
    clean = completed and not fatal and all(code == 0 for code in codes.values())
    if clean:
        for path in logs.values():
            path.unlink()
    return {
        "cycle": index,
        "completed": completed,
        "seconds": round(rollout_seconds, 1),
        "codes": codes,
        "fatal": fatal,
        "clean": clean,
    }


def _fatal_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(errors="replace").splitlines() if line.startswith(FATAL)]


def load(processes: int) -> list[subprocess.Popen[bytes]]:
    """Busy loops that keep ``processes`` cores fully loaded."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]


def settings_env(cluster: LocalCluster, temporal: LocalTemporal, rundir: Path) -> dict[str, str]:
    bundle = certs.generate_webhook_tls(now=dt.datetime.now(dt.UTC), ip_addresses=[LOOPBACK])
    paths = certs.write_bundle(bundle, rundir / "tls")
    settings = WorkerSettings(
        temporal_address=temporal.address,
        temporal_namespace=temporal.namespace,
        kubeconfig=cluster.kubeconfig,
        task_queue="shutdown",
        webhook_host=LOOPBACK,
        webhook_port=free_port(),
        webhook_cert_file=str(paths["tls.crt"]),
        webhook_key_file=str(paths["tls.key"]),
        engine=EngineSettings(
            observe_interval_seconds=5,
            drain_poll_seconds=0.5,
            stage_backoff_limit=0,
            stage_pod_annotations=stage_pod_timing(1.0, ready_seconds=0.2),
        ),
    )
    path = rundir / "settings.json"
    path.write_text(settings.model_dump_json())
    return {**process_environment(path), "FLEETWRIGHT_LOG_FORMAT": "json"}


def run(args: argparse.Namespace) -> int:
    rundir = Path(args.workdir or tempfile.mkdtemp(prefix="fleetwright-bench-shutdown-"))
    rundir.mkdir(parents=True, exist_ok=True)
    with (
        LocalCluster(ClusterOptions(nodes=args.nodes, workdir=rundir / "cluster")) as cluster,
        LocalTemporal(search_attributes=REGISTRATION, workdir=rundir / "temporal", ui=False) as temporal,
        SimulatedKubelet(cluster.kubectl),
    ):
        cluster.kubectl("apply", "-f", "-", input="---\n".join(rendered_files().values()))
        wait_established(cluster.kubectl, [spec.name for spec in CRDS])
        env = settings_env(cluster, temporal, rundir)
        busy = load(args.load)
        try:
            results = []
            for index in range(args.cycles):
                result = cycle(cluster, env, rundir, index)
                print(json.dumps(result), flush=True)
                results.append(result)
        finally:
            for process in busy:
                process.kill()
                process.wait()
    return report(results, args, rundir)


def report(results: list[dict[str, Any]], args: argparse.Namespace, rundir: Path) -> int:
    exits: Counter[tuple[str, int]] = Counter(
        (name, code) for result in results for name, code in result["codes"].items()
    )
    clean = sum(1 for r in results if r["clean"])
    print(f"\n{clean}/{len(results)} cycles clean: every process exited 0, no fatal error in any log")
    for (name, code), count in sorted(exits.items()):
        print(f"  {name:18} exit {code}: {count}")
    print(f"  rollouts completed: {sum(1 for r in results if r['completed'])}/{len(results)}")
    print(f"  logs of unclean cycles: {rundir}")
    print(f"reproduce: .venv/bin/python bench/shutdown.py --cycles {args.cycles} --load {args.load}")
    return 0 if clean == len(results) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--load", type=int, default=2, help="busy-looping processes (cores kept loaded)")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--workdir", default="")
    sys.exit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
