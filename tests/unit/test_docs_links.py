"""Every relative link in the repository's Markdown resolves: the file (or directory) exists and,
when the link names an anchor, the target page has a heading with that anchor (GitHub's rule:
lower case, punctuation dropped, spaces as hyphens). Pages move between README.md and docs/; a
link left pointing at the old place fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".git", ".venv", "node_modules", "dist", "build", "test-artifacts"}
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def pages() -> list[Path]:
    found = []
    for path in sorted(REPO.rglob("*.md")):
        parts = path.relative_to(REPO).parts
        if not any(p in SKIPPED_DIRS or p.startswith(".") for p in parts[:-1]):
            found.append(path)
    return found


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.*)$", prose_with_code_headings(page.read_text()), re.M)
    return {anchor(h) for h in headings}


def prose_with_code_headings(text: str) -> str:
    """Headings keep their code spans' text (GitHub slugs it, without the backticks)."""
    kept, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return "\n".join(kept)


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading with that anchor")
    return broken


def test_the_pages_are_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in pages()}
    assert {"README.md", "CONTRIBUTING.md", "docs/benchmarks.md", "docs/chaos.md"} <= names


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A `code` heading, with punctuation\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-code-heading-with-punctuation) [gone](missing.md) [bad](there.md#nope)\n"
        "```\n[in code](ignored.md)\n```\n[web](https://example.org/x)\n"
    )
    assert broken_links(page) == ["missing.md: no such file", "there.md#nope: no heading with that anchor"]
