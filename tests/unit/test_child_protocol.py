"""The one child-run protocol: one builder of a child pytest command line
(:class:`pytest_torchperf.run.child_process.ChildCommand`), no other module building one, and one
message format with one reader for a child's file and an A/B side's pipes
(:mod:`pytest_torchperf.core.child_protocol`)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from pytest_torchperf.core.child_protocol import (
    GO_LINE,
    MESSAGE_TYPES,
    At,
    Bye,
    CountLine,
    Go,
    Message,
    MessageError,
    Only,
    PerfTests,
    Ready,
    SampleLine,
    SideResultLine,
    SkippedLine,
    append_message,
    decode,
    encode,
    read_messages,
)
from pytest_torchperf.run.child_process import CHILD_PROCESS_ENV, ChildCommand

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_torchperf"
#: The one module that spells a child pytest command line.
BUILDER = PACKAGE / "run" / "child_process.py"

# -- the builder ------------------------------------------------------------------------------


def test_a_fresh_process_gets_the_controllers_arguments_then_its_own() -> None:
    command = ChildCommand(
        ("tests", "-x", "--junitxml=out.xml"),
        Path("/repo"),
        python=("/usr/bin/python3",),
        child_file=Path("/tmp/child-1.jsonl"),
        own=("-n", "0"),
        overrides=("--torchperf-save-wait=30",),
        process=1,
    )
    assert command.argv() == [
        "/usr/bin/python3",
        "-m",
        "pytest",
        "tests",
        "-x",
        "--junitxml=out.xml",
        "-n",
        "0",
        # '=' always: a separate value would be read as a test path (pytest's check_rootdir).
        "--torchperf-child=/tmp/child-1.jsonl",
        "--junitxml=",  # after the user's: last wins, the child writes no JUnit XML
        "--torchperf-save-wait=30",
    ]


def test_a_confirmation_and_a_counting_child_name_their_tests() -> None:
    confirm = ChildCommand(
        ("tests",),
        Path("."),
        python=("py",),
        child_file=Path("c.jsonl"),
        child_only="t.py::test_a",
        overrides=("--torchperf-save-wait=0",),
    )
    assert confirm.argv()[4:] == [
        "--torchperf-child=c.jsonl",
        "--torchperf-child-only=t.py::test_a",
        "--junitxml=",
        "--torchperf-save-wait=0",
    ]
    counting = ChildCommand(
        ("tests",),
        Path("."),
        python=("py", "-P"),
        child_file=Path("counts.jsonl"),
        child_items=Path("items.json"),
        overrides=("--maxfail=1000000000",),
        launcher=("valgrind", "--tool=callgrind"),
    )
    assert counting.argv() == [
        "valgrind",
        "--tool=callgrind",
        "py",
        "-P",
        "-m",
        "pytest",
        "tests",
        "--torchperf-child=counts.jsonl",
        "--torchperf-child-items=items.json",
        "--junitxml=",
        "--maxfail=1000000000",
    ]


def test_a_plain_run_has_no_child_options_and_leading_options_come_first() -> None:
    # torchperf bisect: a revision's own pytest run, writing a results file, not child lines.
    command = ChildCommand(
        ("-k", "mlp", "--", "tests"),
        Path("/wt"),
        python=("python",),
        leading=("-p", "no:cacheprovider", "--torchperf-json=r.json"),
    )
    assert command.argv() == [
        "python",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--torchperf-json=r.json",
        "-k",
        "mlp",
        "--",
        "tests",
    ]


def test_the_environment_is_this_processs_with_the_childs_on_top() -> None:
    base = {"PATH": "/bin", "PYTEST_ADDOPTS": "-x", "KEEP": "1"}
    command = ChildCommand(
        (),
        Path("."),
        env={"PATH": "/opt/bin", "NEW": "2"},
        unset_env=("PYTEST_ADDOPTS",),
        process=3,
    )
    assert command.environment(base) == {
        "PATH": "/opt/bin",
        "KEEP": "1",
        "NEW": "2",
        CHILD_PROCESS_ENV: "3",
    }
    assert CHILD_PROCESS_ENV not in ChildCommand((), Path(".")).environment({})
    assert base["PYTEST_ADDOPTS"] == "-x"  # the base is not changed


def test_a_child_is_started_from_its_command(tmp_path: Path) -> None:
    import sys

    # Not pytest: after "-c CODE", "-m pytest" are plain arguments of that code.
    command = ChildCommand(
        (),
        tmp_path,
        python=(sys.executable, "-c", "import os, sys; print(os.environ['T_T'], sys.argv)"),
        env={"T_T": "hello"},
    )
    child = command.start(tmp_path / "log")
    assert child.wait(60) == 0
    assert child.log_tail(1) == ["hello ['-c', '-m', 'pytest']"]


# -- no other module builds one ---------------------------------------------------------------


def _declares_an_option(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr in ("addoption", "getoption")


def child_commands_built(path: Path) -> list[str]:
    """Where ``path`` spells a child pytest command line: a string starting with
    ``--torchperf-child`` (an f-string's text is a constant of its own) other than an option's declaration, or ``"-m",
    "pytest"`` in a row."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    declared: set[int] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _declares_an_option(node):
            declared |= {id(arg) for arg in node.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("--torchperf-child") and id(node) not in declared:
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
        elements = (
            node.elts
            if isinstance(node, (ast.List, ast.Tuple))
            else node.args
            if isinstance(node, ast.Call)
            else []
        )
        values = [e.value if isinstance(e, ast.Constant) else None for e in elements]
        if any(a == "-m" and b == "pytest" for a, b in zip(values, values[1:], strict=False)):
            found.append(f"{path.name}:{node.lineno}: '-m', 'pytest'")
    return sorted(found)


def test_only_the_builder_spells_a_child_pytest_command_line() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}: {where}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != BUILDER
        for where in child_commands_built(path)
    ]
    assert offenders == [], "build it with run/child_process.py:ChildCommand"
    assert child_commands_built(BUILDER)  # the check sees the builder's own


