"""Unit tests of pytest_torchperf.report.terminal: the terminal table, count line and detail lines."""

from __future__ import annotations

import pytest

from pytest_torchperf.report.terminal import (
    HEADERS,
    OUTCOME_ORDER,
    count_line,
    detail_lines,
    render_table,
    sort_records,
)
from pytest_torchperf.store.record import Record


def rec(
    nodeid: str,
    outcome: str,
    name: str = "fwd",
    *,
    median: float | None = 2e-3,
    p25: float | None = 1.5e-3,
    baseline: float | None = 1e-3,
    ratio: float | None = 1.5,
    message: str = "",
    suspicious: bool = False,
    notes: tuple[str, ...] = (),
    group: str | None = None,
    verdict: bool = True,
) -> Record:
    """A record shaped like Result.to_record(), read as the reports read it."""
    stats = (
        None
        if median is None
        else {
            "n": 10,
            "min": p25,
            "p25": p25,
            "median": median,
            "p75": median,
            "max": median,
            "mean": median,
            "iqr": median - p25,
        }
    )
    v = None
    if verdict:
        v = {
            "outcome": outcome,
            "message": message or f"{name}: {outcome} message",
            "ratio": ratio,
            "baseline_statistic": baseline,
            "suspicious": suspicious,
            "notes": list(notes),
        }
    return Record.from_json(
        {
            "nodeid": nodeid,
            "name": name,
            "group": group,
            "outcome": outcome,
            "stats": stats,
            "verdict": v,
        }
    )


MIXED = [
    rec("t.py::test_pass", "pass", ratio=1.02),
    rec("t.py::test_new", "new", baseline=None, ratio=None),
    rec("t.py::test_fail", "fail", ratio=1.5),
    rec("t.py::test_measured", "measured", verdict=False),
    rec("t.py::test_improved", "improved", ratio=0.5),
    rec("t.py::test_inconclusive", "inconclusive", ratio=1.3),
    rec("t.py::test_disabled", "disabled", median=None, verdict=False),
]


def test_outcome_order():
    assert OUTCOME_ORDER == (
        "fail",
        "inconclusive",
        "improved",
        "new",
        "removed",
        "pass",
        "measured",
        "disabled",
    )


def test_sort_records_by_severity_then_nodeid_then_name():
    records = [
        rec("b.py::t", "pass"),
        rec("a.py::t", "pass", name="z"),
        rec("a.py::t", "pass", name="a"),
        rec("z.py::t", "fail"),
        rec("c.py::t", "weird"),
        rec("a.py::t", "inconclusive"),
    ]
    ordered = [(r["outcome"], r["nodeid"], r["name"]) for r in sort_records(records)]
    assert ordered == [
        ("fail", "z.py::t", "fwd"),
        ("inconclusive", "a.py::t", "fwd"),
        ("pass", "a.py::t", "a"),
        ("pass", "a.py::t", "z"),
        ("pass", "b.py::t", "fwd"),
        ("weird", "c.py::t", "fwd"),
    ]  # unknown outcomes last


def test_render_table_orders_failures_first():
    lines = render_table(MIXED)
    assert lines[0].split() == HEADERS[:4] + ["baseline", "p25", "change", "verdict"]
    order = [line.split()[0].split("::")[1] for line in lines[1:]]
    assert order == [
        "test_fail",
        "test_inconclusive",
        "test_improved",
        "test_new",
        "test_pass",
        "test_measured",
        "test_disabled",
    ]


def test_render_table_cells():
    lines = render_table(MIXED)
    by_test = {line.split()[0]: line for line in lines[1:]}
    fail = by_test["t.py::test_fail"]
    assert fail.endswith("FAIL")
    assert "+50.0%" in fail
    assert "2 ms" in fail and "1.5 ms" in fail and "1 ms" in fail
    assert by_test["t.py::test_inconclusive"].endswith("INCONCLUSIVE")
    assert by_test["t.py::test_improved"].endswith("improved")
    assert "-50.0%" in by_test["t.py::test_improved"]
    assert by_test["t.py::test_pass"].endswith("pass")
    assert "+2.0%" in by_test["t.py::test_pass"]
    new = by_test["t.py::test_new"]
    assert new.endswith("new")
    assert new.split()[-3:-1] == ["-", "-"]  # no baseline, no change
    measured = by_test["t.py::test_measured"].split()
    assert measured[-1] == "measured" and measured[-3:-1] == ["-", "-"]
    disabled = by_test["t.py::test_disabled"].split()
    assert disabled == ["t.py::test_disabled", "fwd", "-", "-", "-", "-", "disabled"]


def test_render_table_columns_aligned():
    lines = render_table(MIXED)
    verdict_col = lines[0].index("verdict")
    change_end = lines[0].index("change") + len("change")
    for line in lines[1:]:
        # numeric cells are right-aligned: the change column ends where its header ends
        assert line[change_end - 1] != " "
        assert line[verdict_col - 2 : verdict_col] == "  "
        assert line[verdict_col] != " "
    name_col = lines[0].index("name")
    assert all(line[name_col : name_col + 3] == "fwd" for line in lines[1:])


