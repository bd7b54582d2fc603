"""The terminal summary table: one row per measurement, failures first.

Pure module working on the run's records (:class:`pytest_torchperf.store.record.Record`, read from
the JSON of :meth:`pytest_torchperf.run.result.Result.to_record`), so the same rendering serves a
plain run and an xdist controller that only sees test reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from pytest_torchperf.core.json_fields import json_number, json_texts
from pytest_torchperf.core.units import format_change, format_time
from pytest_torchperf.judge.labels import inconclusive_head, outcome_label, outcome_word
from pytest_torchperf.report import kinds
from pytest_torchperf.report.kind_report import Column
from pytest_torchperf.store.record import Record, RecordedVerdict

#: Row order of outcomes: what needs attention first.
OUTCOME_ORDER = (
    "fail",
    "inconclusive",
    "improved",
    "new",
    "removed",
    "pass",
    "measured",
    "disabled",
)


def severity(outcome: str) -> int:
    """An outcome's place in :data:`OUTCOME_ORDER` (an unknown one after them all)."""
    return OUTCOME_ORDER.index(outcome) if outcome in OUTCOME_ORDER else len(OUTCOME_ORDER)


def sort_records(records: Iterable[Record]) -> list[Record]:
    """Records ordered by outcome severity, then test id and name."""
    return sorted(records, key=lambda r: (severity(r.outcome), r.nodeid, r.name))


def format_speedup(speedup: Mapping[str, float] | None) -> str:
    """``x1.84 (1.80-1.90)``: median speedup vs eager and the IQR of the interleaved rounds."""
    if not speedup:
        return "-"
    return f"x{speedup['median']:.2f} ({speedup['p25']:.2f}-{speedup['p75']:.2f})"


def format_accuracy(accuracy: Mapping[str, float] | None) -> str:
    """``3.4e-02`` relative L2 error vs eager (``top1 94%`` appended when below 100 %)."""
    if not accuracy or "rel_l2" not in accuracy:
        return "-"
    text = f"{accuracy['rel_l2']:.1e}"
    if accuracy.get("top1") is not None and accuracy["top1"] < 1.0:
        text += f" top1 {accuracy['top1']:.0%}"
    return text


def format_baseline(verdict: RecordedVerdict | None, record: Record | None = None) -> str:
    """The verdict's baseline: seconds per call, or the figure of the kind that judged it in its
    own words (instructions per call). In a save without a verdict, what the save left stored
    (``256 us stored``: the median of the stored sessions' p25, which a compare holds a pass
    against, not this run's p25)."""
    verdict = verdict or RecordedVerdict()
    value = verdict.baseline_statistic
    wording = kinds.baseline_wording(verdict.basis)
    if wording is not None:
        return wording(value)
    stored = (record.stored if record is not None else None) or {}
    if value is None and stored.get("baseline"):
        return f"{format_time(json_number(stored['baseline']))} stored"
    return format_time(value)


def format_change_of(record: Record) -> str:
    """The verdict's change, with what its kind adds (an A/B run's 95 % interval:
    ``+12.4% [+9.8..+15.1%]``)."""
    ratio = record.verdict.ratio if record.verdict else None
    return format_change(ratio) + kinds.change_suffix(record)


def format_flops(counters: Mapping[str, object]) -> str:
    """``2,228,224``; a figure that leaves heavy ops out (no FLOP formula for them) reads
    ``>= 4,096 (partial: no FLOP formula for aten::x)``."""
    if "flops" not in counters:
        return "-"
    text = f"{counters['flops']:,}"
    partial = json_texts(counters.get("flops_partial"))
    if partial:
        text = f">= {text} (partial: no FLOP formula for {', '.join(partial)})"
    return text


