"""The two sides of an A/B run, prepared: where side A's code comes from and how its pytest
processes start. Pytest-free, no torch.

``--torchperf-ab REV``: side A is REV checked out in a temporary ``git worktree``
(:mod:`pytest_torchperf.run.worktree`: its processes start in the same sub-folder of that
checkout as this run and import the user's code from it). ``--torchperf-ab-python PY``: side A
runs the working tree with another interpreter. Side B is always this interpreter on the working
tree.

Every problem is a :class:`SideError` whose message names the side and the fix.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_torchperf.run import worktree
from pytest_torchperf.run.worktree import Checkout, WorktreeError

#: Every problem of a side is the worktree's error (side A of a revision is a checkout,
#: :mod:`pytest_torchperf.run.worktree`): one exception for the callers to catch.
SideError = WorktreeError

#: What side A can do where git is missing.
_WITHOUT_GIT = ", or compare environments with --torchperf-ab-python"


@dataclass
class Side:
    """How one side's pytest processes start (its name, ``A`` or ``B``, is its key)."""

    #: What the side is, for messages and reports (``origin/main (abc1234)``, a Python's path).
    label: str
    python: str
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    #: torch version this side imports (reports name both).
    torch: str = ""
    #: Interpreter flags before ``-m pytest`` (``-P`` where the run started from the console
    #: script, so the working folder is not put first on ``sys.path``).
    flags: tuple[str, ...] = ()
    #: Side A of a revision: its checkout; paths into the repository in the arguments point
    #: into it.
    checkout: Checkout | None = None

    def map_args(self, args: Sequence[str]) -> list[str]:
        """This run's arguments for this side: absolute paths into the repository point at the
        side's own checkout (``pytest /repo/tests --torchperf-ab main`` collects main's tests)."""
        if self.checkout is None:
            return list(args)
        return self.checkout.map_args(args)


def repository_root(cwd: Path) -> Path:
    result = worktree.run_git(["rev-parse", "--show-toplevel"], cwd, "side A", _WITHOUT_GIT)
    if result.returncode != 0:
        raise SideError(
            f"--torchperf-ab checks out a git revision as side A, and {cwd} is not in a git "
            f"repository ({result.stderr.strip() or 'git rev-parse failed'}). Run pytest from "
            f"your repository's checkout, or compare two environments with "
            f"--torchperf-ab-python PYTHON"
        )
    return Path(result.stdout.strip())


def resolve_revision(root: Path, revision: str) -> str:
    """The full commit id of ``revision``, or a SideError that says how to get it."""
    return worktree.resolve_revision(root, revision, "side A", _WITHOUT_GIT)


@contextlib.contextmanager
def revision_side(invocation_dir: Path, revision: str, flags: tuple[str, ...]) -> Iterator[Side]:
    """Side A for ``--torchperf-ab REV``: REV in a temporary worktree, removed on the way out
    (an exception or Ctrl-C included)."""
    root = repository_root(invocation_dir)
    with worktree.checkout(root, invocation_dir, revision, "side A", _WITHOUT_GIT) as tree:
        yield Side(tree.label, sys.executable, tree.cwd, tree.env, flags=flags, checkout=tree)


#: What side A's interpreter must be able to import, checked before any test runs.
_PROBE = (
    "import json, sys\n"
    "found = {'python': sys.version.split()[0]}\n"
    "for name in ('torch', 'pytest', 'pytest_torchperf'):\n"
    "    try:\n"
    "        found[name] = __import__(name).__version__\n"
    "    except Exception as exc:\n"
    "        found[name] = None\n"
    "        found[name + '_error'] = f'{type(exc).__name__}: {exc}'\n"
    "print(json.dumps(found))\n"
)


def probe_python(python: str, cwd: Path) -> dict[str, str | None]:
    """Versions of Python, torch, pytest and pytest-torchperf that ``python`` imports."""
    try:
        result = subprocess.run(
            [python, "-c", _PROBE], cwd=cwd, capture_output=True, text=True, timeout=300
        )
    except subprocess.TimeoutExpired:
        raise SideError(
            f"side A: {python} did not import torch, pytest and pytest-torchperf within 300 s"
        ) from None
    except (FileNotFoundError, PermissionError, OSError) as exc:
        raise SideError(
            f"side A: cannot run the interpreter {python!r} ({exc}). Pass the path of a Python "
            f"executable, e.g. --torchperf-ab-python=/path/to/venv/bin/python"
        ) from None
    try:
        found: dict[str, str | None] = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SideError(
            f"side A: {python} did not run a Python probe (exit code {result.returncode}: "
            f"{(result.stderr or result.stdout).strip()[-500:]}). Pass a Python executable"
        ) from None
    return found


def python_side(
    invocation_dir: Path, python: str, plugin_version: str, flags: tuple[str, ...] = ()
) -> Side:
    """Side A for ``--torchperf-ab-python PY``: the working tree under another interpreter."""
    found = probe_python(python, invocation_dir)
    missing = [n for n in ("torch", "pytest", "pytest_torchperf") if not found.get(n)]
    if missing:
        why = "; ".join(f"{n}: {found.get(n + '_error')}" for n in missing)
        raise SideError(
            f"side A: {python} cannot import {', '.join(missing)} ({why}). Install them into "
            f"that environment ({python} -m pip install torch pytest pytest-torchperf, or pip "
            f"install -e . of this checkout) and run again"
        )
    if found["pytest_torchperf"] != plugin_version:
        raise SideError(
            f"side A: {python} has pytest-torchperf {found['pytest_torchperf']}, this run "
            f"{plugin_version}; both sides must run the same plugin (the turn protocol and the "
            f"records must match). Install {plugin_version} there ({python} -m pip install "
            f"pytest-torchperf=={plugin_version}, or pip install -e of the same checkout)"
        )
    version = tuple(int(p) for p in str(found.get("python") or "0.0").split(".")[:2])
    return Side(
        f"{python} (torch {found['torch']})",
        python,
        invocation_dir,
        {},
        str(found["torch"]),
        # -P exists from Python 3.11 on.
        flags=flags if version >= (3, 11) else tuple(f for f in flags if f != "-P"),
    )
