"""Unit tests of pytest_torchperf.store (baselines, schema, files): layout, validation, atomic writes, locking."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from pytest_torchperf.store import baselines as storage
from pytest_torchperf.store import files as storage_files
from pytest_torchperf.store.baselines import (
    DEFAULT_MAX_HISTORY,
    ENVIRONMENT_FILE,
    BaselineFileError,
    BaselineStore,
    module_slug,
)
from pytest_torchperf.store.files import (
    atomic_write_text,
    dumps,
    file_lock,
)
from pytest_torchperf.store.schema import (
    FORMAT,
    SCHEMA_VERSION,
    validate_document,
)
from pytest_torchperf.store.sessions import Session

ENV = "cpu-xeon-torch2.14.1-t1-deadbeef"
ENVIRONMENT = {"exact": {"device": "cpu", "threads": 1}, "soft": {"hostname": "box"}}
NODE = "tests/test_model.py::test_forward"
NAME = "forward"


def raw(stat: float = 1e-3, **extra) -> dict:
    """A session as a baseline file holds it."""
    return {"statistic": stat, "times": [stat, stat * 1.1, stat * 0.9], **extra}


def session(stat: float = 1e-3, **extra) -> Session:
    """A session as the package holds it (read from :func:`raw`)."""
    return Session.from_json(raw(stat, **extra))


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def valid_doc(**tests) -> dict:
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "environment_id": ENV,
        "module": "tests/test_model.py",
        "tests": tests or {NODE: {NAME: {"sessions": [raw()]}}},
    }


# --------------------------------------------------------------------------------------------------
# module_slug and layout
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodeid", "slug"),
    [
        ("tests/test_a.py::t", "tests__test_a.py"),
        ("tests/test_a.py::TestX::test_y[param-1]", "tests__test_a.py"),
        ("test_a.py::t", "test_a.py"),
        ("tests\\sub\\test_b.py::t", "tests__sub__test_b.py"),
        ("tests/my tests/test b.py::t", "tests__my__tests__test__b.py"),
        ("/abs/path/test_c.py::t", "abs__path__test_c.py"),
        ("tests/tést.py::t", "tests__t__st.py"),
        ("::t", "root"),
        ("", "root"),
    ],
)
def test_module_slug(nodeid, slug):
    assert module_slug(nodeid) == slug


def test_module_slug_is_a_safe_file_stem():
    for nodeid in ("../../etc/passwd::x", "a/../b.py::x", "C:\\x\\y.py::z"):
        slug = module_slug(nodeid)
        assert "/" not in slug and "\\" not in slug and slug not in ("", ".", "..")
        assert not slug.startswith("_")


def test_module_file_layout(tmp_path):
    store = BaselineStore(tmp_path / ".torchperf")
    assert (
        store.module_file(ENV, NODE) == tmp_path / ".torchperf" / ENV / "tests__test_model.py.json"
    )
    assert store.max_history == DEFAULT_MAX_HISTORY == 10


# --------------------------------------------------------------------------------------------------
# record / load_sessions
# --------------------------------------------------------------------------------------------------


def test_load_sessions_missing_file_and_missing_entries(tmp_path):
    store = BaselineStore(tmp_path)
    assert store.load_sessions(ENV, NODE, NAME) == []
    store.record(ENV, ENVIRONMENT, NODE, NAME, session())
    assert store.load_sessions(ENV, NODE, "other-name") == []
    assert store.load_sessions(ENV, "tests/test_model.py::test_other", NAME) == []
    assert store.load_sessions("other-env", NODE, NAME) == []


def test_record_round_trip(tmp_path):
    store = BaselineStore(tmp_path)
    s = session(
        2e-3, timestamp="2025-01-01T00:00:00+00:00", run_id="abc", stats={"n": 3, "p25": 2e-3}
    )
    path = store.record(ENV, ENVIRONMENT, NODE, NAME, s)
    assert path == store.module_file(ENV, NODE)
    assert path.is_file()
    assert store.load_sessions(ENV, NODE, NAME) == [s]
    # A fresh store (no cache) reads the same thing from disk.
    assert BaselineStore(tmp_path).load_sessions(ENV, NODE, NAME) == [s]
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["format"] == FORMAT
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["environment_id"] == ENV
    assert doc["module"] == "tests/test_model.py"
    assert path.read_text(encoding="utf-8").endswith("}\n")


def test_record_writes_environment_once(tmp_path):
    store = BaselineStore(tmp_path)
    store.record(ENV, ENVIRONMENT, NODE, NAME, session())
    env_file = tmp_path / ENV / ENVIRONMENT_FILE
    assert json.loads(env_file.read_text(encoding="utf-8")) == ENVIRONMENT
    store.record(ENV, {"exact": {"device": "changed"}}, NODE, NAME, session())
    assert json.loads(env_file.read_text(encoding="utf-8")) == ENVIRONMENT  # not overwritten


def test_record_appends_oldest_first(tmp_path):
    store = BaselineStore(tmp_path)
    for i in range(1, 4):
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(i * 1e-3))
    assert [s.statistic for s in store.load_sessions(ENV, NODE, NAME)] == [1e-3, 2e-3, 3e-3]


def test_record_keeps_other_tests_and_names(tmp_path):
    store = BaselineStore(tmp_path)
    other_node = "tests/test_model.py::test_backward"
    store.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3))
    store.record(ENV, ENVIRONMENT, NODE, "second", session(2e-3))
    store.record(ENV, ENVIRONMENT, other_node, NAME, session(3e-3))
    assert [s.statistic for s in store.load_sessions(ENV, NODE, NAME)] == [1e-3]
    assert [s.statistic for s in store.load_sessions(ENV, NODE, "second")] == [2e-3]
    assert [s.statistic for s in store.load_sessions(ENV, other_node, NAME)] == [3e-3]
    assert store.module_file(ENV, other_node) == store.module_file(ENV, NODE)  # same module file


def test_history_capped_at_max_history(tmp_path):
    store = BaselineStore(tmp_path, max_history=3)
    for i in range(1, 6):
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(i * 1e-3))
    stats = [s.statistic for s in store.load_sessions(ENV, NODE, NAME)]
    assert stats == [3e-3, 4e-3, 5e-3]  # the newest three


def test_default_history_cap(tmp_path, no_fsync):
    store = BaselineStore(tmp_path)
    for i in range(1, DEFAULT_MAX_HISTORY + 3):
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(i * 1e-3))
    stats = [s.statistic for s in store.load_sessions(ENV, NODE, NAME)]
    assert len(stats) == DEFAULT_MAX_HISTORY
    assert stats[-1] == pytest.approx((DEFAULT_MAX_HISTORY + 2) * 1e-3)


def test_reset_replaces_history(tmp_path):
    store = BaselineStore(tmp_path)
    for i in range(1, 4):
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(i * 1e-3))
    store.record(ENV, ENVIRONMENT, NODE, "untouched", session(9e-3))
    store.record(ENV, ENVIRONMENT, NODE, NAME, session(7e-3), reset=True)
    assert [s.statistic for s in store.load_sessions(ENV, NODE, NAME)] == [7e-3]
    assert [s.statistic for s in store.load_sessions(ENV, NODE, "untouched")] == [9e-3]


def test_reset_on_empty_history(tmp_path):
    store = BaselineStore(tmp_path)
    store.record(ENV, ENVIRONMENT, NODE, NAME, session(4e-3), reset=True)
    assert [s.statistic for s in store.load_sessions(ENV, NODE, NAME)] == [4e-3]


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"times": [1e-3]}, r"new session\.statistic is None"),
        ({"statistic": -1e-3, "times": [1e-3]}, r"new session\.statistic is -0\.001"),
        ({"statistic": 0, "times": [1e-3]}, r"new session\.statistic is 0"),
        ({"statistic": float("nan"), "times": [1e-3]}, r"new session\.statistic is nan"),
        ({"statistic": True, "times": [1e-3]}, r"new session\.statistic is True"),
        ({"statistic": "1e-3", "times": [1e-3]}, r"new session\.statistic is '1e-3'"),
        ({"statistic": 1e-3}, r"new session\.times must be a list"),
        (
            {"statistic": 1e-3, "times": [1e-3, -1.0]},
            r"new session\.times must be a list of positive",
        ),
        ({"statistic": 1e-3, "times": "1e-3"}, r"new session\.times must be a list"),
    ],
)
def test_record_rejects_invalid_session_without_writing(tmp_path, bad, match):
    store = BaselineStore(tmp_path)
    # Built past Session.from_json's type checks (as the package builds one): the store checks
    # what it writes as it checks what it reads.
    with pytest.raises(BaselineFileError, match=match):
        store.record(ENV, ENVIRONMENT, NODE, NAME, Session(**bad, order=tuple(bad)))
    assert snapshot(tmp_path) == {}


def test_record_copies_session(tmp_path):
    store = BaselineStore(tmp_path)
    s = session(counters={"flops": 1})
    store.record(ENV, ENVIRONMENT, NODE, NAME, s)
    s.counters["flops"] = 99  # mutating the caller's mapping afterwards does not change the store
    assert store.load_sessions(ENV, NODE, NAME)[0].counters == {"flops": 1}
    assert BaselineStore(tmp_path).load_sessions(ENV, NODE, NAME)[0].counters == {"flops": 1}


def test_load_sees_changes_made_by_another_store(tmp_path):
    reader, writer = BaselineStore(tmp_path), BaselineStore(tmp_path)
    writer.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3))
    assert len(reader.load_sessions(ENV, NODE, NAME)) == 1
    writer.record(ENV, ENVIRONMENT, NODE, NAME, session(2e-3))
    assert len(reader.load_sessions(ENV, NODE, NAME)) == 2


def test_load_sees_changes_even_with_identical_mtime(tmp_path):
    reader, writer = BaselineStore(tmp_path), BaselineStore(tmp_path)
    path = writer.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3))
    st = path.stat()
    assert len(reader.load_sessions(ENV, NODE, NAME)) == 1
    writer.record(ENV, ENVIRONMENT, NODE, NAME, session(2e-3))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same timestamp tick as the first write
    assert len(reader.load_sessions(ENV, NODE, NAME)) == 2


# --------------------------------------------------------------------------------------------------
# Validation of existing files: error names the file and the key; the file is left untouched
# --------------------------------------------------------------------------------------------------

CORRUPT = {
    "invalid_json": ('{"format": "pytest-torchperf-baselines", "tests": {', ["is not valid JSON"]),
    "empty": ("", ["is empty"]),
    "whitespace": ("  \n", ["is empty"]),
    "top_level_list": ("[1, 2, 3]", ["top level is a JSON list, expected an object"]),
    "top_level_string": ('"hello"', ["top level is a JSON str"]),
    "foreign": (
        json.dumps({"format": "something-else", "tests": {}}),
        [
            "not a pytest-torchperf baseline file",
            "key 'format' is 'something-else'",
            "Move it out of the baseline folder, or use another folder (pytest --torchperf-storage DIR",
        ],
    ),
    "no_format": (json.dumps({"schema_version": 1, "tests": {}}), ["key 'format' is None"]),
    "newer_schema": (
        json.dumps({**valid_doc(), "schema_version": SCHEMA_VERSION + 1}),
        [f"schema_version {SCHEMA_VERSION + 1} > {SCHEMA_VERSION}", "Upgrade pytest-torchperf"],
    ),
    "schema_not_int": (
        json.dumps({**valid_doc(), "schema_version": "1"}),
        ["key 'schema_version' is '1', expected an integer"],
    ),
    "schema_bool": (
        json.dumps({**valid_doc(), "schema_version": True}),
        ["key 'schema_version' is True"],
    ),
    "missing_tests": (
        json.dumps({"format": FORMAT, "schema_version": 1}),
        ["key 'tests' is missing or not an object"],
    ),
    "tests_is_list": (
        json.dumps({"format": FORMAT, "schema_version": 1, "tests": []}),
        ["key 'tests' is missing or not an object"],
    ),
    "test_not_object": (
        json.dumps(valid_doc(**{NODE: [1]})),
        [f"key tests[{NODE!r}] is not an object"],
    ),
    "no_sessions": (
        json.dumps(valid_doc(**{NODE: {NAME: {}}})),
        [f"key tests[{NODE!r}][{NAME!r}].sessions is missing or not a list"],
    ),
    "empty_sessions": (  # compare said "no baseline for this environment yet" and passed
        json.dumps(valid_doc(**{NODE: {NAME: {"sessions": []}}})),
        [f"key tests[{NODE!r}][{NAME!r}].sessions is empty (to drop the baseline, delete its"],
    ),
    "session_not_object": (
        json.dumps(valid_doc(**{NODE: {NAME: {"sessions": [3]}}})),
        [f"key tests[{NODE!r}][{NAME!r}].sessions[0] is not an object"],
    ),
    "missing_statistic": (
        json.dumps(valid_doc(**{NODE: {NAME: {"sessions": [raw(), {"times": [1e-3]}]}}})),
        [
            f"key tests[{NODE!r}][{NAME!r}].sessions[1].statistic is None",
            "expected a positive number",
        ],
    ),
    "negative_statistic": (
        json.dumps(valid_doc(**{NODE: {NAME: {"sessions": [raw(-1e-3)]}}})),
        [f"key tests[{NODE!r}][{NAME!r}].sessions[0].statistic is -0.001"],
    ),
    "string_statistic": (
        json.dumps(
            valid_doc(**{NODE: {NAME: {"sessions": [{"statistic": "fast", "times": [1e-3]}]}}})
        ),
        [".sessions[0].statistic is 'fast'"],
    ),
    "times_not_list": (
        json.dumps(valid_doc(**{NODE: {NAME: {"sessions": [{"statistic": 1e-3, "times": 1e-3}]}}})),
        [f"key tests[{NODE!r}][{NAME!r}].sessions[0].times must be a list of positive"],
    ),
    "times_with_zero": (
        json.dumps(
            valid_doc(**{NODE: {NAME: {"sessions": [{"statistic": 1e-3, "times": [1e-3, 0]}]}}})
        ),
        [".sessions[0].times must be a list of positive numbers", "but times[1] is 0"],
    ),
    "ops_not_counts": (
        json.dumps(
            valid_doc(**{NODE: {NAME: {"sessions": [raw(counters={"ops": {"aten::mm": "x"}})]}}})
        ),
        [".sessions[0].counters.ops must map op names", "but ops['aten::mm'] is 'x'"],
    ),
    "count_not_a_count": (
        json.dumps(valid_doc(**{NODE: {NAME: {"sessions": [raw(counters={"flops": {"a": 1}})]}}})),
        [".sessions[0].counters.flops is {'a': 1}, expected a non-negative integer"],
    ),
    "negative_count": (
        json.dumps(valid_doc(**{NODE: {NAME: {"sessions": [raw(counters={"graphs": -1})]}}})),
        [".sessions[0].counters.graphs is -1, expected a non-negative integer"],
    ),
    "times_missing": (
        json.dumps(valid_doc(**{NODE: {NAME: {"sessions": [{"statistic": 1e-3}]}}})),
        [".sessions[0].times must be a list"],
    ),
    "nan_statistic": (
        '{"format": "pytest-torchperf-baselines", "schema_version": 1, "tests": '
        '{"t.py::x": {"n": {"sessions": [{"statistic": NaN, "times": [1]}]}}}}',
        [".sessions[0].statistic is nan"],
    ),
}


def _write_module_file(store: BaselineStore, text: str) -> Path:
    path = store.module_file(ENV, NODE)
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_bad_file_raises_naming_path_and_key_and_is_untouched(tmp_path, case):
    text, expected_parts = CORRUPT[case]
    store = BaselineStore(tmp_path)
    path = _write_module_file(store, text)
    before = snapshot(tmp_path)

    with pytest.raises(BaselineFileError) as info:
        store.load_sessions(ENV, NODE, NAME)
    err = info.value
    msg = str(err)
    assert str(path) in msg
    assert err.path == path
    for part in expected_parts:
        assert part in msg
    assert snapshot(tmp_path) == before

    # record() onto the bad file raises too, and leaves it byte-identical (no temp files either).
    with pytest.raises(BaselineFileError) as info:
        BaselineStore(tmp_path).record(ENV, ENVIRONMENT, NODE, NAME, session())
    assert str(path) in str(info.value)
    assert snapshot(tmp_path) == before


def test_default_remedy_mentions_untouched_and_git_checkout(tmp_path):
    store = BaselineStore(tmp_path)
    path = _write_module_file(store, "{")
    with pytest.raises(BaselineFileError) as info:
        store.load_sessions(ENV, NODE, NAME)
    msg = str(info.value)
    assert msg.startswith(f"baseline file {path}: is not valid JSON")
    assert "left untouched" in msg
    assert f"git checkout -- {path}" in msg
    assert "--torchperf-save" in msg
    assert info.value.problem.startswith("is not valid JSON")


def test_invalid_json_reports_line_and_column(tmp_path):
    store = BaselineStore(tmp_path)
    _write_module_file(store, '{\n  "format": \n}')
    with pytest.raises(BaselineFileError, match=r"line 3 column 1"):
        store.load_sessions(ENV, NODE, NAME)


def test_invalid_json_whose_message_ends_in_at_says_it_once(tmp_path):
    """json's "Unterminated string starting at" read "starting at at line 2" in our wording."""
    store = BaselineStore(tmp_path)
    _write_module_file(store, '{\n  "format": "pytest-torch')
    with pytest.raises(BaselineFileError) as info:
        store.load_sessions(ENV, NODE, NAME)
    assert info.value.problem == (
        "is not valid JSON (Unterminated string starting at line 2 column 13)"
    )