def _row(record: Record, variants: bool, columns: Sequence[Column]) -> list[str]:
    stats = record.stats
    row = [
        record.nodeid,
        record.name + (f" [{record.group}]" if record.group else ""),
        format_time(stats.median if stats else None),
        format_time(stats.p25 if stats else None),
    ]
    row += [column.cell(record) for column in columns]
    row += [format_baseline(record.verdict, record), format_change_of(record)]
    if variants:
        row += [format_speedup(record.speedup), format_accuracy(record.accuracy)]
    return [*row, outcome_label(record)]


HEADERS = ["test", "name", "median", "p25", "baseline p25", "change", "verdict"]
#: Extra columns when any measurement is a variant.
VARIANT_HEADERS = ["speedup vs eager", "rel-L2 vs eager"]


def table(records: Sequence[Record]) -> tuple[list[str], list[list[str]]]:
    """The table's headers and rows (in :func:`sort_records`' order), as the terminal and
    markdown show them: the kinds' columns after the timing, and the baseline and change as a
    kind whose figures the records carry names them (a count where the verdict compared
    instructions; side A, measured in the same job, in an A/B run)."""
    variants = any(r.speedup or r.accuracy for r in records)
    columns = kinds.columns(records)
    headers = [
        *HEADERS[:4],
        *(column.header for column in columns),
        kinds.header(records, "baseline", HEADERS[4]),
        kinds.header(records, "change", HEADERS[5]),
        *(VARIANT_HEADERS if variants else ()),
        HEADERS[-1],
    ]
    return headers, [_row(r, variants, columns) for r in sort_records(records)]


