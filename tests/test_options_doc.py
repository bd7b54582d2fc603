"""The options reference (docs/options.md) is kept honest against ``pytest --help`` and the option
registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_torchperf.options.measure_options import OPTIONS, VALID_KEYWORDS

OPTIONS_DOC = Path(__file__).resolve().parents[1] / "docs" / "options.md"


def _table_rows() -> list[list[str]]:
    text = OPTIONS_DOC.read_text(encoding="utf-8")
    section = text.split("# Options", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and "---" not in line]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]


def test_options_doc_lists_exactly_the_command_line_options(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest("--help").stdout.str()
    in_help = set(re.findall(r"(--torchperf-[a-z-]+)", help_text))
    in_doc = {re.findall(r"--torchperf-[a-z-]+", row[0])[0] for row in _table_rows() if row[0]}
    assert in_doc == in_help


def test_options_doc_lists_every_ini_key_and_keyword() -> None:
    rows = _table_rows()
    ini_keys = {row[1].strip("`") for row in rows if row[1]}
    keywords = {row[2].strip("`") for row in rows if row[2]}
    assert keywords == set(VALID_KEYWORDS)
    expected_ini = {f"torchperf_{name}" for name, spec in OPTIONS.items() if spec.cli}
    expected_ini |= {
        "torchperf_storage",
        "torchperf_report_dir",
        "torchperf_device",
        "torchperf_variants",
        "torchperf_processes",
        "torchperf_confirm",
        "torchperf_instructions",
        "torchperf_instruction_jobs",
        "torchperf_fallback",
        "torchperf_save_wait",
    }
    assert ini_keys == expected_ini