def test_older_schema_version_is_accepted(tmp_path):
    store = BaselineStore(tmp_path)
    _write_module_file(store, json.dumps({**valid_doc(), "schema_version": 0}))
    assert len(store.load_sessions(ENV, NODE, NAME)) == 1


def test_validate_document_returns_doc():
    doc = valid_doc()
    assert validate_document(doc, Path("x.json")) is doc


def test_unreadable_file_raises(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    store = BaselineStore(tmp_path)
    path = _write_module_file(store, json.dumps(valid_doc()))
    path.chmod(0)
    try:
        with pytest.raises(BaselineFileError, match="cannot be read"):
            store.load_sessions(ENV, NODE, NAME)
    finally:
        path.chmod(0o644)


def test_read_error_is_wrapped(tmp_path, monkeypatch):
    """Same as above, simulated so it also runs as root."""
    store = BaselineStore(tmp_path)
    path = _write_module_file(store, json.dumps(valid_doc()))
    real_read_text = Path.read_text

    def read_text(self, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    with pytest.raises(BaselineFileError) as info:
        store.load_sessions(ENV, NODE, NAME)
    assert str(path) in str(info.value)
    assert "cannot be read (Permission denied)" in str(info.value)
    assert "Check the permissions" in str(info.value)


# --------------------------------------------------------------------------------------------------
# Atomic writes
# --------------------------------------------------------------------------------------------------


def test_atomic_write_text_creates_parents_and_leaves_no_temp(tmp_path):
    path = tmp_path / "a" / "b" / "f.json"
    atomic_write_text(path, "hello\n")
    assert path.read_text(encoding="utf-8") == "hello\n"
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]
    atomic_write_text(path, "world\n")
    assert path.read_text(encoding="utf-8") == "world\n"
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_atomic_write_failure_keeps_old_file_and_removes_temp(tmp_path, monkeypatch, failing):
    path = tmp_path / "f.json"
    path.write_text("old\n", encoding="utf-8")
    real = getattr(os, failing)
    temp_seen = []

    def boom(*args, **kwargs):
        temp_seen.extend(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage_files.os, failing, boom)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_text(path, "new\n" * 1000)
    monkeypatch.setattr(storage_files.os, failing, real)
    assert temp_seen and temp_seen[0].startswith(".f.json.")  # the temp file existed mid-way ...
    assert path.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # ... and was removed


def test_atomic_write_interrupted_by_keyboard_interrupt(tmp_path, monkeypatch):
    path = tmp_path / "f.json"
    path.write_text("old\n", encoding="utf-8")

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(storage_files.os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(path, "new\n")
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_record_write_failure_keeps_old_baseline(tmp_path, monkeypatch):
    store = BaselineStore(tmp_path)
    path = store.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3))
    before = snapshot(tmp_path)
    real_replace = os.replace

    def failing_replace(src, dst, *args, **kwargs):
        if Path(dst) == path:
            raise OSError(28, "No space left on device", str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(storage_files.os, "replace", failing_replace)
    with pytest.raises(BaselineFileError) as info:
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(2e-3))
    monkeypatch.undo()
    msg = str(info.value)
    assert str(path) in msg
    assert "cannot be written (No space left on device)" in msg
    assert f"Check free space and permissions of {tmp_path}" in msg
    assert snapshot(tmp_path) == before  # old content, no stray temp files
    assert [s.statistic for s in BaselineStore(tmp_path).load_sessions(ENV, NODE, NAME)] == [1e-3]