def _widths(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [
        max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
        for i, h in enumerate(headers)
    ]


def _line(row: Sequence[str], widths: Sequence[int], left: int) -> str:
    """A row's line: its first ``left`` cells left-aligned, the figures right-aligned, then the
    verdict as it is (the header line: every header left-aligned, an empty verdict)."""
    cells = [c.ljust(w) for c, w in zip(row[:left], widths, strict=False)]
    cells += [c.rjust(w) for c, w in zip(row[left:-1], widths[left:-1], strict=False)]
    return "  ".join([*cells, row[-1]]).rstrip()


def render_table(records: Sequence[Record], width: int = 120) -> list[str]:
    """Plain-text table lines; long test ids are shortened from the left to fit ``width``."""
    headers, rows = table(records)
    widths = _widths(headers, rows)
    other = sum(widths[1:]) + 2 * (len(headers) - 1)
    max_test = max(20, width - other)
    if widths[0] > max_test:
        # First drop the folders (the file name and test keep their meaning), then cut from the left.
        for row in rows:
            module, sep, rest = row[0].partition("::")
            row[0] = module.rsplit("/", 1)[-1] + sep + rest
        widths[0] = min(max_test, max(len(h) for h in [headers[0], *(row[0] for row in rows)]))
        for row in rows:
            if len(row[0]) > widths[0]:
                row[0] = "..." + row[0][-(widths[0] - 3) :]
    return [_line([*headers, ""], widths, len(headers)), *(_line(r, widths, 2) for r in rows)]


def grouped_lines(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` (test id, name, figures...) under ``headers``: each test id on its own line, its
    measurements' rows indented below it, the figures right-aligned, nothing cut. Tests keep the
    order their first rows come in (of :func:`table`'s rows: their most severe outcome first)."""
    headers = ["test / name", *headers[2:]]
    by_test: dict[str, list[list[str]]] = {}
    for row in rows:
        by_test.setdefault(row[0], []).append(["  " + row[1], *row[2:]])
    widths = _widths(headers, [row for group in by_test.values() for row in group])
    lines = [_line([*headers, ""], widths, len(headers))]
    for nodeid, group in by_test.items():
        lines += [nodeid, *(_line(row, widths, 1) for row in group)]
    return lines


def render(records: Sequence[Record], width: int = 120) -> list[str]:
    """The flat table when every test id fits in ``width``, else the grouped one (nothing cut)."""
    flat = render_table(records, width)
    widest = max((len(r.nodeid) for r in records), default=0)
    test_column = flat[0].index("name") - 2  # render_table shortens ids wider than this column
    if widest > test_column or any(len(line) > width for line in flat):
        return grouped_lines(*table(records))
    return flat


def count_line(records: Iterable[Record]) -> str:
    """``1 fail, 3 pass, 1 new, 1 removed in B`` in severity order."""
    records = list(records)
    counts = Counter(r.outcome for r in records)
    words = {r.outcome: outcome_word(r) for r in records}
    return ", ".join(f"{counts[o]} {words[o]}" for o in OUTCOME_ORDER if counts[o])


#: Measurements named in a grouped "no comparable baseline" line before "and N more".
NEW_GROUP_NAMES = 3


def explained(record: Record) -> list[str]:
    """The lines under a verdict's message in a report: what a live run added (the profiled op
    diff, the graph) and the verdict's notes (why a fallback could not judge, a looser guard
    the baseline was saved with...)."""
    notes = record.verdict.notes if record.verdict else ()
    return [*record.explanation, *(f"note: {note}" for note in notes)]


def attention_messages(record: Record, counters: str = "") -> list[str]:
    """What a report says of a failing or inconclusive measurement: the verdict's message with
    what explains it, each counter that changed (after ``counters``), each failure."""
    verdict = record.verdict or RecordedVerdict()
    messages = [f"{counters}{change}" for change in record.counter_changes]
    failures = list(record.failures)
    if verdict.message and verdict.outcome in ("fail", "inconclusive"):
        # A strict failure is the message, failing: said once, in its place.
        said = next((f for f in failures if f.startswith(verdict.message)), verdict.message)
        failures = [f for f in failures if f is not said]
        messages.insert(0, "\n".join([said, *explained(record)]))
    return messages + failures


def detail_lines(records: Iterable[Record]) -> list[str]:
    """Full messages of verdicts worth reading (fail, inconclusive, improved, new, re-measured).

    Measurements that are new for the same reason (this environment differs from a stored one in
    the same fields) share one line instead of repeating the difference per test.
    """
    lines = []
    ordered = sort_records(records)
    by_reason: dict[str, list[Record]] = {}
    by_message: dict[str, list[Record]] = {}
    for record in ordered:
        verdict = record.verdict
        if record.outcome != "new" or not verdict:
            continue
        if verdict.new_reason:
            by_reason.setdefault(verdict.new_reason, []).append(record)
            continue
        # New for a reason the message alone says (no baseline folder at all, none stored yet):
        # grouped by the message after the measurement's label.
        message = verdict.message or ""
        _, said, rest = message.partition(": ")
        if said and not repeats(message, record.failures):
            by_message.setdefault(rest, []).append(record)
    groups = [*by_reason.values(), *by_message.values()]
    grouped = {id(r) for group in groups if len(group) > 1 for r in group}
    # A note several measurements share (one stored session each): said once, naming them.
    noted: dict[str, list[Record]] = {}
    for record in ordered:
        for note in dict.fromkeys(record.verdict.notes if record.verdict else ()):
            noted.setdefault(note, []).append(record)
    for rest, group in by_message.items():
        if len(group) > 1:
            lines.append(f"{len(group)} measurements ({_some(group)}): {rest}")
    for reason, group in by_reason.items():
        if len(group) > 1:
            shown = _some(group)
            if group[0].verdict and group[0].verdict.untimed:
                # The options every guard that refused the save needs, as its verdict says them.
                message = group[0].verdict.message or ""
                anyway = "".join(message.rpartition(", or store it anyway")[1:])
                lines.append(
                    f"no timing baseline for {len(group)} measurements ({shown}): "
                    f"{reason.replace('could not time it', 'could not time them')}; what else "
                    f"of them was stored (counters, numerics) was gated. Store their timing "
                    f"with pytest --torchperf-save on a quiet machine{anyway}"
                )
                continue
            lines.append(
                f"no comparable baseline for {len(group)} measurements ({shown}): "
                f"{reason}; record them for this environment with pytest "
                f"--torchperf-save"
            )
    for record in ordered:
        verdict = record.verdict
        changes = record.counter_changes
        if changes:
            lines.append(f"{record.nodeid}: {record.name}: counters changed: {'; '.join(changes)}")
        # Beside changed counters, a timing verdict worth reading is said too (an inconclusive
        # one's warning points here).
        timing_said = verdict is not None and verdict.outcome in ("fail", "inconclusive")
        message = (verdict.message if verdict else None) or ""
        repeated = repeats(message, record.failures)
        if (
            id(record) not in grouped
            and verdict is not None
            and bool(verdict.order)  # an empty verdict, as a falsy {} before
            and not repeated
            and (not changes or timing_said)
            and (
                record.outcome in ("fail", "inconclusive", "improved", "new", "removed")
                or verdict.suspicious
            )
        ):
            lines.append(f"{record.nodeid}: {message}")
            lines += list(record.explanation)
        for note in verdict.notes if verdict else ():
            sharing = noted.get(note, [])
            if len(sharing) == 1:  # named: a test's measurements may each have one
                named = f"{record.name}: " if record.name else ""
                lines.append(f"{record.nodeid}: {named}note: {note}")
            elif sharing and sharing[0] is record:  # said once, where it is first said
                lines.append(f"note for {len(sharing)} measurements ({_some(sharing)}): {note}")
        for failure in record.failures:
            if repeated and failure.startswith(message):
                # Strict: its reason in full is the test's failure text (under FAILURES); here
                # what failed in a few words, as a counter change is ("counters changed: ...").
                failure = f"{_head(record, message)}, {failure[len(message) :].strip(' ()')}"
            lines.append(f"{record.nodeid}: {failure}")
    return lines


def _some(group: Sequence[Record]) -> str:
    """The first :data:`NEW_GROUP_NAMES` of a group of measurements, then how many more."""
    names = [f"{r.nodeid.rsplit('/', 1)[-1]} {r.name}" for r in group]
    more = f" and {len(names) - NEW_GROUP_NAMES} more" if len(names) > NEW_GROUP_NAMES else ""
    return ", ".join(names[:NEW_GROUP_NAMES]) + more


def repeats(message: str, failures: Iterable[str]) -> bool:
    """A failure says the verdict's ``message`` again (a strict one): say it once."""
    return bool(message) and any(f.startswith(message) for f in failures)


def _head(record: Record, message: str) -> str:
    """``mlp: timing inconclusive (busy machine, +27.9% vs baseline)``, ``mlp: no timing
    baseline``: a verdict's message in a few words."""
    verdict = record.verdict or RecordedVerdict()
    if verdict.outcome == "inconclusive":
        return inconclusive_head(record.name, verdict.guard, verdict.ratio)
    return ": ".join(message.split(": ", 2)[:2])


def variant_lines(records: Iterable[Record]) -> list[str]:
    """One line per variant measurement: how it was built, build time and notes."""
    lines = []
    for record in sort_records(records):
        if record.variant == "eager" or not record.method:
            continue
        build = record.build_time
        text = f"{record.name}: {record.method}"
        if build is not None:
            text += f", built in {build:.1f} s"
        accuracy = record.accuracy or {}
        if accuracy:
            parts = [
                f"rel-L2 {accuracy.get('rel_l2', float('nan')):.1e}",
                f"cosine {accuracy.get('cosine', float('nan')):.6f}",
                f"max abs {accuracy.get('max_abs', float('nan')):.1e}",
            ]
            if accuracy.get("top1") is not None:
                parts.append(f"top-1 agreement {accuracy['top1']:.0%}")
            text += "; " + ", ".join(parts)
        if record.metric is not None:
            text += f"; metric {record.metric:.4g}"
        lines.append(text)
        lines += [f"    note: {note}" for note in record.notes]
    return lines
