"""The two sides of an A/B run, prepared: where side A's code comes from and how its pytest
processes start. Pytest-free, no torch.

``--torchperf-ab REV``: side A is REV checked out in a temporary ``git worktree`` (detached,
outside the repository, removed afterwards); its processes start in the same sub-folder of that
checkout as this run, and import the user's code from it, including a ``src/`` layout or an
editable install that points at the main checkout (those paths are mapped into the worktree and put
first on ``PYTHONPATH``). ``--torchperf-ab-python PY``: side A runs the working tree with another
interpreter. Side B is always this interpreter on the working tree.

Every problem is a :class:`SideError` whose message names the side and the fix.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_torchperf.store.environment import GitError
from pytest_torchperf.store.environment import run_git as run_any_git


class SideError(Exception):
    """Side A (or B) cannot run; the message says why and what to do."""


@dataclass
class Side:
    """How one side's pytest processes start."""

    name: str
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
    #: Side A of a revision: (repository root, its checkout); paths under the root in the
    #: arguments point into the checkout.
    moved: tuple[str, str] | None = None

    def map_args(self, args: Sequence[str]) -> list[str]:
        """This run's arguments for this side: absolute paths into the repository point at the
        side's own checkout (``pytest /repo/tests --torchperf-ab main`` collects main's tests)."""
        if self.moved is None:
            return list(args)
        root, checkout = self.moved
        return [
            arg.replace(root + os.sep, checkout + os.sep) if root + os.sep in arg else
            (checkout if arg == root else arg)
            for arg in args
        ]  # fmt: skip


def run_git(
    args: Sequence[str], cwd: Path, who: str = "side A"
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd`` (output captured, killed after 600 s:
    :func:`pytest_torchperf.store.environment.run_git`); a SideError that says what to do when
    git is missing or hangs."""
    try:
        return run_any_git(args, cwd, timeout=600)
    except GitError as exc:
        if exc.missing:
            raise SideError(
                f"{who}: git is not on PATH: install git"
                + (
                    ", or compare environments with --torchperf-ab-python"
                    if who == "side A"
                    else ""
                )
            ) from None
        raise SideError(
            f"{who}: {exc}; check the repository (a lock file left by a killed git? git "
            f"worktree prune)"
        ) from None


def repository_root(cwd: Path) -> Path:
    result = run_git(["rev-parse", "--show-toplevel"], cwd)
    if result.returncode != 0:
        raise SideError(
            f"--torchperf-ab checks out a git revision as side A, and {cwd} is not in a git "
            f"repository ({result.stderr.strip() or 'git rev-parse failed'}). Run pytest from "
            f"your repository's checkout, or compare two environments with "
            f"--torchperf-ab-python PYTHON"
        )
    return Path(result.stdout.strip())


def resolve_revision(root: Path, revision: str, who: str = "side A") -> str:
    """The full commit id of ``revision``, or a SideError that says how to get it (``who``:
    what the revision is for, in the message)."""
    result = run_git(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], root, who)
    if result.returncode != 0 or not result.stdout.strip():
        raise SideError(
            f"{who}: unknown git revision {revision!r} in {root}. Check the name (git log "
            f"--oneline, git branch -a); a remote branch must be fetched first (git fetch origin; "
            f"in GitHub Actions give actions/checkout fetch-depth: 0)"
        )
    return result.stdout.strip()


@contextlib.contextmanager
def revision_side(
    invocation_dir: Path, revision: str, flags: tuple[str, ...] = (), who: str = "side A"
) -> Iterator[Side]:
    """Side A for ``--torchperf-ab REV`` (or any run of REV's tests, ``who`` naming it in
    messages): REV in a temporary worktree, removed on the way out (an exception or Ctrl-C
    included)."""
    root = repository_root(invocation_dir)
    commit = resolve_revision(root, revision, who)
    folder = Path(tempfile.mkdtemp(prefix="torchperf-ab-"))
    checkout = folder / "a"
    try:
        added = run_git(
            ["worktree", "add", "--detach", "--force", str(checkout), commit], root, who
        )
        if added.returncode != 0:
            raise SideError(
                f"{who}: git could not check out {revision} ({commit[:12]}) into a temporary "
                f"worktree: {added.stderr.strip()}. Run `git worktree prune` and try again"
            )
        relative = invocation_dir.resolve().relative_to(root.resolve())
        cwd = checkout / relative
        if not cwd.is_dir():
            raise SideError(
                f"{who}: {revision} ({commit[:12]}) has no folder {relative} (pytest runs from "
                f"there); run pytest from a folder that exists in both revisions"
            )
        env = {"PYTHONPATH": _mapped_pythonpath(root, checkout)}
        yield Side(
            "A",
            f"{revision} ({commit[:12]})",
            sys.executable,
            cwd,
            env,
            flags=flags,
            moved=(str(root.resolve()), str(checkout)),
        )
    finally:
        run_git(["worktree", "remove", "--force", str(checkout)], root, who)
        shutil.rmtree(folder, ignore_errors=True)
        run_git(["worktree", "prune"], root, who)


def _import_roots() -> Iterator[Path]:
    """Where this interpreter imports code from: ``sys.path`` and the package folders of
    editable installs that use an import hook (setuptools' ``__editable__`` finders)."""
    for entry in sys.path:
        if entry:
            yield Path(entry)
    for finder in sys.meta_path:
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
        if isinstance(mapping, dict):
            for location in mapping.values():
                yield Path(location).parent


def _mapped_pythonpath(root: Path, checkout: Path) -> str:
    """``PYTHONPATH`` for side A: every import root inside the repository, mapped into the
    worktree (so ``src/`` layouts and editable installs import REV's code), then the rest."""
    root = root.resolve()
    # The folder pytest_torchperf is imported from: up one level per dot in this module's name
    # (a fixed depth broke when this module moved one package deeper).
    plugin_home = Path(__file__).resolve().parents[__name__.count(".")]
    mapped: list[str] = []
    for path in _import_roots():
        try:
            resolved = path.resolve()
            relative = resolved.relative_to(root)
        except (OSError, ValueError):
            continue
        if resolved == plugin_home:
            continue  # the plugin itself must be the same on both sides
        target = checkout / relative
        if target.is_dir() and str(target) not in mapped:
            mapped.append(str(target))
    existing = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([*mapped, *([existing] if existing else [])])


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
            f"executable, e.g. --torchperf-ab-python /path/to/venv/bin/python"
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
        "A",
        f"{python} (torch {found['torch']})",
        python,
        invocation_dir,
        {},
        str(found["torch"]),
        # -P exists from Python 3.11 on.
        flags=flags if version >= (3, 11) else tuple(f for f in flags if f != "-P"),
    )
