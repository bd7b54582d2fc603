"""Baseline files: layout, validation, locking and atomic writes.

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

import contextlib
import copy
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
FORMAT = "pytest-torchperf-baselines"
DEFAULT_MAX_HISTORY = 10
ENVIRONMENT_FILE = "environment.json"


class BaselineFileError(Exception):
    """A baseline file is unreadable, foreign, from a newer schema, malformed, or not writable."""

    def __init__(self, path: Path | str, problem: str, remedy: str | None = None) -> None:
        self.path = Path(path)
        self.problem = problem
        if remedy is None:
            remedy = (f"The file was left untouched. Fix it, restore it (git checkout -- {path}), "
                      f"or delete it and record a new baseline with pytest --torchperf-save.")
        super().__init__(f"baseline file {path}: {problem}. {remedy}")


def module_slug(nodeid: str) -> str:
    """File stem for the test module of ``nodeid`` (``tests/test_a.py::t`` -> ``tests__test_a.py``)."""
    module = nodeid.split("::", 1)[0]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "__", module.replace("\\", "/").replace("/", "__"))
    return slug.strip("_") or "root"


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------


def validate_document(doc: Any, path: Path) -> dict[str, Any]:
    """Check a parsed module file; raise :class:`BaselineFileError` naming the offending key."""
    if not isinstance(doc, dict):
        raise BaselineFileError(path, f"top level is a JSON {type(doc).__name__}, expected an object")
    if doc.get("format") != FORMAT:
        raise BaselineFileError(
            path, f"not a pytest-torchperf baseline file (key 'format' is {doc.get('format')!r}, "
                  f"expected {FORMAT!r})",
            "Move it out of the storage folder, or point --torchperf-storage at another folder.")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BaselineFileError(path, f"key 'schema_version' is {version!r}, expected an integer")
    if version > SCHEMA_VERSION:
        raise BaselineFileError(
            path, f"written by a newer pytest-torchperf (schema_version {version} > {SCHEMA_VERSION} "
                  f"understood here)",
            "Upgrade pytest-torchperf (pip install -U pytest-torchperf); the file was left untouched.")
    tests = doc.get("tests")
    if not isinstance(tests, dict):
        raise BaselineFileError(path, "key 'tests' is missing or not an object")
    for nodeid, measurements in tests.items():
        if not isinstance(measurements, dict):
            raise BaselineFileError(path, f"key tests[{nodeid!r}] is not an object")
        for name, entry in measurements.items():
            where = f"tests[{nodeid!r}][{name!r}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("sessions"), list):
                raise BaselineFileError(path, f"key {where}.sessions is missing or not a list")
            for i, session in enumerate(entry["sessions"]):
                _validate_session(session, path, f"{where}.sessions[{i}]")
    return doc


def _validate_session(session: Any, path: Path, where: str) -> None:
    if not isinstance(session, dict):
        raise BaselineFileError(path, f"key {where} is not an object")
    stat = session.get("statistic")
    if not _positive_number(stat):
        raise BaselineFileError(path, f"key {where}.statistic is {stat!r}, expected a positive number "
                                      f"of seconds")
    times = session.get("times")
    if not isinstance(times, list) or not all(_positive_number(t) for t in times):
        raise BaselineFileError(path, f"key {where}.times must be a list of positive numbers "
                                      f"(per-call seconds)")
    calibration = session.get("calibration")
    if calibration is not None and not _positive_number(calibration):
        raise BaselineFileError(path, f"key {where}.calibration is {calibration!r}, expected a positive "
                                      f"number of seconds or null")
    counters = session.get("counters")
    if counters is not None:
        if not isinstance(counters, dict):
            raise BaselineFileError(path, f"key {where}.counters must be an object")
        for key, value in counters.items():
            if key == "ops":
                if not isinstance(value, dict) or not all(
                        isinstance(k, str) and _count(v) for k, v in value.items()):
                    raise BaselineFileError(path, f"key {where}.counters.ops must map op names to "
                                                  f"non-negative integers")
            elif key in ("break_reasons", "dtypes"):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise BaselineFileError(path, f"key {where}.counters.{key} must be a list of "
                                                  f"strings")
            elif not _count(value):
                raise BaselineFileError(path, f"key {where}.counters.{key} is {value!r}, expected a "
                                              f"non-negative integer")
    _validate_variant_fields(session, path, where)
    top_ops = session.get("top_ops")
    if top_ops is not None:
        if not isinstance(top_ops, list):
            raise BaselineFileError(path, f"key {where}.top_ops must be a list")
        for i, row in enumerate(top_ops):
            if (not isinstance(row, dict) or not isinstance(row.get("op"), str)
                    or not all(_non_negative(row.get(k)) for k in ("calls", "self_cpu", "self_device"))):
                raise BaselineFileError(path, f"key {where}.top_ops[{i}] must have 'op' (text) and "
                                              f"non-negative 'calls', 'self_cpu', 'self_device'")


def _validate_variant_fields(session: dict[str, Any], path: Path, where: str) -> None:
    """Optional keys of variant measurements: speedup, accuracy, fingerprint, metric."""
    speedup = session.get("speedup")
    if speedup is not None and (not isinstance(speedup, dict) or not all(
            _positive_number(speedup.get(k)) for k in ("median", "p25", "p75"))):
        raise BaselineFileError(path, f"key {where}.speedup must be an object with positive "
                                      f"'median', 'p25' and 'p75'")
    for key in ("accuracy", "accuracy_limits"):
        value = session.get(key)
        if value is not None and (not isinstance(value, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values())):
            raise BaselineFileError(path, f"key {where}.{key} must map metric names to numbers")
    metric = session.get("metric")
    if metric is not None and (isinstance(metric, bool) or not isinstance(metric, (int, float))):
        raise BaselineFileError(path, f"key {where}.metric is {metric!r}, expected a number or null")
    fp = session.get("fingerprint")
    if fp is not None:
        leaves = fp.get("leaves") if isinstance(fp, dict) else None
        if not isinstance(leaves, list) or not all(
                isinstance(leaf, dict) and isinstance(leaf.get("shape"), list)
                and all(isinstance(v, (int, float)) for v in leaf.get("probe", []))
                and all(isinstance(leaf.get(k, 0.0), (int, float)) for k in ("l2", "mean"))
                for leaf in leaves):
            raise BaselineFileError(path, f"key {where}.fingerprint must be an object whose 'leaves' "
                                          f"list holds shape lists and numeric statistics")


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _non_negative(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _positive_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


# --------------------------------------------------------------------------------------------------
# Serialisation: indented objects, numeric arrays on one line (small, diff-friendly files)
# --------------------------------------------------------------------------------------------------


def dumps(value: Any, indent: int = 0) -> str:
    """Serialise ``value`` as indented JSON with lists of scalars kept on one line."""
    pad = "  " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k))}: {dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return "[" + ", ".join(json.dumps(v, allow_nan=False) for v in value) + "]"
        items = [f"{pad}{dumps(v, indent + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + "  " * indent + "]"
    return json.dumps(value, allow_nan=False)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and ``os.replace``.

    Readers see either the old file or the new one, never a truncated one, even if the process is
    killed mid-write.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; give the file the mode an ordinary open() would (0666 - umask).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock on ``path`` (a file or a folder, created as a file if missing).

    Locking the storage folder itself leaves no lock file behind to be committed by accident.
    A no-op where fcntl is missing (Windows): the atomic replace still prevents truncated files.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    if path.is_dir():
        fd = os.open(path, os.O_RDONLY)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# --------------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------------


class BaselineStore:
    """Reads and writes baseline sessions under one storage folder."""

    def __init__(self, root: Path | str, max_history: int = DEFAULT_MAX_HISTORY) -> None:
        self.root = Path(root)
        self.max_history = max_history
        self._cache: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}

    def module_file(self, env_id: str, nodeid: str) -> Path:
        """Path of the file holding ``nodeid``'s baselines in environment ``env_id``."""
        return self.root / env_id / f"{module_slug(nodeid)}.json"

    def _read(self, path: Path) -> dict[str, Any] | None:
        """Parse and validate ``path``; None when it does not exist."""
        try:
            info = path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise BaselineFileError(path, f"cannot be read ({exc.strerror})",
                                    "Check the permissions of the storage folder.") from None
        # os.replace always makes a new inode, so (inode, size, mtime) catches a replacement even
        # within the filesystem's timestamp resolution.
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        cached = self._cache.get(path)
        if cached and cached[0] == stamp:
            return cached[1]
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BaselineFileError(path, f"cannot be read ({exc.strerror})",
                                    "Check the permissions of the storage folder.") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            what = "is empty" if not text.strip() else f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            raise BaselineFileError(path, what) from None
        validate_document(doc, path)
        self._cache[path] = (stamp, doc)
        return doc

    def load_sessions(self, env_id: str, nodeid: str, name: str) -> list[dict[str, Any]]:
        """Stored sessions (oldest first) of one measurement; empty when none are stored."""
        doc = self._read(self.module_file(env_id, nodeid))
        if doc is None:
            return []
        entry = doc["tests"].get(nodeid, {}).get(name)
        return list(entry["sessions"]) if entry else []

    def record(self, env_id: str, environment: Mapping[str, Any], nodeid: str, name: str,
               session: Mapping[str, Any], *, reset: bool = False) -> Path:
        """Append ``session`` to a measurement's history (or replace it when ``reset``); return the file.

        Read-modify-write happens under an exclusive lock; the write is atomic. An existing file that
        fails validation is left untouched and :class:`BaselineFileError` is raised.
        """
        path = self.module_file(env_id, nodeid)
        _validate_session(dict(session), path, "new session")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(path.parent):
                self._cache.pop(path, None)
                # Work on a copy: a failed write must not leave the new session in the read cache.
                doc = copy.deepcopy(self._read(path)) or {
                    "format": FORMAT, "schema_version": SCHEMA_VERSION,
                    "environment_id": env_id, "module": nodeid.split("::", 1)[0], "tests": {}}
                entry = doc["tests"].setdefault(nodeid, {}).setdefault(name, {"sessions": []})
                sessions = [] if reset else list(entry["sessions"])
                sessions.append(dict(session))
                entry["sessions"] = sessions[-self.max_history:]
                text = dumps(doc) + "\n"  # serialise before touching the file: bad values fail here
                atomic_write_text(path, text)
                env_path = path.parent / ENVIRONMENT_FILE
                if not env_path.exists():
                    atomic_write_text(env_path, dumps(dict(environment)) + "\n")
        except PermissionError as exc:
            raise BaselineFileError(
                exc.filename or path, "cannot be written (permission denied)",
                f"Make {self.root} writable or point --torchperf-storage at a writable folder.") from None
        except NotADirectoryError:
            raise BaselineFileError(
                path, "cannot be written: part of the storage path is a file, not a folder",
                f"Point --torchperf-storage (now {self.root}) at a folder.") from None
        except OSError as exc:
            raise BaselineFileError(
                exc.filename or path, f"cannot be written ({exc.strerror})",
                f"Check free space and permissions of {self.root}.") from None
        except ValueError as exc:  # e.g. NaN/inf in a session: never written, file untouched
            raise BaselineFileError(
                path, f"the new session for {nodeid} {name!r} cannot be stored as JSON ({exc})",
                "This is a bug in pytest-torchperf; please report it with the test.") from None
        self._cache.pop(path, None)
        return path

    def environment(self, env_id: str) -> dict[str, Any]:
        """The stored fingerprint of an environment (empty when missing or unreadable)."""
        try:
            env = json.loads((self.root / env_id / ENVIRONMENT_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return env if isinstance(env, dict) else {}

    def measurements(self) -> Iterator[tuple[str, str, str, list[dict[str, Any]]]]:
        """Every stored measurement: ``(env_id, nodeid, name, sessions)``.

        A file that fails validation raises :class:`BaselineFileError` naming it.
        """
        if not self.root.is_dir():
            return
        for env_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for path in sorted(env_dir.glob("*.json")):
                if path.name == ENVIRONMENT_FILE:
                    continue
                doc = self._read(path) or {"tests": {}}
                for nodeid, entries in sorted(doc["tests"].items()):
                    for name, entry in sorted(entries.items()):
                        yield env_dir.name, nodeid, name, list(entry["sessions"])

    def environments_with(self, nodeid: str, name: str) -> list[tuple[str, dict[str, Any]]]:
        """Other environments holding a baseline for this measurement, with their fingerprints.

        Unreadable files are skipped here: this only feeds the "no comparable baseline" hint.
        """
        found: list[tuple[str, dict[str, Any]]] = []
        if not self.root.is_dir():
            return found
        slug = f"{module_slug(nodeid)}.json"
        for env_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            path = env_dir / slug
            if not path.is_file():
                continue
            try:
                doc = self._read(path)
            except BaselineFileError:
                continue
            if doc and doc["tests"].get(nodeid, {}).get(name):
                try:
                    env = json.loads((env_dir / ENVIRONMENT_FILE).read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    env = {}
                found.append((env_dir.name, env if isinstance(env, dict) else {}))
        return found


def same_run(session_run_id: str | None, run_id: str | None) -> bool:
    """Whether a stored session was saved by run ``run_id`` (its own or one of its child
    processes', ``<run_id>-p<k>``): a run's own sessions are never its baseline or history."""
    if not session_run_id or not run_id:
        return False
    return session_run_id.split("-p", 1)[0] == run_id.split("-p", 1)[0]
