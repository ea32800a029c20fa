"""The admission corpus (``tests/integration/corpus``): valid and invalid manifests, each invalid
one with an ``# expect: PATH`` header naming the field its error must name. The unit tier runs it
through the validator and the CLI offline, the integration tier through the real apiserver and the
webhook."""

from __future__ import annotations

import re
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "integration" / "corpus"


def corpus_files(kind: str) -> list[Path]:
    """The corpus files of ``kind`` (``valid`` or ``invalid``), by name."""
    return sorted((CORPUS / kind).glob("*.yaml"))


def expected_path(path: Path) -> str:
    """The field path an invalid example's error must name (its ``# expect:`` header)."""
    match = re.search(r"^# expect: (\S+)$", path.read_text(), re.MULTILINE)
    assert match, f"{path.name} lacks an '# expect:' header"
    return match.group(1)