def test_failed_record_does_not_leak_into_same_store(tmp_path, monkeypatch):
    store = BaselineStore(tmp_path)
    path = store.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3))
    real_replace = os.replace

    def failing_replace(src, dst, *args, **kwargs):
        if Path(dst) == path:
            raise OSError(28, "No space left on device", str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(storage_files.os, "replace", failing_replace)
    with pytest.raises(BaselineFileError):
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(2e-3))
    monkeypatch.undo()
    assert [s.statistic for s in store.load_sessions(ENV, NODE, NAME)] == [1e-3]


def test_record_serialisation_failure_keeps_old_baseline(tmp_path, monkeypatch):
    store = BaselineStore(tmp_path)
    store.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3))
    before = snapshot(tmp_path)
    calls = {"n": 0}
    real_dumps = json.dumps

    def flaky_dumps(*args, **kwargs):  # fails half-way through serialising the document
        calls["n"] += 1
        if calls["n"] == 5:
            raise ValueError("Out of range float values are not JSON compliant")
        return real_dumps(*args, **kwargs)

    monkeypatch.setattr(storage.json, "dumps", flaky_dumps)
    with pytest.raises(BaselineFileError, match="cannot be stored as JSON"):
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(2e-3))
    monkeypatch.undo()
    assert snapshot(tmp_path) == before


