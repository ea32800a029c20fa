"""``fleetwright validate FILE...``: offline admission checks for NodeProfile and DeploymentPolicy
manifests (multi-document YAML, ``kind: List`` and ``-`` for stdin).

Runs the same validator as the admission webhook, without a cluster: every error is printed with
its file, document, object and field path; the exit status is 1 when any error was found. A
referenced DeploymentPolicy that is not among the given files only warns (it may exist in the
cluster). Owns reading and reporting; the checks live in ``fleetwright.api.validation``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetwright.cli.app import app

if TYPE_CHECKING:
    from rich.console import Console

    from fleetwright.api.validation import Issue, Result


@dataclass(frozen=True)
class Document:
    """One manifest and where it came from."""

    source: str
    index: int
    obj: Any

    @property
    def label(self) -> str:
        meta = self.obj.get("metadata") if isinstance(self.obj, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        kind = self.obj.get("kind") if isinstance(self.obj, dict) else None
        return f"{self.source}#{self.index} {kind or '?'}/{name or '?'}"


def load_documents(source: str, text: str) -> tuple[list[Document], list[str]]:
    """Split a YAML stream into documents (flattening ``kind: List``); YAML errors are returned."""
    import yaml

    docs: list[Document] = []
    try:
        raw = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        return [], [f"{source}: not valid YAML: {exc}"]
    for obj in raw:
        items = obj.get("items") if isinstance(obj, dict) and obj.get("kind") == "List" else None
        for item in items if isinstance(items, list) else [obj]:
            docs.append(Document(source, len(docs), item))
    return docs, []


def _policy_names(docs: list[Document]) -> set[str]:
    names = set()
    for doc in docs:
        obj = doc.obj
        if isinstance(obj, dict) and obj.get("kind") == "DeploymentPolicy":
            name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
            if isinstance(name, str):
                names.add(name)
    return names


def _policy_registries(docs: list[Document]) -> dict[str, list[str]]:
    """policy name -> its spec.allowedRegistries, for the policies among ``docs`` that set them."""
    registries = {}
    for doc in docs:
        obj = doc.obj
        if not isinstance(obj, dict) or obj.get("kind") != "DeploymentPolicy":
            continue
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
        allowed = (
            (obj.get("spec") or {}).get("allowedRegistries") if isinstance(obj.get("spec"), dict) else None
        )
        if isinstance(name, str) and isinstance(allowed, list):
            registries[name] = [str(entry) for entry in allowed]
    return registries


def validate_documents(docs: list[Document]) -> list[tuple[Document, Result]]:
    """Validate every document; policy references are resolved among the documents themselves, and
    a profile's images are checked against its policy's allowedRegistries when the policy is among
    them."""
    from fleetwright.api.validation import policy_refs, validate_object

    known = _policy_names(docs)
    registries = _policy_registries(docs)
    results = []
    for doc in docs:
        result = validate_object(doc.obj, policies=None, registries=registries)
        for path, ref in policy_refs(doc.obj):
            if ref not in known:
                result.warn(
                    path,
                    f"DeploymentPolicy {ref!r} is not among the validated files; it must exist in the "
                    "cluster",
                    "policy-ref-offline",
                )
        results.append((doc, result))
    return results


def _print_issue(console: Console, doc: Document, issue: Issue) -> None:
    from rich.markup import escape

    color = "red" if issue.severity == "error" else "yellow"
    console.print(f"{escape(doc.label)}: [{color}]{issue.severity}[/] {escape(str(issue))}", highlight=False)


@app.command("validate")
def validate(
    files: Annotated[list[str], typer.Argument(help="YAML files (multi-document allowed); - reads stdin.")],
) -> None:
    """Check NodeProfile and DeploymentPolicy manifests offline, with the admission webhook's rules."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(soft_wrap=True)
    docs: list[Document] = []
    failures: list[str] = []
    for name in files:
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text()
        except OSError as exc:
            failures.append(f"{name}: cannot read: {exc.strerror or exc}")
            continue
        found, errors = load_documents(name, text)
        docs.extend(found)
        failures.extend(errors)
    for line in failures:
        console.print(f"[red]error[/] {escape(line)}", highlight=False)
    error_count = len(failures)
    for doc, result in validate_documents(docs):
        for issue in result.issues:
            _print_issue(console, doc, issue)
        error_count += len(result.errors)
    console.print(f"{len(docs)} object(s) checked, {error_count} error(s)", highlight=False)
    if error_count:
        raise typer.Exit(code=1)
