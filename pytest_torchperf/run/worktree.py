"""A git revision checked out in a temporary ``git worktree``, to run its tests in: an A/B run's
side A (``--torchperf-ab REV``) and each revision ``torchperf bisect`` tries. Pytest-free, no
torch.

The worktree is detached, outside the repository and removed afterwards (an exception or Ctrl-C
included). The revision's pytest runs from the same sub-folder of the checkout as this run, and
imports the user's code from it, including a ``src/`` layout or an editable install that points
at the main checkout (those paths are mapped into the worktree and put first on
``PYTHONPATH``); the plugin itself is the one running here.

Every problem is a :class:`WorktreeError` whose message names who wanted the revision (``side
A``, ``bisect``) and the fix.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_torchperf.store.environment import GitError
from pytest_torchperf.store.environment import run_git as run_any_git


class WorktreeError(Exception):
    """A revision cannot be checked out or run; the message says why and what to do."""


def run_git(
    args: Sequence[str], cwd: Path, who: str, instead: str = ""
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd`` (output captured, killed after 600 s:
    :func:`pytest_torchperf.store.environment.run_git`); a WorktreeError that says what to do
    when git is missing (``instead``: what ``who`` can do without git) or hangs."""
    try:
        return run_any_git(args, cwd, timeout=600)
    except GitError as exc:
        if exc.missing:
            raise WorktreeError(f"{who}: git is not on PATH: install git{instead}") from None
        raise WorktreeError(
            f"{who}: {exc}; check the repository (a lock file left by a killed git? git "
            f"worktree prune)"
        ) from None


def repository_root(cwd: Path, who: str, instead: str = "") -> Path:
    """The root of the git repository ``cwd`` is in; a WorktreeError outside one."""
    result = run_git(["rev-parse", "--show-toplevel"], cwd, who, instead)
    if result.returncode != 0:
        raise WorktreeError(
            f"{who}: {cwd} is not in a git repository "
            f"({result.stderr.strip() or 'git rev-parse failed'})"
        )
    return Path(result.stdout.strip())


def resolve_revision(root: Path, revision: str, who: str, instead: str = "") -> str:
    """The full commit id of ``revision``, or a WorktreeError that says how to get it (``who``:
    what the revision is for, in the message)."""
    result = run_git(
        ["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], root, who, instead
    )
    if result.returncode != 0 or not result.stdout.strip():
        raise WorktreeError(
            f"{who}: unknown git revision {revision!r} in {root}. Check the name (git log "
            f"--oneline, git branch -a); a remote branch must be fetched first (git fetch origin; "
            f"in GitHub Actions give actions/checkout fetch-depth: 0)"
        )
    return result.stdout.strip()


@dataclass(frozen=True)
class Checkout:
    """A revision checked out, as its pytest processes start there."""

    #: The revision and its commit, for messages and reports (``origin/main (abc1234)``).
    label: str
    #: Where its pytest runs: this run's folder, in the checkout.
    cwd: Path
    #: What its processes' environment adds (``PYTHONPATH``).
    env: dict[str, str]
    #: The repository's root and the checkout's: paths under the root in the arguments point
    #: into the checkout.
    root: str
    folder: str

    def map_args(self, args: Sequence[str]) -> list[str]:
        """This run's arguments for the checkout: absolute paths into the repository point at
        its checkout (``pytest /repo/tests --torchperf-ab main`` collects main's tests)."""
        root, checkout = self.root, self.folder
        return [
            arg.replace(root + os.sep, checkout + os.sep) if root + os.sep in arg else
            (checkout if arg == root else arg)
            for arg in args
        ]  # fmt: skip


@contextlib.contextmanager
def checkout(
    root: Path, invocation_dir: Path, revision: str, who: str, instead: str = ""
) -> Iterator[Checkout]:
    """``revision`` of the repository at ``root`` in a temporary worktree, for a pytest run
    from ``invocation_dir``'s place in it; removed on the way out (an exception or Ctrl-C
    included)."""
    commit = resolve_revision(root, revision, who, instead)
    folder = Path(tempfile.mkdtemp(prefix="torchperf-ab-"))
    tree = folder / "a"
    try:
        added = run_git(
            ["worktree", "add", "--detach", "--force", str(tree), commit], root, who, instead
        )
        if added.returncode != 0:
            raise WorktreeError(
                f"{who}: git could not check out {revision} ({commit[:12]}) into a temporary "
                f"worktree: {added.stderr.strip()}. Run `git worktree prune` and try again"
            )
        relative = invocation_dir.resolve().relative_to(root.resolve())
        cwd = tree / relative
        if not cwd.is_dir():
            raise WorktreeError(
                f"{who}: {revision} ({commit[:12]}) has no folder {relative} (pytest runs from "
                f"there); run pytest from a folder that exists in both revisions"
            )
        yield Checkout(
            f"{revision} ({commit[:12]})",
            cwd,
            {"PYTHONPATH": _mapped_pythonpath(root, tree)},
            str(root.resolve()),
            str(tree),
        )
    finally:
        run_git(["worktree", "remove", "--force", str(tree)], root, who, instead)
        shutil.rmtree(folder, ignore_errors=True)
        run_git(["worktree", "prune"], root, who, instead)


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
    """``PYTHONPATH`` for a checkout: every import root inside the repository, mapped into the
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
