"""Unit tests of the HTML report and its SVG charts (pure rendering, synthetic records)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pytest_torchperf.report import svg
from pytest_torchperf.report.html import History, history_from_sessions, html_report, prose_html
from pytest_torchperf.store.record import Record
from pytest_torchperf.store.sessions import Session


def _read(records: Iterable[Mapping[str, object]]) -> list[Record]:
    """The records as the reports get them: read once from their JSON form."""
    return [Record.from_json(r) for r in records]


def _record(name: str, outcome: str, **extra: object) -> dict:
    samples = [1e-3 * (1 + i / 100) for i in range(20)]
    return {
        "nodeid": "tests/test_m.py::test_m",
        "name": name,
        "outcome": outcome,
        "group": None,
        "stats": {"median": 1.1e-3, "p25": 1.05e-3, "iqr": 1e-4},
        "samples": samples,
        "verdict": {
            "outcome": outcome,
            "baseline_statistic": 1e-3,
            "ratio": 0.05,
            "message": f"{name}: 5.0% slower than baseline",
        },
        "counters": {"flops": 1000, "params": 10, "peak_memory": 2048},
        "counter_changes": [],
        "failures": [],
        **extra,
    }


def test_report_is_self_contained_sorted_and_explains_failures() -> None:
    records = [
        _record("fast", "pass"),
        _record("slow", "fail", counter_changes=["FLOPs +50.0% (10 -> 15)"]),
        _record(
            "m[int8]",
            "pass",
            speedup={"median": 3.0, "p25": 2.9, "p75": 3.1, "n": 9},
            accuracy={"rel_l2": 0.02},
            build_time=4.0,
        ),
    ]
    histories = {
        ("tests/test_m.py::test_m", "fast"): History([1e-3, 1.02e-3], ["a", "b"], [1e-3] * 5)
    }
    page = html_report(
        _read(records),
        "torchperf: compare; device=cpu",
        histories,
        traces=[("t.json", "traces/t.json")],
    )
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)=["']https?://""", page)  # nothing from the network
    assert "<h1>torchperf report: 1 fail, 2 pass</h1>" in page
    attention = page.split("<h2>Needs attention</h2>", 1)[1].split("<h2>", 1)[0]
    assert "slow: 5.0% slower than baseline" in attention
    assert "slow: counters changed: FLOPs +50.0% (10 -&gt; 15)" in attention
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = body.split("</tr>")[:-1]
    assert len(rows) == 3 and ">slow<" in rows[0]  # failures first
    assert body.count("<svg") >= 5  # distributions for all, trends where history or a value exists
    assert "x3.00 (2.90-3.10)" in page and "2.0e-02" in page and "4.0 s" in page
    assert "Variant speedups vs eager" in page and ">int8</text>" in page
    assert '<a href="traces/t.json">t.json</a>' in page
    assert "<script>" in page and "data-col" in page


def test_history_from_sessions_and_charts() -> None:
    sessions = [
        {"statistic": 1e-3, "timestamp": "2026-01-01", "git_sha": "abc", "times": [1e-3, 2e-3]},
        {"statistic": 2e-3, "timestamp": "2026-01-02", "times": [2e-3, 3e-3]},
    ]
    history = history_from_sessions([Session.from_json(s) for s in sessions])
    assert history.statistics == [1e-3, 2e-3] and history.latest_times == [2e-3, 3e-3]
    assert history.labels[0].startswith("2026-01-01 abc p25 1 ms")
    chart = svg.trend(history.statistics, 2.5e-3, failed=True, labels=[*history.labels, "this run"])
    assert chart.count("<circle") == 3 and svg.COLORS["fail"] in chart
    assert svg.distribution([], []) == "" and svg.trend([], None) == ""
    box = svg.distribution([1.0, 2.0, 3.0], [2.0, 2.5, 3.5])
    assert box.count("<rect") == 2 and len(box) < 1500


def test_two_hundred_measurements_stay_small() -> None:
    records = [_record(f"m{i}", "pass") for i in range(200)]
    histories = {
        ("tests/test_m.py::test_m", f"m{i}"): History(
            [1e-3] * 10, [f"s{j}" for j in range(10)], [1e-3] * 100
        )
        for i in range(200)
    }
    page = html_report(_read(records), "env", histories)
    assert len(page.encode()) < 2_000_000


def test_empty_columns_are_left_out_and_secondary_ones_marked() -> None:
    page = html_report(_read([_record("fast", "pass"), _record("slow", "pass")]), "env")
    headers = re.findall(r'<th data-col="\d+"( data-sec="1")?>([^<]+)</th>', page)
    names = [name for _, name in headers]
    # A timing run without variants: no instruction or variant columns of dashes.
    assert "instructions / call" not in names and "speedup vs eager" not in names
    # The plots come right after the verdict's figures (on screen at 1280 px) ...
    assert names[5:8] == ["change", "this run vs baseline", "trend (p25 per session)"]
    # ... and FLOPs, params and peak memory are secondary: collapsed below 1600 px, with a switch.
    assert {name for sec, name in headers if sec} == {"FLOPs", "params", "peak memory"}
    assert page.count('<td data-sec="1" class="num"') == 6  # 3 secondary cells x 2 rows
    assert 'id="allcols"' in page and "show FLOPs, params, peak memory" in page
    assert "(max-width:1599px){body:not(.allcols) [data-sec]{display:none}}" in page
    # The baseline column shows the verdict's baseline.
    assert re.search(r'<td class="num" data-v="0.001">1(\.00)? ms</td>', page), page


def test_a_partial_flop_figure_is_marked_with_the_ops_in_its_tooltip() -> None:
    record = _record("enc", "pass", counters={"flops": 4096, "flops_partial": ["aten::x_mm"]})
    page = html_report(_read([record]), "env")
    assert '<span title="&gt;= 4,096 (partial: no FLOP formula for aten::x_mm)">' in page
    assert "&ge; 4,096 (partial)</span>" in page


