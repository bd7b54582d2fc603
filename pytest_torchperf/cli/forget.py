"""``torchperf forget TEST [NAME ...]``: remove stored measurements that a renamed or deleted
test (or a measurement renamed or removed within one) left behind, only where git can bring
them back."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from pytest_torchperf.cli.common import baseline_store, some
from pytest_torchperf.core.units import counted
from pytest_torchperf.store.baselines import BaselineStore, shown


def cmd_forget(args: argparse.Namespace) -> int:
    """Remove one test's stored measurements (or those ``names`` of them) from every
    environment. ``test`` matches a whole test id, or the part after its file (``test_mlp``,
    ``TestX::test_y``, ``test_p[1]``): never a test whose id merely contains it, as ``-k``
    would (``test_mlp`` must not remove ``test_mlp_fast``)."""
    names: list[str] = list(args.names or [])

    def picked(nodeid: str, name: str) -> bool:
        return args.test in (nodeid, nodeid.split("::", 1)[-1]) and (not names or name in names)

    store = baseline_store(args.storage)
    # A name after the file can be the same in several files (test_forward): only a whole id
    # picks one of them.
    chosen = [
        (env, nodeid, name) for env, nodeid, name, _ in store.measurements() if picked(nodeid, name)
    ]
    ids = sorted({nodeid for _, nodeid, _ in chosen})
    if len({nodeid.split("::", 1)[0] for nodeid in ids}) > 1:
        quoted = " ".join(shlex.quote(nodeid) for nodeid in ids)
        print(
            f"torchperf: {args.test} names tests in {len(ids)} files ({quoted}): give the whole "
            f"test id of the one to forget",
            file=sys.stderr,
        )
        return 2
    what = " ".join([args.test, *names])
    absent = sorted(set(names) - {name for _, _, name in chosen})
    if not chosen or absent:
        # Several names: all or none, so that a misspelt one does not leave the others half done.
        missing = f"{args.test} {' '.join(absent)}" if chosen else what
        print(
            f"torchperf: no stored measurement of {missing} in {args.storage}"
            f"{_meant(args.test, absent or names, store)} (torchperf show lists the stored test "
            f"ids and names){'; nothing was removed' if chosen else ''}",
            file=sys.stderr,
        )
        return 1
    by_file: dict[Path, set[tuple[str, str]]] = {}
    for env, nodeid, name in chosen:
        by_file.setdefault(store.module_file(env, nodeid), set()).add((nodeid, name))
    undo = _undo(by_file, args.force)
    if undo is None:
        return 2
    removed = store.forget(picked)
    for path, nodeid, name, sessions in removed:
        print(f"removed {nodeid} {name} ({counted(sessions, 'session')}) from {shown(path)}")
    print(f"torchperf: {counted(len(removed), 'measurement')} of {what} removed; {undo}")
    return 0


def _meant(test: str, names: Sequence[str], store: BaselineStore) -> str:
    """What ``forget TEST [NAME ...]`` that matched nothing may have meant: the names the test
    holds where only ``names`` are not stored, its parametrized ids (``TEST[...]``), or the
    stored test closest in spelling."""
    import difflib

    stored = [(nodeid, held) for _, nodeid, held, _ in store.measurements()]
    held = sorted({n for nodeid, n in stored if test in (nodeid, nodeid.split("::", 1)[-1])})
    if held:  # the test is stored: only a measurement's name is not
        noun = "measurements" if len(held) > 1 else "measurement"
        return f"; {test} holds the {noun} {some(held)}"
    ids = {nodeid for nodeid, _ in stored} | {nodeid.split("::", 1)[-1] for nodeid, _ in stored}
    items = sorted(i for i in ids if i.startswith(f"{test}["))
    if items:  # forget takes one item of a parametrized test at a time
        return f"; its parametrized ids are {some(items)}: forget each one"
    # A stored id that holds the given text (test_mlp_small for test_mlp) before one spelt alike
    # (test_loop, which difflib ranks higher for the shorter text).
    holding = sorted(i for i in ids if test in i and ("::" in i) == ("::" in test))
    if holding:
        return f"; did you mean {' or '.join(holding[:3])}{' (or others)' if holding[3:] else ''}?"
    close = difflib.get_close_matches(test, sorted(ids), n=1)
    return f"; did you mean {close[0]}?" if close else ""


def _undo(by_file: dict[Path, set[tuple[str, str]]], force: bool) -> str | None:
    """How to undo forgetting the ``(test, name)`` entries of each file: ``git checkout`` where
    git holds the file as it is (then commit the folder). A file with changes not committed
    (a save of a renamed measurement's new name, an earlier forget) is forgotten from only
    where git's last commit holds the entries as they are, so ``git show HEAD:FILE`` still has
    them; else (an accepted session not committed, a file untracked or ignored) it is refused
    with why (None), unless ``force``. Without git or a repository the user is told nothing can
    undo it."""
    from pytest_torchperf.store.environment import GitError, run_git

    files = sorted(by_file)
    try:
        inside = run_git(["rev-parse", "--is-inside-work-tree"], files[0].parent).returncode == 0
        if not inside:
            return "not in a git repository, so nothing can undo it"
        # Only these files: the folder may hold a save not committed yet (the new name's).
        status = {p: _status(p) for p in files}
        changed = [p for p in files if status[p]]
        lost = [p for p in changed if not _as_committed(p, by_file[p])]
    except GitError as exc:
        if exc.missing:  # no git at all: nothing could have undone it either way
            return f"{exc}, so nothing here can undo it"
        # A git that hangs or fails here cannot be trusted to bring anything back.
        if force:
            return f"{exc}; git could not tell whether it can bring it back (--force)"
        print(f"torchperf: not forgotten: {exc}; pass --force to forget anyway", file=sys.stderr)
        return None
    listed = " ".join(shlex.quote(shown(p)) for p in files)
    if not changed:
        return f"commit the baseline folder (git checkout -- {listed} undoes it)"
    if not lost:
        shows = [f"git show HEAD:{shlex.quote(_in_repository(p))}" for p in changed]
        committed = " and ".join(shows) + (" show them" if len(shows) > 1 else " shows it")
        clean = " ".join(shlex.quote(shown(p)) for p in files if p not in changed)
        # Files git holds as they were are checked out; the others have other changes too.
        checkout = f"git checkout -- {clean} undoes it there; " if clean else ""
        other = "files' other changes are" if len(changed) > 1 else "file's other changes are"
        return (
            f"commit the baseline folder ({checkout}what it removed from "
            f"{' '.join(shlex.quote(shown(p)) for p in changed)} is as git's last commit holds "
            f"it: {committed}; the {other} not committed yet)"
        )
    if force:
        return "git could not bring it back (--force)"
    held = "; ".join(status[p] for p in lost)
    what = (
        "is ignored by git, which could not bring it back; commit it first (git add -f)"
        if all(status[p].startswith("!!") for p in lost)
        else "holds changes git has not committed to what it would forget, which git could "
        "not bring back; commit the folder first (then git checkout undoes the forget)"
    )
    print(
        f"torchperf: not forgotten: {' '.join(shlex.quote(shown(p)) for p in lost)} {what}, or "
        f"pass --force to forget anyway (git status: {held})",
        file=sys.stderr,
    )
    return None


def _status(path: Path) -> str:
    """``path``'s ``git status --porcelain`` line: '' where git holds it as it is; ``??``
    untracked, ``!!`` ignored (git could check out neither), else changes not committed (a
    status that failed, a damaged index say, counts as such: only git's last commit can then
    tell whether forgetting loses anything)."""
    from pytest_torchperf.store.environment import run_git

    # Absolute: git runs in the file's folder, and --storage may be relative to this one.
    done = run_git(["status", "--porcelain", "--ignored", "--", str(path.resolve())], path.parent)
    if done.returncode != 0:
        return f"git status failed: {done.stderr.strip() or done.returncode}"
    return done.stdout.strip()


def _in_repository(path: Path) -> str:
    """``path`` as git names it from the top of its repository (what ``HEAD:PATH`` takes)."""
    from pytest_torchperf.store.environment import run_git

    named = run_git(["ls-files", "--full-name", "--", path.name], path.parent).stdout.strip()
    return named or shown(path)


def _as_committed(path: Path, entries: Collection[tuple[str, str]]) -> bool:
    """Whether git's last commit holds every ``(test, name)`` entry of ``path`` exactly as the
    file now does, so that forgetting them loses nothing git cannot give back."""
    from pytest_torchperf.store.environment import run_git

    head = run_git(["show", f"HEAD:./{path.name}"], path.parent)
    if head.returncode != 0:  # untracked, added but not committed, or no commit yet
        return False
    try:
        committed: Any = json.loads(head.stdout)
        now: Any = json.loads(path.read_text(encoding="utf-8"))
        return all(
            committed["tests"][nodeid][name] == now["tests"][nodeid][name]
            for nodeid, name in entries
        )
    except (ValueError, KeyError, TypeError, OSError):
        return False