def test_render_table_suspicious_pass_and_group():
    lines = render_table([rec("t.py::x", "pass", suspicious=True, group="convs", name="conv")])
    row = lines[1]
    assert row.endswith("pass (re-measured)")
    assert "conv [convs]" in row


def test_render_table_empty():
    assert render_table([]) == ["  ".join(HEADERS)]


def test_render_table_drops_folders_of_long_test_ids_first():
    long_id = "tests/" + "very_long_directory_name/" * 8 + "test_model.py::test_forward"
    lines = render_table([rec(long_id, "pass")], width=80)
    assert lines[1].split()[0] == "test_model.py::test_forward"
    assert all(len(line) <= 80 for line in lines)


def test_render_table_shortens_long_test_ids_from_the_left():
    long_id = (
        "tests/" + "very_long_directory_name/" * 2 + "test_" + "model_" * 12 + ".py::test_forward"
    )
    lines = render_table([rec(long_id, "pass")], width=80)
    cell = lines[1].split()[0]
    assert cell.startswith("...")
    assert cell.endswith("::test_forward")  # the informative end is kept
    assert long_id.endswith(cell[3:])
    assert all(len(line) <= 80 for line in lines)
    # the test column is exactly as wide as the shortened cell; the name column starts after it
    name_col = lines[0].index("name")
    assert name_col == len(cell) + 2


def test_render_table_test_column_never_narrower_than_20():
    long_id = "x" * 60 + "::t"
    lines = render_table([rec(long_id, "pass", name="n" * 200)], width=80)
    cell = lines[1].split()[0]
    assert len(cell) == 20 and cell.startswith("...")


def test_render_table_short_ids_untouched():
    lines = render_table([rec("t.py::x", "pass")], width=40)
    assert lines[1].startswith("t.py::x ")


def test_count_line():
    assert count_line(MIXED) == (
        "1 fail, 1 inconclusive, 1 improved, 1 new, 1 pass, 1 measured, 1 disabled"
    )
    assert count_line([rec("a", "pass"), rec("b", "pass"), rec("c", "fail")]) == "1 fail, 2 pass"
    assert count_line([]) == ""
    assert count_line(iter([rec("a", "new")])) == "1 new"
    assert count_line([rec("a", "weird")]) == ""  # unknown outcomes are not counted


def test_detail_lines_messages_worth_reading():
    records = [
        rec("t.py::a", "pass", message="a: fine"),
        rec("t.py::b", "fail", message="b: slower\n  how sure: x"),
        rec("t.py::c", "pass", message="c: within limit after re-measure", suspicious=True),
        rec("t.py::d", "new", message="d: no baseline"),
        rec("t.py::e", "improved", message="e: faster"),
        rec("t.py::f", "inconclusive", message="f: noisy"),
        rec("t.py::g", "measured", verdict=False),
        rec("t.py::h", "disabled", median=None, verdict=False),
    ]
    assert detail_lines(records) == [
        "t.py::b: b: slower\n  how sure: x",
        "t.py::f: f: noisy",
        "t.py::e: e: faster",
        "t.py::d: d: no baseline",
        "t.py::c: c: within limit after re-measure",
    ]


def test_detail_lines_notes_follow_their_message_even_for_pass():
    records = [
        rec("t.py::a", "pass", message="a: ok", notes=("noise widened",)),
        rec("t.py::b", "fail", message="b: slow", notes=("n1", "n2")),
    ]
    assert detail_lines(records) == [
        "t.py::b: b: slow",
        "t.py::b: fwd: note: n1",
        "t.py::b: fwd: note: n2",
        "t.py::a: fwd: note: noise widened",
    ]


def test_a_note_or_new_reason_several_measurements_share_is_said_once():
    """Three unchanged measurements saved in one process each printed the same four-line note,
    and three new ones the same missing-folder message: each is said once, naming them."""
    unknown = "one stored session: this machine's process-to-process noise is unknown"
    records = [
        rec("t.py::a", "pass", name="a", message="a: ok", notes=(unknown,)),
        rec("t.py::b", "pass", name="b", message="b: ok", notes=(unknown, "b's own")),
        rec("t.py::c", "new", name="c", message="c: no baseline: the folder x does not exist"),
        rec("t.py::d", "new", name="d", message="d: no baseline: the folder x does not exist"),
    ]
    assert detail_lines(records) == [
        "2 measurements (t.py::c c, t.py::d d): no baseline: the folder x does not exist",
        f"note for 2 measurements (t.py::a a, t.py::b b): {unknown}",
        "t.py::b: b: note: b's own",
    ]


