"""Module and function sizes of the project's Python code at one or more git revisions: the largest
modules (lines), the longest functions (lines from ``def`` to the function's last line, decorators
excluded), and how many functions are longer than a threshold.

Reads the files from git (``git ls-tree`` and ``git cat-file``), not from the working tree, so any
two commits compare without a checkout; symlinks (``fleetwright/workflows`` and the like) are not
followed, so each file counts once. Prints the figures and the command that reproduces them.

    .venv/bin/python tools/codesize.py 4cd05ad HEAD
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# The code that ships: the package and the top-level packages it installs through symlinks.
DEFAULT_PATHS = ("fleetwright", "workflows", "activities", "worker", "agent")
REGULAR_FILE_MODES = ("100644", "100755")


@dataclass(frozen=True)
class Function:
    where: str
    lines: int


@dataclass(frozen=True)
class Sizes:
    modules: dict[str, int]
    functions: list[Function]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def python_files(repo: Path, rev: str, paths: tuple[str, ...]) -> dict[str, str]:
    """path -> blob id of every regular .py file under ``paths`` at ``rev``."""
    listing = _git(repo, "ls-tree", "-r", rev, "--", *paths)
    files = {}
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob" and mode in REGULAR_FILE_MODES and path.endswith(".py"):
            files[path] = blob
    return files


def functions(path: str, source: str) -> list[Function]:
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            found.append(Function(f"{path}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1))
    return found


def measure(repo: Path, rev: str, paths: tuple[str, ...]) -> Sizes:
    modules: dict[str, int] = {}
    found: list[Function] = []
    for path, blob in python_files(repo, rev, paths).items():
        source = _git(repo, "cat-file", "blob", blob)
        modules[path] = len(source.splitlines())
        found.extend(functions(path, source))
    return Sizes(modules, found)


def report(rev: str, commit: str, sizes: Sizes, top: int, over: int) -> list[str]:
    longest = sorted(sizes.functions, key=lambda f: -f.lines)
    largest = sorted(sizes.modules.items(), key=lambda item: -item[1])
    lines = [
        f"== {rev} ({commit[:12]}): {len(sizes.modules)} modules, {sum(sizes.modules.values())} lines, "
        f"{len(sizes.functions)} functions, {sum(f.lines > over for f in sizes.functions)} over {over} lines",
        "  largest modules (lines):",
    ]
    lines += [f"    {n:5d}  {path}" for path, n in largest[:top]]
    lines.append("  longest functions (lines):")
    lines += [f"    {f.lines:5d}  {f.where}" for f in longest[:top]]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("revs", nargs="+", help="git revisions to measure (e.g. a base commit and HEAD)")
    parser.add_argument("--top", type=int, default=10, help="how many modules and functions to list")
    parser.add_argument("--over", type=int, default=50, help="count the functions longer than this")
    parser.add_argument("--paths", nargs="+", default=list(DEFAULT_PATHS), help="directories measured")
    args = parser.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    for rev in args.revs:
        commit = _git(repo, "rev-parse", rev).strip()
        print("\n".join(report(rev, commit, measure(repo, commit, tuple(args.paths)), args.top, args.over)))
    command = ["tools/codesize.py", *args.revs]
    if args.top != 10:
        command += ["--top", str(args.top)]
    if args.over != 50:
        command += ["--over", str(args.over)]
    if list(args.paths) != list(DEFAULT_PATHS):
        command += ["--paths", *args.paths]
    print(f"reproduce: .venv/bin/python {' '.join(command)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