def test_the_check_catches_a_command_built_by_hand(tmp_path: Path) -> None:
    module = tmp_path / "mode.py"
    module.write_text(
        "def command(out, args):\n"
        "    add = parser.addoption('--torchperf-child', default=None)\n"
        "    return [sys.executable, '-m', 'pytest', *args, f'--torchperf-child={out}']\n"
        "def other(out):\n"
        "    return ['--torchperf-child-only', 'x']\n",
        encoding="utf-8",
    )
    assert [line.split(": ", 1)[0] for line in child_commands_built(module)] == [
        "mode.py:3",
        "mode.py:3",
        "mode.py:5",
    ]


# -- the messages -----------------------------------------------------------------------------

#: One message of every type.
EVERY_TYPE: list[Message] = [
    SampleLine(
        "t.py::a",
        "mlp",
        2,
        (1e-3, 1.5e-3),
        0.98,
        1e-5,
        None,
        0.1,
        {"median": 1.5},
        {"per_call": 1e-4},
        0.2,
        12.5,
    ),
    CountLine(
        "t.py::a",
        "mlp",
        {"per_call": 5e5},
        "AVX2",
        started=1000.0,
        seconds=12.5,
        device="cpu",
        threads=1,
        limit=0.01,
    ),
    SideResultLine("t.py::a", "mlp", (1e-3, 2e-3), {"counters": {"flops": 5}}, 0.05),
    SkippedLine("t.py::a", "mlp[amp]", "autocast ran no op"),
    PerfTests(("t.py::a", "t.py::b")),
    Ready("A"),
    At("t.py::a", "mlp"),
    Bye("B", 1),
    Only(("t.py::a",)),
    Only(None),
    Go(),
]