def test_permission_error_on_write_simulated(tmp_path, monkeypatch):
    """A read-only folder, simulated (so it runs as root too)."""
    store = BaselineStore(tmp_path / "store")
    path = store.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3))
    before = snapshot(tmp_path)

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path.parent))

    monkeypatch.setattr(storage_files.tempfile, "mkstemp", denied)
    with pytest.raises(BaselineFileError) as info:
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(2e-3))
    monkeypatch.undo()
    msg = str(info.value)
    assert str(path.parent) in msg
    assert "cannot be written (permission denied)" in msg
    assert f"Make {tmp_path / 'store'} writable" in msg
    assert "--torchperf-storage" in msg
    assert snapshot(tmp_path) == before


def test_permission_error_on_read_only_folder(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    store = BaselineStore(tmp_path / "store")
    path = store.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3))
    before = snapshot(tmp_path)
    path.parent.chmod(0o500)
    try:
        with pytest.raises(BaselineFileError) as info:
            store.record(ENV, ENVIRONMENT, NODE, NAME, session(2e-3))
        assert "cannot be written (permission denied)" in str(info.value)
        assert "writable" in str(info.value)
    finally:
        path.parent.chmod(0o755)
    assert snapshot(tmp_path) == before


def test_permission_error_creating_environment_folder(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    root = tmp_path / "store"
    root.mkdir()
    root.chmod(0o500)
    try:
        with pytest.raises(BaselineFileError, match="permission denied"):
            BaselineStore(root).record(ENV, ENVIRONMENT, NODE, NAME, session())
    finally:
        root.chmod(0o755)


# --------------------------------------------------------------------------------------------------
# environments_with
# --------------------------------------------------------------------------------------------------


def test_environments_with_lists_every_env_holding_the_measurement(tmp_path):
    store = BaselineStore(tmp_path)
    env_a = {"exact": {"torch": "2.13.0"}}
    env_b = {"exact": {"torch": "2.14.1"}}
    store.record("env-b", env_b, NODE, NAME, session())
    store.record("env-a", env_a, NODE, NAME, session())
    store.record("env-c", {"exact": {}}, NODE, "other-name", session())
    store.record("env-d", {"exact": {}}, "tests/test_other.py::t", NAME, session())
    assert store.environments_with(NODE, NAME) == [("env-a", env_a), ("env-b", env_b)]  # sorted
    assert store.environments_with(NODE, "missing") == []


def test_environments_with_missing_root(tmp_path):
    assert BaselineStore(tmp_path / "nope").environments_with(NODE, NAME) == []


def test_environments_with_skips_bad_files_and_tolerates_bad_environment(tmp_path):
    store = BaselineStore(tmp_path)
    store.record("env-good", {"exact": {"a": 1}}, NODE, NAME, session())
    store.record("env-noenv", {"exact": {}}, NODE, NAME, session())
    (tmp_path / "env-noenv" / ENVIRONMENT_FILE).unlink()
    store.record("env-badenv", {"exact": {}}, NODE, NAME, session())
    (tmp_path / "env-badenv" / ENVIRONMENT_FILE).write_text("[1, 2]", encoding="utf-8")
    store.record("env-corrupt-env", {"exact": {}}, NODE, NAME, session())
    (tmp_path / "env-corrupt-env" / ENVIRONMENT_FILE).write_text("{", encoding="utf-8")
    bad = tmp_path / "env-corrupt" / store.module_file(ENV, NODE).name
    bad.parent.mkdir()
    bad.write_text("{not json", encoding="utf-8")
    (tmp_path / "stray-file.json").write_text("{}", encoding="utf-8")
    found = dict(store.environments_with(NODE, NAME))
    assert found == {
        "env-good": {"exact": {"a": 1}},
        "env-noenv": {},
        "env-badenv": {},
        "env-corrupt-env": {},
    }
    assert bad.read_text(encoding="utf-8") == "{not json"


# --------------------------------------------------------------------------------------------------
# dumps
# --------------------------------------------------------------------------------------------------


def test_dumps_keeps_numeric_lists_on_one_line():
    doc = {
        "tests": {
            "t": {
                "n": {
                    "sessions": [
                        {"statistic": 1e-3, "times": [0.001, 0.0011, 0.0009], "stats": {"n": 3}}
                    ]
                }
            }
        }
    }
    text = dumps(doc)
    assert '"times": [0.001, 0.0011, 0.0009]' in text
    lines = text.splitlines()
    assert any(line.strip() == '"times": [0.001, 0.0011, 0.0009],' for line in lines)
    assert json.loads(text) == doc


def test_dumps_exact_layout():
    text = dumps({"a": 1, "b": [1, 2], "c": {"d": None}, "e": [{"f": "x"}], "g": {}, "h": []})
    assert text == (
        "{\n"
        '  "a": 1,\n'
        '  "b": [1, 2],\n'
        '  "c": {\n'
        '    "d": null\n'
        "  },\n"
        '  "e": [\n'
        "    {\n"
        '      "f": "x"\n'
        "    }\n"
        "  ],\n"
        '  "g": {},\n'
        '  "h": []\n'
        "}"
    )


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        {"a": [1.5e-07, 2, 3.25], "b": 'x"y\n', "c": True, "d": None, "é": ["ü", 1]},
        [[1, 2], [3, [4, 5]], {"x": [6]}],
        {"nested": {"deep": {"deeper": [{"k": [0.1, 0.2]}, {"k": []}]}}},
        [1, "two", None, False],
        3.14,
        "text",
    ],
)
def test_dumps_round_trips(value):
    assert json.loads(dumps(value)) == value


