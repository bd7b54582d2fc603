"""The end of a perf test: its failure message (failed verdicts), the baseline writes of a test
that passed, the measurement records on its report (xdist and JUnit carry them), and warnings at
the test's own location."""

from __future__ import annotations

import contextlib
import json
import warnings
from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.pytest_plugin.reporter import RECORDS_PROPERTY
from pytest_torchperf.pytest_plugin.stash import CONTEXT_KEY, STATE_KEY, context_of

if TYPE_CHECKING:
    from pytest_torchperf.store.record import Record


def _emit_warnings(item: pytest.Item, messages: list[str]) -> list[str]:
    """Show messages as TorchperfWarning at the test's own location (not at our internals).

    Returns the messages that a warnings filter turned into errors (``-W error``): they fail the
    test with the message, not with a traceback into this function.
    """
    errors: list[str] = []
    if not messages:
        return errors
    from pytest_torchperf.run.state import TorchperfWarning

    path, lineno, _ = item.location
    filename = str(item.config.rootpath / path)
    module = getattr(getattr(item, "module", None), "__name__", "torchperf")
    for message in messages:
        # A fresh registry: without one, "default"-action warnings can be swallowed as duplicates.
        try:
            warnings.warn_explicit(
                TorchperfWarning(message),
                TorchperfWarning,
                filename,
                (lineno or 0) + 1,
                module=module,
                registry={},
            )
        except Warning:
            errors.append(f"{message} (TorchperfWarning turned into an error by a warnings filter)")
    messages.clear()
    return errors


def _junit_figures(record: Record) -> dict[str, object]:
    """Outcome and headline figures of one measurement (seconds, ratios) as JUnit properties."""
    stats, verdict = record.stats, record.verdict
    figures = {
        "outcome": record.outcome,
        "variant": record.variant,
        "median_s": stats.median if stats else None,
        "p25_s": stats.p25 if stats else None,
        "baseline_p25_s": verdict.baseline_statistic if verdict else None,
        "change": verdict.ratio if verdict else None,
        "speedup": (record.speedup or {}).get("median"),
        "rel_l2": (record.accuracy or {}).get("rel_l2"),
    }
    return {
        k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in figures.items() if v is not None
    }


#: Why a saving run stored nothing of a measurement: its test failed.
TEST_FAILED = "the test failed"


def finish(item: pytest.Item, passed: bool, why: str = TEST_FAILED) -> str | None:
    """After the test body: failure message (if any), baseline writes, records and warnings.
    ``why``: where the body did not pass, why a save stores nothing of it."""
    state = item.stash.get(STATE_KEY, None)
    if state is None:
        return None
    message = None
    context = item.config.stash.get(CONTEXT_KEY, None)
    if context is not None and context.run_warnings:  # the run's own, said once
        state.warnings[:0] = context.run_warnings
        context.run_warnings.clear()
    if passed and context is not None:  # the body took every measurement it takes
        from pytest_torchperf.run.left_behind import say_left_behind
        from pytest_torchperf.store.baselines import BaselineFileError

        # A damaged baseline file is named where the measurement or the save reads it.
        with contextlib.suppress(BaselineFileError):
            say_left_behind(context, state)
    # Warnings first: under -W error a warning fails the test, which then must not save.
    warning_errors = _emit_warnings(item, state.warnings)
    failures = [*warning_errors, *state.failure_messages()] if passed else []
    if not passed or failures:
        state.pending.clear()  # a failing test never updates its baseline
        message = "\n".join(failures) or None
        if context is not None and context.settings.save:
            # Its label and the save's coverage line say so: "FAIL (counters), not saved: ...".
            for result in state.results:
                if result.session is not None and not result.saved:
                    result.not_saved = result.not_saved or (why if not passed else TEST_FAILED)
    else:
        from pytest_torchperf.run.saving import flush
        from pytest_torchperf.store.baselines import BaselineFileError

        try:
            flush(context_of(item.config), state)
        except BaselineFileError as exc:
            message = f"torchperf: {exc}"
    if state.results:
        from pytest_torchperf.store.record import Record

        # The hook gets each record's JSON form (plugins add keys in place); what it left is read
        # once, and written once to the report (pytest-xdist and JUnit XML carry it).
        hooked = [dict(r.to_record()) for r in state.results]
        for data in hooked:
            item.config.hook.pytest_torchperf_record(config=item.config, item=item, record=data)
        records = [Record.from_json(data) for data in hooked]
        item.user_properties.append((RECORDS_PROPERTY, json.dumps([r.to_json() for r in records])))
        # Flat figures too, for CI dashboards that read JUnit properties one value at a time.
        for record in records:
            for key, value in _junit_figures(record).items():
                item.user_properties.append((f"torchperf.{record.name}.{key}", value))
    return message
