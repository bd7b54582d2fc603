"""Where the measurement kinds' names are still spelled outside their packages: a ratchet.

Issue #38 ("a measurement kind is one package"): a kind's name, and every check on it, belongs
in ``pytest_torchperf/kinds/<kind>/``; the rest of the package asks the kind through the
registry (``judge/kinds.py``, ``run/kinds.py``, ``report/kinds.py``). The goal is an empty
:data:`ALLOWED`. Until then it lists, per file, how many string literals equal to a kind's name
(``"instructions"``, ``"ab"``, ``"kernels"``, ``"time-or-instructions"``, ``"time-and-kernels"``)
the file still holds, with why. Record and JSON keys count too (``record.get("instructions")``):
a key of the file format read outside its kind is a kind check all the same.

The test fails when a file holds more than its entry allows (a new occurrence: ask the kind
instead) and when it holds fewer (lower the entry, so the ratchet never loosens). Pure: it reads
the source, imports nothing of the package.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_torchperf"
#: The built-in kinds' names, and ``kernels``: the key of the GPU kernel time's data.
KIND_NAMES = frozenset(
    {"instructions", "ab", "kernels", "time-or-instructions", "time-and-kernels"}
)

#: File (relative to the repository) -> kind-name literals it may still hold, and why.
ALLOWED: dict[str, int] = {
    # A failure's kind list names the instruction-count failure.
    "pytest_torchperf/judge/failures.py": 1,
    # The engine's inputs: the gate's kind read from files written before gates recorded it
    # (their `instructions` and `ab` keys), the legacy `instructions` key a gate still writes
    # for older readers, and the order of a gate's keys in the files (file format).
    "pytest_torchperf/judge/inputs.py": 8,
    # A counter change in an A/B run is worded against side A.
    "pytest_torchperf/run/result.py": 1,
    # An environment's mode: the instruction environment is filed under the kind's name.
    "pytest_torchperf/store/environment.py": 1,
    # load_results' flat rows (a notebook's DataFrame: its column names and order are public,
    # as a file format is) and a baseline session's keys. Store sits below report, so it
    # cannot ask the kinds' report parts; a store part per kind would give the columns in the
    # registry's order (ab before instructions) and so reorder the DataFrame's.
    "pytest_torchperf/store/results.py": 5,
    # The baseline file schema validates the session's count and kernel-time keys.
    "pytest_torchperf/store/schema.py": 3,
}


def kind_name_literals(root: Path) -> Counter[str]:
    """File (relative to ``root``'s parent) -> string literals equal to a kind's name, outside
    ``kinds/`` (where a kind's own package names itself)."""
    found: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root.parent)
        if relative.parts[1] == "kinds":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in KIND_NAMES:
                found[relative.as_posix()] += 1
    return found


def test_kind_names_outside_their_packages_are_only_the_allowed_ones() -> None:
    found = kind_name_literals(PACKAGE)
    new = {f: n for f, n in found.items() if n > ALLOWED.get(f, 0)}
    assert new == {}, (
        "a kind's name spelled outside pytest_torchperf/kinds/: ask the kind's part through "
        "the registry instead (docs/architecture.md, Measurement kinds)"
    )


def test_the_allow_list_shrinks_as_names_leave() -> None:
    """An entry above what its file holds would let a name come back unnoticed."""
    found = kind_name_literals(PACKAGE)
    assert {f: found.get(f, 0) for f, n in ALLOWED.items() if found.get(f, 0) < n} == {}


def test_the_report_layer_names_no_kind() -> None:
    """The reports ask the kinds' report parts (report/kinds.py); so does the CLI's run
    commands' table."""
    found = kind_name_literals(PACKAGE)
    assert {f: n for f, n in found.items() if f.startswith("pytest_torchperf/report/")} == {}
    assert found.get("pytest_torchperf/cli/runs.py", 0) == 0
    assert found.get("pytest_torchperf/cli/accept.py", 0) == 0


def test_keys_and_comparisons_count_and_a_kinds_package_does_not(tmp_path: Path) -> None:
    package = tmp_path / "pytest_torchperf"
    (package / "report").mkdir(parents=True)
    (package / "kinds" / "ab").mkdir(parents=True)
    (package / "report" / "a.py").write_text(
        'def f(r, v):\n    """instructions"""\n'
        '    return r.get("instructions"), v == "ab", {"kernels": 1}, "instructions per call"\n'
    )
    (package / "kinds" / "ab" / "report.py").write_text('NAME = "ab"\n')
    # The docstring counts as well: it equals a name exactly (a sentence never does).
    assert kind_name_literals(package) == Counter({"pytest_torchperf/report/a.py": 4})
