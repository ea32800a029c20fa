"""The commit message rule: a subject of at most 72 characters, then a blank line before any body.

Checks every commit after ``BASE`` on the checked-out branch (``git rev-list BASE..HEAD``): the
commits up to and including ``BASE`` were written before the rule and are exempt. ``tools/test.sh``
runs it, so CI enforces it on a fresh clone; ``--file`` checks one message, which makes it a
``commit-msg`` hook (CONTRIBUTING.md says how to install it). Exits 1 naming every commit that
breaks the rule and how.

    .venv/bin/python tools/commitmsg.py                     # the commits after BASE
    .venv/bin/python tools/commitmsg.py --file MESSAGE      # one message (the hook)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

# main's tip when the rule was introduced: it and everything before it are exempt.
BASE = "4e1b8fd1f1f537b58519afc49cbd610d5e2e0d11"
MAX_SUBJECT = 72


def problems(message: str) -> list[str]:
    """What is wrong with ``message`` (empty when it follows the rule)."""
    lines = message.rstrip("\n").split("\n")
    subject = lines[0]
    found = []
    if not subject.strip():
        found.append("the subject (first line) is empty")
    if len(subject) > MAX_SUBJECT:
        found.append(f"the subject is {len(subject)} characters long (at most {MAX_SUBJECT})")
    if len(lines) > 1 and lines[1].strip():
        found.append("the second line is not blank (a blank line separates the subject from the body)")
    return found


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def new_commits(repo: Path, base: str) -> list[str]:
    """The commits of HEAD that ``base`` does not contain, oldest first."""
    try:
        git(repo, "cat-file", "-e", f"{base}^{{commit}}")
    except subprocess.CalledProcessError:
        sys.exit(
            f"commit messages: the base commit {base} is not in this clone "
            "(a shallow clone? fetch the whole history: git fetch --unshallow)"
        )
    return git(repo, "rev-list", "--reverse", f"{base}..HEAD").split()


def check_commits(repo: Path, base: str) -> int:
    commits = new_commits(repo, base)
    failures = 0
    for commit in commits:
        message = git(repo, "show", "-s", "--format=%B", commit)
        for problem in problems(message):
            subject = message.split("\n", 1)[0]
            print(f"commit {commit[:12]} ({subject[:60]!r}): {problem}", file=sys.stderr)
            failures += 1
    if failures:
        print(
            f"commit messages: {failures} problem(s); reword those commits (git rebase -i {base[:12]}), "
            "see CONTRIBUTING.md, 'Commits'",
            file=sys.stderr,
        )
        return 1
    print(f"commit messages: {len(commits)} commit(s) after {base[:12]} follow the rule")
    return 0


def check_file(path: Path) -> int:
    # The hook sees the message before git strips its comment lines.
    text = "\n".join(line for line in path.read_text().split("\n") if not line.startswith("#"))
    found = problems(text.lstrip("\n"))
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", default=BASE, help="check the commits after this one")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the repository (default: here)")
    parser.add_argument("--file", type=Path, help="check this one message instead (the commit-msg hook)")
    options = parser.parse_args()
    if options.file is not None:
        sys.exit(check_file(options.file))
    sys.exit(check_commits(options.repo, options.base))


if __name__ == "__main__":
    main()