def test_a_compiled_variants_missing_counters_say_why_not_a_bare_dash() -> None:
    """A compiled variant's counters are its graphs only: its FLOPs, params and peak memory
    cells read "not counted" and say why in their tooltip (they showed ``-``)."""
    eager = _record("mlp", "pass", variant="eager")
    compiled = _record("mlp", "pass", variant="compiled", counters={"graphs": 1, "graph_breaks": 0})
    amp = _record("mlp", "pass", variant="amp", counters=None)
    page = html_report(_read([eager, compiled, amp]), "env")
    cells = re.findall(r'<td data-sec="1" class="num" data-v="([^"]*)">(.*?)</td>', page)
    assert [text for _, text in cells[:3]] == ["1,000", "10", "2.0 KiB"]  # eager's figures
    once = "FLOPs, parameters and peak memory are counted once per model, on its eager variant."
    why = (
        "Not counted for the compiled variant: its counters are its graphs, graph breaks and "
        f"recompiles, and the eager ops of its model; {once}"
    )
    assert cells[3:6] == [("-1", f'<span class="muted" title="{why}">not counted</span>')] * 3
    assert (
        f"Not counted for the amp variant: its counters are the eager ops of its model; {once}"
        in cells[6][1]
    )
    assert not [text for _, text in cells if text == "-"]


def test_close_speedups_keep_their_figures_apart_from_bars_and_the_x1_line() -> None:
    chart = svg.speedup_bars([("amp", 0.91, 0.88, 0.95), ("fused", 0.89, 0.85, 0.93)])
    figures = re.findall(r'<text x="([\d.]+)" y="[\d.]+" font-size="11">x0\.\d\d', chart)
    ends = [float(x2) for x2 in re.findall(r'<line x1="[\d.]+" x2="([\d.]+)"', chart)[:2]]
    one = float(re.search(r'<line x1="([\d.]+)" x2="[\d.]+" y1="0"', chart).group(1))
    assert len(figures) == 2 and len(set(figures)) == 1  # one column for the figures
    assert all(float(x) > max(*ends, one) + 4 for x in figures)  # right of whiskers and x1


def test_ids_wrap_between_their_parts_and_option_names_stay_whole() -> None:
    """Seen in a report: ``tes t_gru`` (the id column broke anywhere) and ``(--`` at a line's
    end (a browser breaks after a hyphen). Ids wrap only at ``/``, ``::``, ``[`` (and, in a part
    wider than the column, after ``_``); option names in messages are kept on one line."""
    nodeid = "tests/perf/test_recurrent_models.py::test_lstm_language_model_step[compiled]"
    message = (
        "gru: inconclusive ... Re-run on a quieter machine (--torchperf-save-wait=SECONDS), or "
        "store it with --torchperf-max-neighbour-load=100%; 1 -> 2"
    )
    record = _record("gru", "fail", nodeid=nodeid)
    record["verdict"]["message"] = message
    page = html_report(
        _read([record]), "env", coverage_lines=["stored 1", f"run failed: {message}"]
    )
    assert "overflow-wrap:anywhere;font-size" not in page  # no longer on the whole id cell
    assert (
        'data-v="tests/perf/test_recurrent_models.py::test_lstm_language_model_step[compiled]">'
        "tests/<wbr>perf/<wbr>test_recurrent_models.py<wbr>::test_<wbr>lstm_<wbr>language_<wbr>"
        "model_<wbr>step<wbr>[compiled]</td>"
    ) in page
    assert "tests/<wbr>perf/<wbr>test_recurrent_models.py<wbr>::test_<wbr>lstm" in page  # h3
    long = "t.py::test_x[" + "a" * 40 + "]"
    assert f'<wbr><span class="long">[{"a" * 40}]</span>' in html_report(
        _read([_record("m", "pass", nodeid=long)]), "env"
    )
    assert "td.id .long{overflow-wrap:anywhere} .opt{white-space:nowrap}" in page
    kept = (
        '(<span class="opt">--torchperf-save-wait=SECONDS</span>), or store it with '
        '<span class="opt">--torchperf-max-neighbour-load=100%</span>; 1 -&gt; 2'
    )
    assert page.count(kept) == 2  # the needs-attention message and the run-failure line
    # A value ends before a sentence's colon or full stop; a decimal point stays in it.
    assert prose_html("--torchperf-min-cpu-share=0: x --torchperf-max-spread=2.5.") == (
        '<span class="opt">--torchperf-min-cpu-share=0</span>: x '
        '<span class="opt">--torchperf-max-spread=2.5</span>.'
    )
    # A long label wraps inside its pill in the table (a one-line one widened it off screen).
    assert "td .verdict{display:inline-block;white-space:normal}" in page


def test_a_count_in_the_baseline_column_is_said_in_its_header() -> None:
    """A fallback compare's row showed a count (5.53 M) under "baseline p25", beside a median
    of 4.52 ms: a reader took its +0.1 % for a time."""
    counted = {
        **_record("gru", "pass"),
        "instructions": {"per_call": 5_530_000.0},
        "verdict": {"outcome": "pass", "basis": "instructions", "baseline_statistic": 5.53e6},
    }
    page = html_report(_read([counted, _record("mlp", "pass")]), "env")
    headers = re.findall(r'<th data-col="\d+"(?: data-sec="1")?>([^<]+)</th>', page)
    assert "baseline (p25, or instr/call where judged on the count)" in headers, headers
    assert "baseline p25" not in headers
    timed_only = html_report(_read([_record("mlp", "pass")]), "env")
    assert ">baseline p25</th>" in timed_only