def test_every_message_type_encodes_and_decodes_to_itself() -> None:
    assert {m.TYPE for m in EVERY_TYPE} == set(MESSAGE_TYPES)
    for message in EVERY_TYPE:
        line = encode(message)
        assert "\n" not in line
        assert decode(line) == message
        assert decode((line + "\n").encode()) == message  # as a pipe hands it over


def test_the_message_type_is_the_kind_key_last_and_go_is_a_bare_line() -> None:
    # "kind" on disk and on the pipes: older revisions read it (it is no measurement kind).
    for message in EVERY_TYPE:
        if isinstance(message, Go):
            # The sides of older revisions wait for exactly this line.
            assert encode(message) == GO_LINE == "go"
            continue
        data = json.loads(encode(message))
        assert list(data)[-1] == "kind" and data["kind"] == message.TYPE
    # The pipe messages keep the one key older controllers and sides look for.
    assert json.loads(encode(At("t::a", "m"))) == {"at": ["t::a", "m"], "kind": "at"}
    assert json.loads(encode(Bye("A", 1))) == {"bye": "A", "code": 1, "kind": "bye"}
    assert json.loads(encode(Only(None))) == {"only": None, "kind": "only"}


def test_older_revisions_lines_without_a_type_are_read_by_their_shape() -> None:
    # Side A of an A/B run may be an older revision: its file lines have no "kind" ...
    side = decode('{"nodeid": "t::b", "name": "cnn", "times": [1.0], "limit": 0.1}', "side")
    assert side == SideResultLine("t::b", "cnn", (1.0,), {}, 0.1)
    skipped = decode(
        '{"nodeid": "t::b", "name": "c[amp]", "times": [], "skipped": "no op"}', "side"
    )
    assert skipped == SkippedLine("t::b", "c[amp]", "no op")
    # ... nor its pipe messages: each is known by its one key.
    assert decode('{"ready": "A"}') == Ready("A")
    assert decode('{"tests": ["t::a"]}') == PerfTests(("t::a",))
    assert decode('{"at": ["t::a", "m"]}') == At("t::a", "m")
    assert decode('{"bye": "A"}') == Bye("A", 0)
    assert decode('{"only": null}') == Only(None)
    # Where no older shape is expected, a line without a type is none.
    with pytest.raises(MessageError, match="without a message type"):
        decode('{"nodeid": "t::b", "name": "cnn", "times": [1.0]}')


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"nodeid": "t::c", "na', "not a JSON line"),  # torn: the child died writing it
        ("[1, 2]", "not a JSON object"),
        ('{"kind": "timing"}', "unknown message type 'timing'"),
        ('{"kind": "sample", "nodeid": "t::a", "name": "m", "times": [1]}', "without 'process'"),
        (
            '{"kind": "sample", "nodeid": "t::a", "name": "m", "process": 1, "times": ["x"]}',
            "a message of type 'sample' with a bad field",
        ),
        ('{"kind": "at", "at": ["only one"]}', "a message of type 'at' with a bad field"),
        (
            '{"kind": "side", "nodeid": "a", "name": "m", "times": 3}',
            "key times is 3, expected a list of numbers",
        ),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_line_that_is_no_message_says_why(line: str | bytes, why: str) -> None:
    with pytest.raises(MessageError, match=why):
        decode(line)


def test_a_childs_file_skips_torn_foreign_and_other_lines(tmp_path: Path) -> None:
    path = tmp_path / "child.jsonl"
    for message in EVERY_TYPE[:4]:
        append_message(path, message)  # type: ignore[arg-type]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"kind": "sample", "nodeid": "t::x"}\n')  # a field missing
        handle.write("not json\n")
        handle.write('{"nodeid": "t.py::c", "na')  # torn last line
    assert read_messages(path, (SampleLine,)) == [EVERY_TYPE[0]]
    assert read_messages(path, (CountLine, SkippedLine)) == [EVERY_TYPE[1], EVERY_TYPE[3]]
    assert read_messages(tmp_path / "missing.jsonl", (SampleLine,)) == []
