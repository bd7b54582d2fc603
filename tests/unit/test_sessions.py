"""Unit tests of the typed stored session (store/sessions.py): read from a baseline file's JSON
and written back with the same keys, values and key order, unknown keys kept, wrong types named.
Pure: no torch."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pytest_torchperf.store.baselines import BaselineFileError, BaselineStore
from pytest_torchperf.store.schema import FORMAT, SCHEMA_VERSION
from pytest_torchperf.store.sessions import Session, SessionError, session_of, timed_sessions

#: Baseline files the plugin wrote (the example project's, committed): every key a CPU save
#: stores, variants' among them.
EXAMPLE_FILES = sorted(
    p
    for p in (Path(__file__).parents[2] / "example_project" / ".torchperf").glob("*/*.json")
    if p.name != "environment.json"
)

#: A session with keys Session does not type (a kind's, another plugin's), between typed ones.
WITH_UNKNOWN_KEYS = {
    "timestamp": "2026-01-01T00:00:00+00:00",
    "my_plugin": {"nested": [1, 2.5, None, {"deep": True}], "text": "x"},
    "statistic": 1e-3,
    "kernels": {"per_call": 1e-4, "sessions": [1e-4], "launches": 3, "kernels": []},
    "times": [1e-3, 1.1e-3],
    "unprofiled": None,
    "variant": "compiled",
    "gpu_clock": {"lowest_mhz": 1400, "highest_mhz": 1410, "max_mhz": 1980},
    "counted_with": {"valgrind": "valgrind-3.22.0"},
    "stats": {"n": 2, "min": 1e-3, "p25": 1e-3},
    "zzz_last": 7,
}


def example_sessions() -> list[dict]:
    sessions = []
    for path in EXAMPLE_FILES:
        doc = json.loads(path.read_text(encoding="utf-8"))
        for measurements in doc["tests"].values():
            for entry in measurements.values():
                sessions += entry["sessions"]
    return sessions


def test_the_example_projects_baseline_files_are_there() -> None:
    """The round trips below must not pass on no data."""
    assert len(EXAMPLE_FILES) >= 4
    sessions = example_sessions()
    assert len(sessions) > 20
    # Every typed part occurs: variants' facts, the op table, a process of a multi-process save.
    held = {key for s in sessions for key in s}
    assert {"speedup", "fingerprint", "top_ops", "process", "gate", "stats"} <= held


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name[-8:]}/{p.name}")
def test_a_real_baseline_files_sessions_come_back_unchanged(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    for measurements in doc["tests"].values():
        for entry in measurements.values():
            for data in entry["sessions"]:
                session = Session.from_json(data)
                back = session.to_json()
                assert back == data
                assert list(back) == list(data)  # the same key order
                assert json.dumps(back) == json.dumps(data)  # the same values (1 stays 1)


def test_the_store_reads_typed_sessions_and_writes_the_same_sessions_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real file read through the store, its sessions recorded again into another folder:
    each measurement's sessions the same, byte for byte."""
    from pytest_torchperf.store import files

    monkeypatch.setattr(files.os, "fsync", lambda fd: None)  # durability is not tested here
    source = max(EXAMPLE_FILES, key=lambda p: p.stat().st_size)
    env_id = source.parent.name
    copied = tmp_path / "a" / env_id / source.name
    copied.parent.mkdir(parents=True)
    copied.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    stored = list(BaselineStore(tmp_path / "a").measurements())
    assert stored and all(isinstance(s, Session) for *_, sessions in stored for s in sessions)
    again = BaselineStore(tmp_path / "b")
    for env, nodeid, name, sessions in stored:
        for session in sessions:
            again.record(env, {}, nodeid, name, session)
    written = json.loads((tmp_path / "b" / env_id / source.name).read_text(encoding="utf-8"))
    original = json.loads(source.read_text(encoding="utf-8"))
    assert sorted(written["tests"]) == sorted(original["tests"])
    for nodeid, measurements in original["tests"].items():
        for name, entry in measurements.items():
            assert json.dumps(written["tests"][nodeid][name]) == json.dumps(entry)


def test_unknown_keys_are_kept_as_read_in_their_place() -> None:
    session = Session.from_json(WITH_UNKNOWN_KEYS)
    assert session.statistic == 1e-3 and session.times == (1e-3, 1.1e-3)
    assert session.variant == "compiled" and session.stats == {"n": 2, "min": 1e-3, "p25": 1e-3}
    assert list(session.raw) == [
        "my_plugin",
        "kernels",
        "unprofiled",
        "gpu_clock",
        "counted_with",
        "zzz_last",
    ]
    assert session.extra("my_plugin") == WITH_UNKNOWN_KEYS["my_plugin"]
    back = session.to_json()
    assert json.dumps(back) == json.dumps(WITH_UNKNOWN_KEYS)
    # What to_json gives is the caller's: changing it changes no session.
    back["my_plugin"]["nested"].append("x")  # type: ignore[index, union-attr]
    assert session.to_json() == WITH_UNKNOWN_KEYS


def test_a_key_held_as_null_is_told_from_a_missing_one() -> None:
    held = Session.from_json({"statistic": 1e-3, "times": [1e-3], "untimed": None, "gate": None})
    assert held.has("untimed") and held.untimed is None and held.to_json()["untimed"] is None
    missing = Session.from_json({"statistic": 1e-3, "times": [1e-3]})
    assert not missing.has("untimed") and "untimed" not in missing.to_json()
    assert missing.variant == "eager" and "variant" not in missing.to_json()  # older files
    assert held != missing


