"""The ``torchperf`` command line (cli.parse_args): what follows ``--`` is bisect's pytest
arguments; every other command keeps ``--`` as argparse reads it (a file named ``-x.json``)."""

from __future__ import annotations

import pytest

from pytest_torchperf.cli import parse_args


def test_bisect_passes_everything_after_the_double_dash_to_pytest() -> None:
    args = parse_args(["bisect", "v1", "main", "-k", "mlp", "--", "-p", "no:x", "tests/perf"])
    assert (args.good, args.bad, args.k) == ("v1", "main", "mlp")
    assert args.pytest_args == ["-p", "no:x", "tests/perf"]
    before = parse_args(["bisect", "v1", "main", "tests/perf", "--", "--", "-x"])
    assert before.pytest_args == ["tests/perf", "--", "-x"]


def test_bisects_own_options_after_the_double_dash_are_refused_or_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse_args(["bisect", "a", "b", "-k", "t", "--", "--mode", "ab"])
    assert "put bisect's own options (--mode, --timeout) before --" in capsys.readouterr().err
    # pytest-timeout's --timeout is a pytest option too: passed on, with a warning.
    args = parse_args(["bisect", "a", "b", "-k", "t", "--", "--timeout=60"])
    assert args.timeout == 3600.0 and args.pytest_args == ["--timeout=60"]
    assert "--timeout after -- goes to each revision's pytest run" in capsys.readouterr().err


def test_other_commands_keep_the_double_dash_for_file_names() -> None:
    assert parse_args(["history", "--", "-odd.json"]).paths == ["-odd.json"]
    assert parse_args(["accept", "--", "-r.json"]).results == ["-r.json"]


def test_compare_with_only_a_results_file_says_the_baseline_folder_comes_first(capsys) -> None:
    import pytest as _pytest

    from pytest_torchperf.cli import parse_args

    with _pytest.raises(SystemExit) as stop:
        parse_args(["compare", "results.json"])
    assert stop.value.code == 2
    assert (
        "compare takes the baseline folder first, then the results file: torchperf compare "
        ".torchperf results.json"
    ) in capsys.readouterr().err
