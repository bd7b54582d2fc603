"""The end-of-run reporting plugin object: collects measurement records from test reports and
prints the terminal summary, then writes the markdown and JSON reports asked for."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_torchperf.kinds import parts
from pytest_torchperf.pytest_plugin.stash import SETTINGS_KEY
from pytest_torchperf.pytest_plugin.variant_items import unsaid_left_out_line

if TYPE_CHECKING:
    from pytest_torchperf.judge.coverage import Coverage
    from pytest_torchperf.options.settings import RunSettings
    from pytest_torchperf.store.record import Record

#: Name of the user property carrying a test's measurement records (JSON) in reports and JUnit XML.
RECORDS_PROPERTY = "torchperf"


class SummaryReporter:
    """Collects measurement records from call reports and prints the torchperf table.

    Registered per run in ``pytest_configure`` (state lives on the instance, not in module globals,
    so nested pytester runs cannot mix their records). On the xdist controller it sees the workers'
    reports, which carry the records in ``user_properties``.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        #: The run's measurements, read once from the reports' JSON (store/record.py).
        self.records: list[Record] = []
        #: Start of the run: traces written after it belong to this run.
        self.started = time.time()
        #: Why the run fails although its tests passed (a save that stored no timing for some
        #: measurements, a strict run that judged timing for under half): set at session finish.
        self.run_failure: str | None = None
        #: The reports asked for that could not be written (option and path): they fail the run.
        self.unwritten: list[str] = []
        #: Perf tests that failed although none of their measurements did (a misused fixture,
        #: an assert after the measurement): test id and pytest's one-line reason. Their rows
        #: read ``new`` or ``pass``; the summary says the test failed all the same.
        self.failed_otherwise: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for key, value in report.user_properties:
            if key == RECORDS_PROPERTY and isinstance(value, str):
                from pytest_torchperf.store.record import Record

                records = [Record.from_json(data) for data in json.loads(value)]
                self.records.extend(records)
                if report.failed and not any(r.outcome == "fail" for r in records):
                    crash = getattr(report.longrepr, "reprcrash", None)
                    why = str(getattr(crash, "message", "") or report.longreprtext).strip()
                    why = why.removeprefix("Failed: ").removeprefix(f"torchperf: {report.nodeid}: ")
                    self.failed_otherwise.append(
                        (report.nodeid, (why or "(no message)").splitlines()[0])
                    )

    def coverage(self) -> Coverage | None:
        """What this run gated or stored (:class:`pytest_torchperf.judge.coverage.Coverage`),
        None when it neither compared nor saved."""
        from pytest_torchperf.judge.coverage import coverage

        settings = self.config.stash[SETTINGS_KEY]
        if not (settings.compares or settings.save) or settings.disable:
            return None
        return coverage(self.records, comparing=settings.compares)

    # The outermost wrapper of the hook: what it writes after the others ran comes after
    # pytest's own closing line ("6 passed, 9 warnings in 12.3s").
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None]:
        """A run whose tests passed but that gated or stored too little exits 1 (see
        :func:`pytest_torchperf.judge.run_failure.run_failure`), and its last line says so: pytest's
        own closing line is green when every test passed."""
        if hasattr(self.config, "workerinput"):
            return (yield)
        from pytest_torchperf.judge.run_failure import run_failure, thin_save_line

        cov = self.coverage()
        strict = self.config.stash[SETTINGS_KEY].strict_run  # a marker's strict=True: its own
        self.run_failure = run_failure(cov, strict, listed=True) if cov else None
        failed_here = bool(self.run_failure) and session.exitstatus == pytest.ExitCode.OK
        if failed_here:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        result = yield
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if failed_here and terminal is not None and self.run_failure:
            # Each failure's head: its measurements' figures and the remedies are the summary's
            # line above (a noisy save's list of five measurements' noise was said here again).
            reason = "; and ".join(
                re.split(r"(?<=measurements): |; |\. ", failure, maxsplit=1)[0]
                for failure in self.run_failure.split("; and ")
            )
            terminal.write_line(
                f"torchperf: the run FAILED (exit status 1) although its tests passed: {reason}. "
                f'What to do: the "torchperf: run failed" line above',
                red=True,
                bold=True,
            )
        elif terminal is not None and cov is not None and session.exitstatus == 0:
            thin = thin_save_line(cov)
            if thin:  # passed, but stored less than asked: not the last line to miss
                terminal.write_line(thin, yellow=True, bold=True)
        # A CI job whose report or results file is missing must not be green (its artifact
        # upload or a later merge would fail far from the cause).
        if self.unwritten and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            if terminal is not None:
                terminal.write_line(
                    f"torchperf: the run FAILED (exit status 1) although its tests passed: "
                    f"could not write {', '.join(self.unwritten)} (the line above says why)",
                    red=True,
                    bold=True,
                )
        return result

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if hasattr(self.config, "workerinput"):
            return  # xdist workers stay quiet: the controller prints the summary
        from pytest_torchperf.store.record import Record

        # Records no test of this run measured (an A/B run's that only side A has).
        for module in parts("plugin", having="records_of_run"):
            self.records.extend(Record.from_json(d) for d in module.records_of_run(self.config))
        tr = terminalreporter
        # Under xdist, what --torchperf-variants deselected (the workers' headers are not shown).
        left_out = unsaid_left_out_line(self.config)
        if not self.records:
            if left_out:
                tr.write_line(left_out)
            return
        from pytest_torchperf.report import terminal as _summary

        tr.write_sep("=", "torchperf")
        if left_out:
            tr.write_line(left_out)
        environment_line = _environment_line(self.config.stash[SETTINGS_KEY], self.records)
        tr.write_line(environment_line)
        for line in _summary.render(self.records, width=tr._tw.fullwidth):
            tr.write_line(line)
        for line in _summary.detail_lines(self.records):
            tr.write_line(line)
        variant_lines = _summary.variant_lines(self.records)
        if variant_lines:
            tr.write_line(
                "variants (how built, accuracy vs eager fp32 of the same run; speedup: the "
                "median of each round's eager/variant ratio, timed interleaved in the variant's "
                "own item, so it need not equal the ratio of the medians above, which were "
                "timed in different items):"
            )
            for line in variant_lines:
                tr.write_line("  " + line)
        for module in parts("plugin", having="summary_lines"):
            for line in module.summary_lines(self.config):
                tr.write_line(line)
        tr.write_line(f"torchperf: {_summary.count_line(self.records)}")
        for nodeid, why in self.failed_otherwise:
            tr.write_line(f"torchperf: {nodeid} FAILED, not on a verdict above: {why}", red=True)
        from pytest_torchperf.judge.coverage_lines import summary_lines

        coverage_lines = summary_lines(self.coverage(), self.run_failure)
        for i, line in enumerate(coverage_lines):
            tr.write_line(f"torchperf: {line}", red=i > 0 and bool(self.run_failure), yellow=i > 0)
        for line in self._write_reports(environment_line, coverage_lines):
            tr.write_line(line)
        from pytest_torchperf.pytest_plugin.extensions import report_lines

        for line in report_lines(self.config, self.records):
            tr.write_line(line)

    def _write_reports(self, environment_line: str, coverage_lines: list[str]) -> list[str]:
        """Write the markdown/HTML/JSON reports asked for; return lines saying where they went.
        Each on its own: one that cannot be written (a folder made since the run started, a
        full disk) is named by its option and path, the others are still written."""
        from pytest_torchperf.report.benchmark_json import benchmark_json
        from pytest_torchperf.report.html import html_report, run_traces, stored_histories
        from pytest_torchperf.report.markdown import markdown_report
        from pytest_torchperf.store.environment import commit_info, machine_info
        from pytest_torchperf.store.files import atomic_write_text, why_unwritable

        settings = self.config.stash[SETTINGS_KEY]
        written: list[str] = []

        def write(option: str, what: str, text: Callable[[Path], str]) -> None:
            where = self.config.getoption(option.lstrip("-").replace("-", "_"))
            if not where:
                return
            path = Path(where).resolve()
            try:
                atomic_write_text(path, text(path))
            except OSError as exc:
                self.unwritten.append(f"{option} {where}")
                written.append(
                    f"torchperf: could not write the {what} to {path} ({option}): "
                    f"{why_unwritable(path, exc)}; check the path and its folder's permissions"
                )
                return
            written.append(f"torchperf: {what} written to {path}")

        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        wanted = self.config.getoption("torchperf_markdown") or step_summary
        markdown = markdown_report(self.records, environment_line, coverage_lines) if wanted else ""
        write("--torchperf-markdown", "markdown summary", lambda _: markdown)
        if step_summary:
            try:
                with open(step_summary, "a", encoding="utf-8") as handle:
                    handle.write(markdown + "\n")
                written.append(
                    f"torchperf: summary appended to $GITHUB_STEP_SUMMARY ({step_summary})"
                )
            except OSError as exc:
                written.append(
                    f"torchperf: could not append the summary to $GITHUB_STEP_SUMMARY "
                    f"({step_summary}): {exc.strerror}"
                )
        write(
            "--torchperf-html",
            "HTML report",
            lambda path: html_report(
                self.records,
                environment_line,
                stored_histories(settings.storage, self.records),
                run_traces(settings.report_dir, self.started, path.parent),
                coverage_lines=coverage_lines,
            ),
        )
        cov = self.coverage()
        write(
            "--torchperf-json",
            "results file (pytest-benchmark JSON)",
            lambda _: (
                json.dumps(
                    benchmark_json(
                        self.records,
                        machine_info(),
                        commit_info(),
                        cov.to_dict() if cov is not None else None,
                        _storage_read(settings.storage, self.config.rootpath),
                        strict=settings.strict_run,
                    ),
                    indent=2,
                )
                + "\n"
            ),
        )
        return written