def test_dumps_tuples_become_lists_and_keys_strings():
    assert json.loads(dumps({1: (1, 2)})) == {"1": [1, 2]}


def test_dumps_rejects_nan():
    with pytest.raises(ValueError):
        dumps({"times": [float("nan")]})
    with pytest.raises(ValueError):
        dumps(float("inf"))


def test_recorded_file_is_reviewable(tmp_path):
    store = BaselineStore(tmp_path)
    path = store.record(ENV, ENVIRONMENT, NODE, NAME, Session(statistic=1e-3, times=(1e-3, 2e-3)))
    text = path.read_text(encoding="utf-8")
    assert '"times": [0.001, 0.002]' in text
    assert text.count("\n") > 5  # indented, not one long line


# --------------------------------------------------------------------------------------------------
# Locking and concurrency
# --------------------------------------------------------------------------------------------------


def test_file_lock_on_missing_file_creates_it(tmp_path):
    target = tmp_path / "sub" / "lockfile"
    with file_lock(target):
        assert target.exists()


def test_file_lock_on_folder_leaves_no_file(tmp_path):
    with file_lock(tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []


def test_file_lock_is_exclusive_between_threads(tmp_path):
    inside = []
    overlap = []
    gate = threading.Barrier(2)

    def worker(tag):
        gate.wait()
        for _ in range(50):
            with file_lock(tmp_path):
                inside.append(tag)
                if len(inside) > 1:
                    overlap.append(tuple(inside))
                inside.remove(tag)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert not overlap


@pytest.fixture
def no_fsync(monkeypatch):
    """fsync is about durability after a crash, not about concurrency: skip it to keep tests fast."""
    monkeypatch.setattr(storage_files.os, "fsync", lambda fd: None)


def test_concurrent_threads_never_lose_records(tmp_path, no_fsync):
    gate = threading.Barrier(2)
    errors = []

    def worker(tag):
        store = BaselineStore(tmp_path, max_history=1000)
        gate.wait()
        try:
            for i in range(15):
                store.record(
                    ENV, ENVIRONMENT, f"tests/test_model.py::test_{tag}_{i}", NAME, session()
                )
                store.record(ENV, ENVIRONMENT, NODE, NAME, session((i + 1) * 1e-3, writer=tag))
        except Exception as exc:  # noqa: BLE001 - pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(tag,)) for tag in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    store = BaselineStore(tmp_path)
    for tag in ("a", "b"):
        for i in range(15):
            assert len(store.load_sessions(ENV, f"tests/test_model.py::test_{tag}_{i}", NAME)) == 1
    shared = store.load_sessions(ENV, NODE, NAME)
    assert len(shared) == 30
    assert sorted(s.extra("writer") for s in shared) == ["a"] * 15 + ["b"] * 15
    assert [p.name for p in (tmp_path / ENV).iterdir() if p.name.endswith(".tmp")] == []


def _process_worker(root: str, tag: str, count: int, start) -> None:
    store = BaselineStore(root, max_history=1000)
    start.wait()
    for i in range(count):
        store.record(ENV, ENVIRONMENT, f"tests/test_model.py::test_{tag}_{i}", NAME, session())
        store.record(ENV, ENVIRONMENT, NODE, NAME, session((i + 1) * 1e-3, writer=tag))


def test_concurrent_processes_never_lose_or_corrupt_records(tmp_path, no_fsync):
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        pytest.skip("needs the fork start method")
    start = ctx.Event()
    procs = [
        ctx.Process(target=_process_worker, args=(str(tmp_path), tag, 20, start))
        for tag in ("p1", "p2")
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]

    path = BaselineStore(tmp_path).module_file(ENV, NODE)
    doc = json.loads(path.read_text(encoding="utf-8"))  # valid JSON
    validate_document(doc, path)
    store = BaselineStore(tmp_path)
    names = [n for n in doc["tests"] if n != NODE]
    assert len(names) == 40  # 2 processes x 20 distinct test names, none lost
    for tag in ("p1", "p2"):
        for i in range(20):
            assert len(store.load_sessions(ENV, f"tests/test_model.py::test_{tag}_{i}", NAME)) == 1
    shared = store.load_sessions(ENV, NODE, NAME)
    assert len(shared) == 40  # 2 x 20 appends to the same history, none lost
    for tag in ("p1", "p2"):  # each writer's sessions in its own order
        assert [s.statistic for s in shared if s.extra("writer") == tag] == [
            (i + 1) * 1e-3 for i in range(20)
        ]
    assert [p.name for p in (tmp_path / ENV).iterdir()] and not [
        p.name for p in (tmp_path / ENV).iterdir() if p.name.endswith(".tmp")
    ]


def test_interrupt_during_write_leaves_previous_file_and_no_temp(tmp_path, monkeypatch):
    # Ctrl-C arrives as KeyboardInterrupt (a BaseException) in the middle of writing a baseline.
    target = tmp_path / "b.json"
    target.write_text("previous baseline\n")

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(storage_files.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        storage_files.atomic_write_text(target, "new contents that must not appear half-written\n")
    assert target.read_text() == "previous baseline\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.json"]


def test_a_baseline_folders_records_show_the_latest_timed_session(tmp_path: Path) -> None:
    """A newcomer's `torchperf report` of a folder whose latest save stored no timing showed
    dashes for every figure, while `torchperf show` gave them."""
    from pytest_torchperf.store.results import stored_records

    store = BaselineStore(tmp_path)
    for stat in (1e-3, 1.2e-3, 1.1e-3):
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(stat))
    untimed = session().updated({"statistic": None, "times": [], "untimed": "CPU share 0.4 < 0.90"})
    store.record(ENV, ENVIRONMENT, NODE, NAME, untimed)
    (record,) = stored_records(tmp_path)
    assert record["stats"]["median"] == pytest.approx(1.1e-3)  # the latest timed session's
    assert record["stored"] == {"baseline": pytest.approx(1.1e-3)}  # the median of the timed
    assert record["session"]["untimed"]  # the latest session itself is still the record's


