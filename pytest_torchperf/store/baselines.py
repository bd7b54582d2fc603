"""Baseline files: layout, reading and recording sessions (the file format is :mod:`.schema`,
the atomic, locked writing :mod:`.files`).

Pure module (no torch, no pytest). Layout under the storage folder (default ``.torchperf/``)::

    <storage>/<environment-id>/environment.json        the full fingerprint, for humans and hints
    <storage>/<environment-id>/<test-module-slug>.json  baselines of one test module

A module file holds, per test node id and measurement name, the last ``max_history`` saved sessions
(raw per-call times and summary statistics). Files are reviewable JSON (numeric arrays on one line),
written atomically (temp file + ``os.replace``) under an exclusive lock, so neither an interrupted run
nor two concurrent saves can leave a truncated or mixed file. A file that cannot be trusted is never
rewritten: :class:`BaselineFileError` names it, the problem and the remedy.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_torchperf.core.types import JSON, JSONObject
from pytest_torchperf.store.files import atomic_write_text, dumps, file_lock
from pytest_torchperf.store.schema import (
    FORMAT,
    SCHEMA_VERSION,
    BaselineFileError,
    validate_document,
    validate_session,
)
from pytest_torchperf.store.sessions import Session, SessionError

#: A file's sessions by ``(nodeid, measurement name)``, oldest first.
_Sessions = dict[tuple[str, str], tuple[Session, ...]]

DEFAULT_MAX_HISTORY = 10
ENVIRONMENT_FILE = "environment.json"

__all__ = [
    "DEFAULT_MAX_HISTORY",
    "ENVIRONMENT_FILE",
    "BaselineFileError",
    "BaselineStore",
    "module_slug",
    "same_run",
]


def module_slug(nodeid: str) -> str:
    """File stem for the test module of ``nodeid`` (``tests/test_a.py::t`` -> ``tests__test_a.py``)."""
    module = nodeid.split("::", 1)[0]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "__", module.replace("\\", "/").replace("/", "__"))
    return slug.strip("_") or "root"


# --------------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------------


def shown(path: Path) -> str:
    """A path as a message names it: relative to the working folder where it lies under it
    (``.torchperf/cpu-.../tests__test_m.py.json``, what ``git add`` takes), else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