def test_detail_lines_without_verdict_or_message():
    r = rec("t.py::x", "inconclusive", verdict=False)
    assert detail_lines([r]) == []  # nothing to explain: no empty "t.py::x: " line
    assert detail_lines([]) == []


@pytest.mark.parametrize("outcome", OUTCOME_ORDER)
def test_every_outcome_renders(outcome):
    lines = render_table([rec("t.py::x", outcome)])
    assert len(lines) == 2
    assert lines[1].split()[-1].lower() == outcome


def test_render_groups_rows_under_their_test_when_ids_do_not_fit():
    from pytest_torchperf.report.terminal import render

    long_id = "tests/models/test_vision_models.py::test_resnet18_batch1[cpu-float32]"
    records = [rec(long_id, "pass", name="resnet18"), rec("t.py::x", "fail", name="mlp")]
    lines = render(records, width=80)
    assert lines[0].startswith("test / name")
    assert lines[1] == "t.py::x"  # failures first
    assert lines[2].startswith("  mlp") and lines[2].endswith("FAIL")
    assert lines[3] == long_id  # never cut
    assert lines[4].startswith("  resnet18") and lines[4].endswith("pass")


def test_render_keeps_the_flat_table_when_everything_fits():
    from pytest_torchperf.report.terminal import render

    records = [rec("t.py::x", "pass")]
    assert render(records, width=120) == render_table(records, width=120)


def test_an_inconclusive_timing_beside_changed_counters_is_said_too():
    """Its warning points at the summary: a newcomer's run whose counters changed and whose
    timing a busy machine left inconclusive said why only in the warning."""
    r = rec("t.py::m", "inconclusive", "m", message="m: inconclusive, +460.9% ... (busy machine)")
    r = Record.from_json({**r.to_json(), "outcome": "fail", "counter_changes": ["FLOPs +300%"]})
    assert detail_lines([r]) == [
        "t.py::m: m: counters changed: FLOPs +300%",
        "t.py::m: m: inconclusive, +460.9% ... (busy machine)",
    ]
    passed = rec("t.py::m", "pass", "m", message="m: within the limit")
    passed = Record.from_json({**passed.to_json(), "outcome": "fail", "counter_changes": ["x"]})
    assert detail_lines([passed]) == ["t.py::m: m: counters changed: x"]


def test_a_strict_failure_is_said_in_full_under_failures_and_in_a_few_words_here():
    """A newcomer's strict run printed each ~500-character reason twice: as the test's failure
    text and again in the summary. The failure text keeps it; the summary says what failed, as
    it says a counter change."""
    message = "f: inconclusive, +3.0% vs baseline cannot be trusted: ... Re-run on a quieter one."
    r = rec("t.py::f", "fail", "f", message=message, ratio=1.03)
    r = Record.from_json(
        {
            **r.to_json(),
            "verdict": {**r.to_json()["verdict"], "outcome": "inconclusive", "guard": "spread"},
            "failures": [f"{message} (failing: --torchperf-strict)"],
        }
    )
    assert detail_lines([r]) == [
        "t.py::f: f: timing inconclusive (spread, +3.0% vs baseline), failing: --torchperf-strict"
    ]
    # No timing baseline (the save could not time it), failing: ini torchperf_strict.
    untimed = "f: no timing baseline: the save could not time it (busy). Store its timing ..."
    r = rec("t.py::f", "new", "f", message=untimed, ratio=None)
    r = Record.from_json(
        {
            **r.to_json(),
            "outcome": "fail",
            "failures": [f"{untimed} (failing: ini torchperf_strict)"],
        }
    )
    assert detail_lines([r]) == ["t.py::f: f: no timing baseline, failing: ini torchperf_strict"]


def test_measurements_without_a_timing_baseline_share_one_line_with_every_remedy():
    reason = "the save could not time it (other processes kept 99% of the other CPUs busy)"
    group = []
    for name in ("a", "b"):
        message = (
            f"{name}: no timing baseline: {reason}; its counters were gated against the 1 "
            f"stored session. Store its timing with pytest --torchperf-save on a quiet machine, "
            f"or store it anyway with --torchperf-min-cpu-share=0 and "
            f"--torchperf-max-neighbour-load=100%"
        )
        r = rec(f"t.py::{name}", "new", message=message)
        assert r.verdict is not None
        verdict = {**r.verdict.to_json(), "new_reason": reason, "untimed": True}
        r = Record.from_json({**r.to_json(), "verdict": verdict})
        group.append(r)
    (line,) = detail_lines(group)
    assert line.startswith(
        "no timing baseline for 2 measurements (t.py::a fwd, t.py::b fwd): the save "
        "could not time them (other processes kept 99%"
    )
    # Every guard's option the save named, not only the first guard's.
    assert line.endswith(
        "or store it anyway with --torchperf-min-cpu-share=0 and "
        "--torchperf-max-neighbour-load=100%"
    ), line