def test_torchperf_show_counts_the_timed_sessions_apart() -> None:
    """A newcomer's `torchperf show` said 'sessions 5' where a compare said 'the 3 stored
    sessions': the untimed ones hold no timing."""
    from pytest_torchperf.report.stored import session_count

    timed, untimed = session(), session().updated({"statistic": None, "untimed": "busy"})
    assert session_count([timed, timed, timed, untimed, untimed], "time") == "3+2u"
    assert session_count([timed, timed], "time") == "2"


def test_torchperf_show_names_the_count_a_fallback_save_stored() -> None:
    """`torchperf show` of a --torchperf-fallback save's folder said only 'no timing' for a
    measurement whose instruction count a fallback compare judges it by."""
    from pytest_torchperf.report.stored import figures

    untimed = session().updated(
        {"statistic": None, "untimed": "busy", "instructions": {"per_call": 5.53e6}}
    )
    assert figures([untimed], "time")["baseline"] == (
        "no timing (+ 5.53 M instr/call for --torchperf-fallback)"
    )
    assert figures([session()], "time")["baseline"].endswith(" p25")


def test_torchperf_show_says_what_limit_a_compare_holds_each_baseline_to() -> None:
    """A newcomer's `torchperf show` listed 523 us for a measurement whose stored sessions
    implied no gate: nothing there said a compare could not judge it."""
    from pytest_torchperf.report.stored import compare_limit

    gate = {"gate": {"max_slowdown": 0.10, "max_widening": 3.0}}
    steady = [session(s, **gate) for s in (160e-6, 161e-6, 159e-6, 162e-6, 160e-6)]
    jumpy = [session(s, **gate) for s in (262e-6, 163e-6, 256e-6, 323e-6, 156e-6)]
    assert compare_limit(steady, "time") == ("10%", None)
    assert compare_limit(jumpy, "time") == (
        "no gate",
        "138.07% > 30%: timing cannot gate here: use --torchperf-instructions or --torchperf-ab",
    )
    # Under 100 %, the factor that accepts it (as the save and the compare name it).
    tight = {"gate": {"max_slowdown": 0.10, "max_widening": 1.0}}
    wavy = [session(s, **tight) for s in (1.0e-3, 1.05e-3, 0.95e-3, 1.02e-3, 0.98e-3)]
    limit, why = compare_limit(wavy, "time")
    assert limit == "no gate" and str(why).endswith(": --torchperf-max-widening=2 accepts it")
    assert compare_limit(steady[:1], "time") == ("10%", "1 session: noise unknown")
    untimed = session().updated({"statistic": None, "untimed": "busy"})
    assert compare_limit([untimed], "time") == ("-", None)