class BaselineStore:
    """Reads and writes baseline sessions under one storage folder."""

    def __init__(self, root: Path | str, max_history: int = DEFAULT_MAX_HISTORY) -> None:
        self.root = Path(root)
        self.max_history = max_history
        #: Per file: its stamp, its JSON (what a save rewrites) and its sessions, read once.
        self._cache: dict[Path, tuple[tuple[int, int, int], dict[str, Any], _Sessions]] = {}

    def module_file(self, env_id: str, nodeid: str) -> Path:
        """Path of the file holding ``nodeid``'s baselines in environment ``env_id``."""
        return self.root / env_id / f"{module_slug(nodeid)}.json"

    def _read(self, path: Path) -> tuple[dict[str, Any] | None, _Sessions]:
        """Parse and validate ``path`` and read its sessions by ``(nodeid, name)`` (the one
        conversion from the file); ``(None, {})`` when it does not exist."""
        try:
            info = path.stat()
            # os.replace always makes a new inode, so (inode, size, mtime) catches a replacement
            # even within the filesystem's timestamp resolution.
            stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
            cached = self._cache.get(path)
            if cached and cached[0] == stamp:
                return cached[1], cached[2]
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None, {}
        except OSError as exc:
            raise BaselineFileError(
                path,
                f"cannot be read ({exc.strerror})",
                "Check the permissions of the storage folder.",
            ) from None
        try:
            doc: dict[str, Any] = json.loads(text)
        except json.JSONDecodeError as exc:
            # json's own message may end in "at" ("Unterminated string starting at").
            problem = exc.msg.removesuffix(" at")
            what = (
                "is empty"
                if not text.strip()
                else f"is not valid JSON ({problem} at line {exc.lineno} column {exc.colno})"
            )
            raise BaselineFileError(path, what) from None
        validate_document(doc, path)
        sessions = {
            (nodeid, name): tuple(
                _session(s, path, f"tests[{nodeid!r}][{name!r}].sessions[{i}]")
                for i, s in enumerate(entry["sessions"])
            )
            for nodeid, entries in doc["tests"].items()
            for name, entry in entries.items()
        }
        self._cache[path] = (stamp, doc, sessions)
        return doc, sessions

    def load_sessions(self, env_id: str, nodeid: str, name: str) -> list[Session]:
        """Stored sessions (oldest first) of one measurement; empty when none are stored."""
        return list(self._read(self.module_file(env_id, nodeid))[1].get((nodeid, name), ()))

    def names_of(self, env_id: str, nodeid: str) -> list[str]:
        """The measurement names stored for test ``nodeid`` in environment ``env_id``."""
        sessions = self._read(self.module_file(env_id, nodeid))[1]
        return [name for test, name in sessions if test == nodeid]

    def tests_with(self, env_id: str, nodeid: str, name: str) -> list[str]:
        """The other test ids of ``nodeid``'s module file that hold measurement ``name``."""
        sessions = self._read(self.module_file(env_id, nodeid))[1]
        return [test for test, n in sessions if n == name and test != nodeid]

    def record(
        self,
        env_id: str,
        environment: Mapping[str, JSON],
        nodeid: str,
        name: str,
        session: Session,
        *,
        reset: bool = False,
        timing_of_stored: bool = False,
    ) -> Path:
        """Append ``session`` to a measurement's history (or replace it when ``reset``); return the file.
        ``timing_of_stored``: ``session`` is the timing of a session stored without it (``torchperf
        accept --force`` of a pass a guard refused): it replaces that session, so one process's
        run is one session.

        Read-modify-write happens under an exclusive lock; the write is atomic. An existing file that
        fails validation is left untouched and :class:`BaselineFileError` is raised.
        """
        path = self.module_file(env_id, nodeid)
        new = session.to_json()  # the one conversion to the file
        validate_session(new, path, "new session")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(path.parent):
                self._cache.pop(path, None)
                # Work on a copy: a failed write must not leave the new session in the read cache.
                doc = copy.deepcopy(self._read(path)[0]) or {
                    "format": FORMAT,
                    "schema_version": SCHEMA_VERSION,
                    "environment_id": env_id,
                    "module": nodeid.split("::", 1)[0],
                    "tests": {},
                }
                entry = doc["tests"].setdefault(nodeid, {}).setdefault(name, {"sessions": []})
                sessions = [] if reset else list(entry["sessions"])
                if timing_of_stored:
                    sessions = [
                        s
                        for s in sessions
                        if s.get("statistic") is not None or s.get("run_id") != new.get("run_id")
                    ]
                if session.has("graph"):  # the graph's structure: only the latest keeps it
                    sessions = [{k: v for k, v in s.items() if k != "graph"} for s in sessions]
                sessions.append(new)
                entry["sessions"] = sessions[-self.max_history :]
                text = dumps(doc) + "\n"  # serialise before touching the file: bad values fail here
                atomic_write_text(path, text)
                # Written once; again where it is no fingerprint (damaged): reports and
                # cross-machine read it.
                env_path = path.parent / ENVIRONMENT_FILE
                if not self.environment(env_id).get("exact"):
                    atomic_write_text(env_path, dumps(dict(environment)) + "\n")
        except PermissionError as exc:
            raise BaselineFileError(
                exc.filename or path,
                "cannot be written (permission denied)",
                f"Make {self.root} writable or point --torchperf-storage at a writable folder.",
            ) from None
        except NotADirectoryError:
            raise BaselineFileError(
                path,
                "cannot be written: part of the storage path is a file, not a folder",
                f"Point --torchperf-storage (now {self.root}) at a folder.",
            ) from None
        except OSError as exc:
            raise BaselineFileError(
                exc.filename or path,
                f"cannot be written ({exc.strerror})",
                f"Check free space and permissions of {self.root}.",
            ) from None
        except ValueError as exc:  # e.g. NaN/inf in a session: never written, file untouched
            raise BaselineFileError(
                path,
                f"the new session for {nodeid} {name!r} cannot be stored as JSON ({exc})",
                "This is a bug in pytest-torchperf; please report it with the test.",
            ) from None
        self._cache.pop(path, None)
        return path

    # Any: report/stored.py reads its keys unnarrowed (typed by the records branch).
    def environment(self, env_id: str) -> dict[str, Any]:
        """The stored fingerprint of an environment (empty when missing or unreadable)."""
        try:
            env = json.loads((self.root / env_id / ENVIRONMENT_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return env if isinstance(env, dict) else {}

    def environment_problem(self, env_id: str) -> str | None:
        """Why an environment's stored fingerprint cannot be read (None: it can, or there is
        none), with the remedy: reports show its fields as ``?``."""
        path = self.root / env_id / ENVIRONMENT_FILE
        if not path.exists() or self.environment(env_id).get("exact"):
            return None
        return (
            f"{shown(path)}: not a fingerprint (unreadable, not JSON, or no 'exact' fields), so "
            f"its machine shows as ?; restore it (git checkout -- {shown(path)}), or the next "
            f"save in that environment rewrites it"
        )

    def measurements(self) -> Iterator[tuple[str, str, str, list[Session]]]:
        """Every stored measurement: ``(env_id, nodeid, name, sessions)``.

        A file that fails validation raises :class:`BaselineFileError` naming it.
        """
        if not self.root.is_dir():
            return
        for env_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for path in sorted(env_dir.glob("*.json")):
                if path.name == ENVIRONMENT_FILE:
                    continue
                sessions = self._read(path)[1]
                for nodeid, name in sorted(sessions):
                    yield env_dir.name, nodeid, name, list(sessions[nodeid, name])

    def forget(self, selected: Callable[[str, str], bool]) -> list[tuple[Path, str, str, int]]:
        """Remove every stored measurement ``selected(nodeid, name)`` picks, in every
        environment: ``(file, nodeid, name, sessions it held)`` for each one removed.

        A test left without measurements leaves its file; a file left without tests is deleted.
        Each file is rewritten atomically under the folder's lock (as :meth:`record` writes), so a
        save running beside it loses nothing; a file that fails validation raises
        :class:`BaselineFileError` before any file is changed.
        """
        removed: list[tuple[Path, str, str, int]] = []
        if not self.root.is_dir():
            return removed
        files = [
            path
            for env_dir in sorted(p for p in self.root.iterdir() if p.is_dir())
            for path in sorted(env_dir.glob("*.json"))
            if path.name != ENVIRONMENT_FILE
        ]
        for path in files:  # every file valid before any is changed
            self._read(path)
        for path in files:
            env_dir = path.parent
            try:
                with file_lock(env_dir):
                    self._cache.pop(path, None)
                    doc = copy.deepcopy(self._read(path)[0])
                    if doc is None:
                        continue
                    gone = [
                        (nodeid, name, len(entry["sessions"]))
                        for nodeid, entries in doc["tests"].items()
                        for name, entry in entries.items()
                        if selected(nodeid, name)
                    ]
                    if not gone:
                        continue
                    for nodeid, name, _ in gone:
                        del doc["tests"][nodeid][name]
                        if not doc["tests"][nodeid]:
                            del doc["tests"][nodeid]
                    if doc["tests"]:
                        atomic_write_text(path, dumps(doc) + "\n")
                    else:
                        path.unlink()
            except OSError as exc:
                raise BaselineFileError(
                    exc.filename or path,
                    f"cannot be rewritten ({exc.strerror})",
                    f"Check free space and permissions of {self.root}.",
                ) from None
            self._cache.pop(path, None)
            removed += [(path, nodeid, name, n) for nodeid, name, n in gone]
        return removed

    def environments_with(self, nodeid: str, name: str) -> list[tuple[str, JSONObject]]:
        """Other environments holding a baseline for this measurement, with their fingerprints.

        Unreadable files are skipped here: this only feeds the "no comparable baseline" hint.
        """
        found: list[tuple[str, JSONObject]] = []
        if not self.root.is_dir():
            return found
        slug = f"{module_slug(nodeid)}.json"
        for env_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            path = env_dir / slug
            if not path.is_file():
                continue
            try:
                doc = self._read(path)[0]
            except BaselineFileError:
                continue
            if doc and doc["tests"].get(nodeid, {}).get(name):
                found.append((env_dir.name, self.environment(env_dir.name)))
        return found


def _session(data: object, path: Path, where: str) -> Session:
    """A validated session of ``path`` (``where``: its key) as a :class:`Session`."""
    try:
        return Session.from_json(data)
    except SessionError as exc:
        raise BaselineFileError(path, f"key {where}.{exc.problem}") from None


def same_run(session_run_id: str | None, run_id: str | None) -> bool:
    """Whether a stored session was saved by run ``run_id`` (its own or one of its child
    processes', ``<run_id>-p<k>``): a run's own sessions are never its baseline or history."""
    if not session_run_id or not run_id:
        return False
    return session_run_id.split("-p", 1)[0] == run_id.split("-p", 1)[0]