def _storage_read(storage: Path, rootdir: Path) -> dict[str, str | None]:
    """The baseline folder a run read, as its results file keeps it: absolute (this machine's
    path) and relative to the rootdir where it lies under it (the same on every checkout: a CI
    runner's results file downloaded to a laptop)."""
    folder = Path(storage).resolve()
    try:
        relative: str | None = folder.relative_to(rootdir.resolve()).as_posix()
    except ValueError:
        relative = None
    return {"path": str(folder), "relative": relative}


def _environment_line(settings: "RunSettings", records: list[Record]) -> str:
    devices = sorted({r.device for r in records})
    threads = sorted({str(r.threads) for r in records})
    envs = sorted({r.environment_id for r in records if r.environment_id})
    try:
        import torch  # already imported when measurements ran

        torch_version = str(torch.__version__)
    except ImportError:  # pragma: no cover
        torch_version = "?"
    return (
        f"torchperf: {settings.mode}; device={','.join(devices)}, torch {torch_version}, "
        f"threads={','.join(threads)}, "
        + (
            (
                f"processes={settings.processes} (each stores a session where its timing is "
                f"trusted), "
                if settings.save and not settings.compare
                else f"processes={settings.processes} (verdicts on the median p25), "
            )
            if settings.processes > 1
            else ""
        )
        # The baseline folder only where the run reads or writes one (not a measure-only or
        # A/B run: an A/B header naming it suggested the pairs were judged against it).
        + (f"storage={settings.storage}, " if settings.save or settings.compare else "")
        + f"env={','.join(envs) or '-'}"
    )