def test_torchperf_show_fits_a_terminal_whatever_the_ids_and_reasons(tmp_path, capsys) -> None:
    """A newcomer's `torchperf show` was 315 characters wide: the environment and mode in every
    row, the test id beside the name, a reason's whole sentence in a cell; then 143 for a
    3-model project: `0 timed (+1 untimed)` sessions, a variant column its name repeats
    (`mlp[int8]`), a `compare judges at` header over 7-character cells."""
    from pytest_torchperf import cli

    store = BaselineStore(tmp_path)
    node = "tests/perf/test_rather_long_module.py::test_transformer_forward[cuda-bf16-batch64]"
    busy = "other processes kept 99.21% of the other CPUs busy while timing (limit 50%)"
    store.record(ENV, ENVIRONMENT, node, "tfm", session(timestamp="2026-11-29T06:21:36+00:00"))
    for _ in range(2):
        untimed = session().updated({"statistic": None, "untimed": busy})
        store.record(ENV, ENVIRONMENT, NODE, NAME, untimed)
    assert cli.main(["show", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 120, "\n".join(lines)  # 133 before
    assert lines[:2] == [f"environment {ENV} (mode time)", lines[1]]
    assert lines[1].split()[:3] == ["test", "/", "name"] and "saved (UTC)" in lines[1]
    assert lines[2] == node and lines[3].split()[:2] == ["tfm", "1"]
    assert "10% [1]" in lines[3] and "2026-11-29 06:21:36" in lines[3]
    assert lines[4] == NODE and "no timing [2]" in lines[5] and " 0+2u " in lines[5]
    assert lines[6:] == [
        "[1] 1 session: noise unknown",
        f"[2] {busy}",
        "sessions N+Mu: N timed (their median is the baseline), M saved without a timing",
    ]
    assert cli.main(["list", str(tmp_path)]) == 0  # printed ISO (2026-11-29T06:21:36+00:00)
    header, row = capsys.readouterr().out.splitlines()
    assert header.endswith(" last saved (UTC)") and row.endswith(" 2026-11-29 06:21:36"), row


def test_torchperf_show_notes_only_the_reasons_not_names_or_counts(tmp_path, capsys) -> None:
    """`torchperf show` footnoted any long cell ending in parentheses: a measurement named
    `conv (batch 8, channels_last)` read `conv [1]`, and a fallback save's stored count was a
    note too."""
    from pytest_torchperf import cli

    name = "conv (batch 8, channels_last)"
    counted = session(instructions={"per_call": 5e6, "windows": [5e6, 5e6], "functions": {}})
    BaselineStore(tmp_path).record(ENV, ENVIRONMENT, NODE, name, counted)
    assert cli.main(["show", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].split("  ")[1] == name, lines
    assert "1 ms p25 (+ 5.00 M instr/call for --torchperf-fallback)" in lines[3]
    assert lines[4:] == ["[1] 1 session: noise unknown"]


@pytest.mark.parametrize("timed_before", [0, 2])
def test_torchperf_compare_of_a_folder_names_a_measurement_its_latest_save_did_not_time(
    tmp_path, capsys, timed_before
) -> None:
    """`torchperf compare .torchperf .torchperf` raised IndexError from the judge where a
    measurement's every stored session was saved without timing (a busy machine); where an
    earlier save timed it, that save's samples were judged against a baseline holding them: a
    pass, always."""
    from pytest_torchperf import cli

    busy = "CPU share 0.66 < 0.90"
    store = BaselineStore(tmp_path)
    for run in range(timed_before):
        store.record(ENV, ENVIRONMENT, NODE, NAME, session(1e-3 * (run + 1), run_id=f"r{run}"))
    untimed = session().updated({"statistic": None, "times": [], "untimed": busy, "run_id": "u"})
    store.record(ENV, ENVIRONMENT, NODE, NAME, untimed)
    # A compare that judged nothing exits 1: in CI it must not read as a clean compare.
    assert cli.main(["compare", str(tmp_path), str(tmp_path)]) == 1
    captured = capsys.readouterr()
    out = captured.out
    assert (
        f"{NAME}: not compared: the latest save stored no timing ({busy}); save it again on a "
        f"quieter machine"
    ) in out
    assert "pass" not in out and "nothing compared" in out
    assert "the compare judged no measurement, so it cannot pass" in captured.err


def test_a_stored_time_prints_in_utc_whatever_the_viewers_zone(monkeypatch) -> None:
    """A timestamp without an offset printed shifted by the viewer's zone under '(UTC)', where
    torchperf history reads it as UTC."""
    import time

    from pytest_torchperf.report.stored import saved_time

    monkeypatch.setenv("TZ", "America/New_York")
    if hasattr(time, "tzset"):
        time.tzset()
    try:
        assert saved_time("2026-11-29T06:21:36") == "2026-11-29 06:21:36"
        assert saved_time("2026-11-29T01:21:36-05:00") == "2026-11-29 06:21:36"
        assert (saved_time("yesterday"), saved_time(None)) == ("yesterday", "?")
    finally:
        monkeypatch.undo()
        if hasattr(time, "tzset"):
            time.tzset()


def test_forget_removes_what_it_picks_in_every_environment_and_nothing_else(tmp_path):
    """``torchperf forget``'s store half: a renamed test's entries go from every environment;
    a test left without measurements goes, and a file left without tests."""
    store = BaselineStore(tmp_path)
    other_env = ENV.replace("deadbeef", "cafef00d")
    for env in (ENV, other_env):
        store.record(env, ENVIRONMENT, "t.py::test_a", "a", session())
        store.record(env, ENVIRONMENT, "t.py::test_a", "a", session())
        store.record(env, ENVIRONMENT, "t.py::test_a", "a2", session())
        store.record(env, ENVIRONMENT, "t.py::test_ab", "a", session())
    store.record(ENV, ENVIRONMENT, "u.py::test_a", "a", session())
    removed = store.forget(lambda nodeid, name: nodeid.endswith("::test_a") and name == "a")
    assert [(p.parent.name, p.name, t, n, k) for p, t, n, k in removed] == [
        (other_env, "t.py.json", "t.py::test_a", "a", 2),
        (ENV, "t.py.json", "t.py::test_a", "a", 2),
        (ENV, "u.py.json", "u.py::test_a", "a", 1),
    ]
    left = sorted((env, t, n) for env, t, n, _ in BaselineStore(tmp_path).measurements())
    assert left == sorted(
        (env, t, n)
        for env in (ENV, other_env)
        for t, n in [("t.py::test_a", "a2"), ("t.py::test_ab", "a")]
    )
    assert not (tmp_path / ENV / "u.py.json").exists()  # no test left in it
    assert store.forget(lambda nodeid, name: name == "a2") and not (
        tmp_path / ENV / "t.py.json"
    ).read_text().count('"a2"')
    doc = json.loads((tmp_path / ENV / "t.py.json").read_text())
    assert list(doc["tests"]) == ["t.py::test_ab"]  # test_a had nothing left


def test_forget_leaves_a_damaged_file_and_everything_else_untouched(tmp_path):
    store = BaselineStore(tmp_path)
    store.record(ENV, ENVIRONMENT, "t.py::test_a", "a", session())
    (tmp_path / ENV / "u.py.json").write_text("{")
    before = snapshot(tmp_path)
    with pytest.raises(BaselineFileError, match=r"u\.py\.json.*not valid JSON"):
        store.forget(lambda nodeid, name: True)
    assert snapshot(tmp_path) == before  # t.py.json, read first, was not changed either


def test_an_unwritable_path_names_the_file_in_the_way(tmp_path: Path) -> None:
    """``--torchperf-html afile/report.html`` said only ``File exists`` (mkdir's errno)."""
    from pytest_torchperf.store.files import why_unwritable

    (tmp_path / "afile").write_text("")
    target = tmp_path / "afile" / "sub" / "report.html"
    with pytest.raises(OSError) as raised:
        atomic_write_text(target, "x")
    assert why_unwritable(target, raised.value) == f"{tmp_path / 'afile'} is a file, not a folder"
    denied = OSError(13, "Permission denied")
    assert why_unwritable(tmp_path / "ok.html", denied) == "Permission denied"


@pytest.mark.parametrize("damage", ["{", '{"soft": {}}', "[]"])
def test_a_damaged_environment_file_is_named_by_list_and_rewritten_by_a_save(
    tmp_path, capsys, damage
) -> None:
    """A truncated environment.json was used without a word: `torchperf list` showed `?` for
    the machine, and saves never rewrote it. (A readable one is the user's: written once.)"""
    from pytest_torchperf import cli

    store = BaselineStore(tmp_path)
    store.record(ENV, ENVIRONMENT, NODE, NAME, session())
    env_file = tmp_path / ENV / "environment.json"
    env_file.write_text(damage)
    assert cli.main(["list", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"torchperf: warning: {env_file}: not a fingerprint (unreadable, not JSON" in err
    assert "or the next save in that environment rewrites it" in err
    BaselineStore(tmp_path).record(ENV, ENVIRONMENT, NODE, NAME, session())
    assert json.loads(env_file.read_text()) == ENVIRONMENT
    # An intact one is left as it is (written once).
    before = env_file.stat().st_mtime_ns
    BaselineStore(tmp_path).record(ENV, ENVIRONMENT, NODE, NAME, session())
    assert env_file.stat().st_mtime_ns == before


def test_a_newer_versions_counters_are_read_and_kept_by_a_save(tmp_path: Path) -> None:
    """Review: a session holding a counter this version does not know (``model_ops`` read by the
    version before it) was called corrupt: ``counters.model_ops is {...}, expected a
    non-negative integer``. A key it does not know is not checked (no comparison reads it),
    whatever it holds, and a save here keeps it; a key it knows must still hold its type."""
    newer = {"flops": 10, "kernel_ops": {"aten::mm": 2}, "backends": ["inductor"], "note": "x"}
    store = BaselineStore(tmp_path)
    path = _write_module_file(
        store, json.dumps(valid_doc(**{NODE: {NAME: {"sessions": [raw(counters=newer)]}}}))
    )
    (loaded,) = store.load_sessions(ENV, NODE, NAME)
    assert loaded.counters == newer
    store.record(ENV, ENVIRONMENT, NODE, NAME, session(counters={"flops": 10}))
    kept = json.loads(path.read_text())["tests"][NODE][NAME]["sessions"]
    assert [s["counters"] for s in kept] == [newer, {"flops": 10}]
