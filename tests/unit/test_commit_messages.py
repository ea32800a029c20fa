"""The commit message rule ``tools/test.sh`` enforces: commits after the base commit need a subject
of at most 72 characters and a blank second line; the base commit and those before it are exempt;
a failure names the commit; the commit-msg hook mode judges one message file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

CHECK = Path(__file__).resolve().parents[2] / "tools" / "commitmsg.py"
LONG = "Make the subject of this commit so long that it runs well past the seventy-two characters"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "--allow-empty", "--cleanup=verbatim", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def check(repo: Path, base: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), "--repo", str(repo), "--base", base],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    return tmp_path


def test_a_commit_after_the_base_with_a_long_subject_fails_naming_it(repo: Path) -> None:
    exempt = commit(repo, LONG)  # before the base
    base = commit(repo, "Start the rule here")
    commit(repo, "Keep a short subject\n\nA body that says why.")
    bad = commit(repo, LONG + "\n\nWhy.")
    result = check(repo, base)
    assert result.returncode == 1
    assert f"commit {bad[:12]}" in result.stderr
    assert f"{len(LONG)} characters long (at most 72)" in result.stderr
    assert exempt[:12] not in result.stderr


def test_a_body_glued_to_the_subject_fails(repo: Path) -> None:
    base = commit(repo, "Start the rule here")
    bad = commit(repo, "Keep a short subject\nbut no blank line before the body")
    result = check(repo, base)
    assert result.returncode == 1
    assert f"commit {bad[:12]}" in result.stderr
    assert "second line is not blank" in result.stderr


def test_commits_that_follow_the_rule_pass(repo: Path) -> None:
    base = commit(repo, LONG)
    commit(repo, "Keep a short subject\n\nA body that says why.")
    commit(repo, "A subject alone")
    result = check(repo, base)
    assert result.returncode == 0, result.stderr
    assert "2 commit(s) after" in result.stdout


def test_a_missing_base_commit_says_so(repo: Path) -> None:
    commit(repo, "A subject alone")
    result = check(repo, "0" * 40)
    assert result.returncode == 1
    assert "is not in this clone" in result.stderr


def test_the_hook_judges_one_message_file_without_its_comments(tmp_path: Path) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("Keep a short subject\n\nWhy.\n# Please enter the commit message\n")
    ok = subprocess.run([sys.executable, str(CHECK), "--file", str(message)], check=False, timeout=60)
    assert ok.returncode == 0
    message.write_text(LONG + "\n# Please enter the commit message\n")
    bad = subprocess.run(
        [sys.executable, str(CHECK), "--file", str(message)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert bad.returncode == 1
    assert "characters long" in bad.stderr