def test_updated_and_without_keep_the_order_as_a_dict_does() -> None:
    session = Session.from_json({"statistic": 1e-3, "times": [1e-3], "top_ops": [], "kernels": 1})
    untimed = session.without("top_ops", "absent").updated(
        {"statistic": None, "times": [], "untimed": "busy", "kernels": 2}
    )
    assert list(untimed.to_json()) == ["statistic", "times", "kernels", "untimed"]
    assert untimed.to_json() == {"statistic": None, "times": [], "kernels": 2, "untimed": "busy"}
    assert untimed.untimed == "busy" and untimed.raw == {"kernels": 2}
    assert session.has("top_ops") and session.statistic == 1e-3  # unchanged: frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        session.statistic = 2.0  # type: ignore[misc]
    with pytest.raises(SessionError, match="key statistic is 'fast', expected a number"):
        session.updated({"statistic": "fast"})


def test_a_session_built_in_the_package_holds_the_keys_it_was_given() -> None:
    built = Session(statistic=1e-3, times=(1e-3,), counters={"flops": 1}, variant="amp")
    assert built.order == ("statistic", "times", "counters", "variant")
    assert built.to_json() == {
        "statistic": 1e-3,
        "times": [1e-3],
        "counters": {"flops": 1},
        "variant": "amp",
    }
    assert Session().to_json() == {} and Session().variant == "eager"
    ordered = Session(statistic=1e-3, times=(1e-3,), order=("times", "statistic", "group"))
    assert list(ordered.to_json().items()) == [
        ("times", [1e-3]),
        ("statistic", 1e-3),
        ("group", None),
    ]
    assert ordered.json_value("times") == [1e-3]
    with pytest.raises(KeyError):
        ordered.json_value("counters")
    with pytest.raises(ValueError, match="do not match"):
        Session(statistic=1e-3, order=("statistic", "kernels"))  # no value for kernels
    with pytest.raises(ValueError, match="do not match"):
        Session(statistic=1e-3, raw={"kernels": 1}, order=("statistic",))  # no place


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "key session is [1, 2], expected an object"),
        ({"statistic": "fast"}, "key statistic is 'fast', expected a number or null"),
        ({"statistic": True}, "key statistic is True, expected a number or null"),
        ({"times": "1e-3"}, "key times is '1e-3', expected a list of numbers"),
        ({"times": [1e-3, "x"]}, "key times is [0.001, 'x'], expected a list of numbers"),
        ({"threads": "2"}, "key threads is '2', expected an integer or null"),
        ({"number_per_block": 1.5}, "key number_per_block is 1.5, expected an integer or null"),
        ({"variant": None}, "key variant is None, expected text"),
        ({"git_sha": 12}, "key git_sha is 12, expected text or null"),
        ({"stats": {"n": "x"}}, "key stats is {'n': 'x'}, expected an object of numbers or null"),
        ({"speedup": [1.0]}, "key speedup is [1.0], expected an object of numbers or null"),
        ({"gate": "strict"}, "key gate is 'strict', expected an object or null"),
        ({"top_ops": [1]}, "key top_ops is [1], expected a list of objects or null"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_the_key(data: object, message: str) -> None:
    with pytest.raises(SessionError) as raised:
        Session.from_json(data)
    assert str(raised.value) == message


def test_a_baseline_file_with_a_wrongly_typed_key_names_the_file_and_the_key(
    tmp_path: Path,
) -> None:
    """What the schema lets through but a Session cannot hold is refused as the schema refuses
    (a BaselineFileError naming the file, the key and the remedy), and the file is untouched."""
    nodeid, name = "t.py::t", "m"
    doc = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "environment_id": "env",
        "module": "t.py",
        "tests": {nodeid: {name: {"sessions": [{"statistic": 1e-3, "times": [1e-3]}] * 2}}},
    }
    doc["tests"][nodeid][name]["sessions"][1] = {
        "statistic": 1e-3,
        "times": [1e-3],
        "threads": "two",
    }
    path = tmp_path / "env" / "t.py.json"
    path.parent.mkdir()
    text = json.dumps(doc)
    path.write_text(text, encoding="utf-8")
    store = BaselineStore(tmp_path)
    with pytest.raises(BaselineFileError) as raised:
        store.load_sessions("env", nodeid, name)
    message = str(raised.value)
    assert str(path) in message
    assert "key tests['t.py::t']['m'].sessions[1].threads is 'two', expected an integer" in message
    assert "Fix it, restore it (git checkout" in message
    with pytest.raises(BaselineFileError):
        store.record("env", {}, nodeid, name, Session(statistic=1e-3, times=(1e-3,)))
    assert path.read_text(encoding="utf-8") == text


def test_a_records_session_is_read_once_and_timed_sessions_are_the_timed_ones() -> None:
    assert session_of({"name": "m"}) == Session()
    assert session_of({"session": None}) == Session()
    record = {"session": {"statistic": 1e-3, "times": [1e-3], "gate": {"kind": "time"}}}
    assert session_of(record).gate == {"kind": "time"}
    untimed = Session.from_json({"statistic": None, "times": [], "untimed": "busy"})
    timed = Session.from_json({"statistic": 2e-3, "times": [2e-3]})
    assert timed_sessions([untimed, timed, untimed]) == [timed]
