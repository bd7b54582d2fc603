"""The ``torchperf`` command line (cli.parse_args): what follows ``--`` is bisect's pytest
arguments; every other command keeps ``--`` as argparse reads it (a file named ``-x.json``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_torchperf.cli import parse_args


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``torchperf ARGV`` printed on stderr, having refused it as a usage error (exit 2)."""
    from pytest_torchperf import cli

    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


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


def test_accept_takes_a_json_word_after_its_options_as_a_results_file() -> None:
    # A missing one then fails as "cannot be read", not with a hint to give it to -k.
    assert parse_args(["accept", "a.json", "-k", "mlp", "b.json"]).results == ["a.json", "b.json"]


def test_other_commands_keep_the_double_dash_for_file_names() -> None:
    assert parse_args(["history", "--", "-odd.json"]).paths == ["-odd.json"]
    assert parse_args(["accept", "--", "-r.json"]).results == ["-r.json"]


def test_compare_with_only_a_results_file_says_the_baseline_folder_comes_first(capsys) -> None:
    import pytest as _pytest

    from pytest_torchperf.cli import parse_args

    with _pytest.raises(SystemExit) as stop:
        parse_args(["compare", "results.json"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert (
        "torchperf compare: error: compare takes the baseline folder first, then the results "
        "file: torchperf compare .torchperf results.json"
    ) in err
    assert "usage: torchperf compare " in err  # compare's usage, not the top level's


def test_history_of_a_path_that_is_not_there_says_so(tmp_path, capsys) -> None:
    """It said `results file DIR: cannot be read (No such file or directory)` of a folder."""
    from pytest_torchperf import cli

    assert cli.main(["history", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == (
        f"torchperf: {tmp_path / 'runs'} does not exist: give results files (pytest "
        f"--torchperf-json PATH wrote them) or folders holding them\n"
    )


def test_list_and_show_take_the_baseline_folder_as_a_word_or_after_storage(tmp_path, capsys):
    assert parse_args(["show", str(tmp_path), "-k", "mlp"]).storage == str(tmp_path)
    assert parse_args(["list", "--storage", str(tmp_path)]).storage == str(tmp_path)
    assert parse_args(["list"]).storage == ".torchperf"
    with pytest.raises(SystemExit):
        parse_args(["show", str(tmp_path), "--storage", "other"])
    assert f"give one baseline folder, not {tmp_path} and other" in capsys.readouterr().err


def test_report_tells_results_files_from_the_baseline_folder_by_what_they_are(tmp_path, capsys):
    (tmp_path / "r.json").write_text("{}")
    args = parse_args(["report", str(tmp_path / "r.json"), str(tmp_path), "--html", "x.html"])
    assert (args.results, args.storage) == ([str(tmp_path / "r.json")], str(tmp_path))
    (tmp_path / "baselines").mkdir()
    assert parse_args(["report", str(tmp_path / "baselines")]).results is None
    with pytest.raises(SystemExit):
        parse_args(["report", str(tmp_path / "nope.json")])
    err = capsys.readouterr().err
    assert err.startswith("usage: torchperf report")
    assert f"{tmp_path / 'nope.json'} does not exist: give a results file" in err


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (
            ["show", ".", "conv"],
            "unrecognized arguments: conv; to select measurements by test or name, give -k conv",
        ),
        (["show", "--kk", "x"], "unrecognized arguments: --kk; did you mean -k?"),
        (["list", ".", "."], "unrecognized arguments: .; torchperf list reads one path"),
    ],
)
def test_an_unrecognized_word_gets_the_commands_usage_and_a_hint(argv, hint, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(f"usage: torchperf {argv[0]} "), err
    assert f"torchperf {argv[0]}: error: {hint}" in err, err


def test_a_missing_baseline_folder_or_results_file_is_named_with_the_remedy(tmp_path, capsys):
    from pytest_torchperf import cli

    for argv in (["show", str(tmp_path / "gone")], ["list", "--storage", str(tmp_path / "gone")]):
        assert cli.main(argv) == 2
        assert capsys.readouterr().err == (
            f"torchperf: baseline folder {tmp_path / 'gone'} does not exist; point at the folder "
            f"pytest --torchperf-save wrote (default .torchperf)\n"
        )
    for argv in (["accept", str(tmp_path)], ["merge", str(tmp_path)], ["report", "--results", "."]):
        assert (
            f"torchperf {argv[0]}: error: results file {argv[-1]} is a folder: give the file "
            f"pytest --torchperf-json PATH wrote (a baseline folder goes after --storage)"
        ) in _usage_error(argv, capsys)
    # A folder of results files (a downloaded artifact) is most likely meant as its files.
    (tmp_path / "shard1.json").write_text("{}")
    with pytest.raises(SystemExit):
        cli.main(["merge", str(tmp_path)])
    assert (
        f"is a folder: give the file pytest --torchperf-json PATH wrote (the results files in "
        f"it: {tmp_path / 'shard1.json'})"
    ) in capsys.readouterr().err


@pytest.mark.parametrize("options", [["-k", "mlp", "--reset"], ["-o", "merged.json"]])
def test_a_baseline_folder_after_the_options_is_told_to_go_after_storage(
    tmp_path, capsys, options
) -> None:
    """`torchperf accept out/r2.json -k mlp --reset BASELINES` answered `torchperf accept reads
    one path: run it once per path`, though accept (and merge) read several results files: the
    slip was the baseline folder without --storage. A results file there is one more."""
    command = "accept" if "-k" in options else "merge"
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "environment.json").write_text("{}")
    first, second = tmp_path / "r1.json", tmp_path / "r2.json"
    first.write_text("{}")
    second.write_text("{}")
    args = parse_args([command, str(first), *options, str(second)])
    assert args.results == [str(first), str(second)]
    with pytest.raises(SystemExit):
        parse_args([command, str(first), *options, str(tmp_path)])
    assert (
        f"torchperf {command}: error: results file {tmp_path} is a folder: give the file pytest "
        f"--torchperf-json PATH wrote (a baseline folder goes after --storage: --storage "
        f"{tmp_path})\n"
    ) in capsys.readouterr().err


def test_the_store_names_no_option_of_the_torchperf_command(tmp_path) -> None:
    """The store serves the torchperf command (--storage) and pytest (--torchperf-storage): its
    message says what failed and where; the command adds its own option's words."""
    from pytest_torchperf.store.results import ResultsFileError, read_results

    for path in (tmp_path, tmp_path / "gone.json"):
        with pytest.raises(ResultsFileError) as refused:
            read_results(path)
        why = "Is a directory" if path.is_dir() else "No such file or directory"
        assert str(refused.value) == (
            f"results file {path}: cannot be read ({why}); give the file pytest "
            f"--torchperf-json PATH wrote"
        )


def test_show_of_a_measurements_name_hints_at_k_and_compare_needs_its_baseline_folder(
    tmp_path, capsys, monkeypatch
):
    """`torchperf show mlp` said only that folder mlp does not exist; `torchperf compare
    nonexist EMPTY_FOLDER` said 'nothing compared' and exited 0."""
    from pytest_torchperf import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".torchperf").mkdir()
    with pytest.raises(SystemExit) as stop:
        cli.main(["show", "mlp"])
    assert stop.value.code == 2
    assert (
        "torchperf show: error: baseline folder mlp does not exist; to select measurements by "
        "test or name, give -k mlp"
    ) in capsys.readouterr().err
    assert cli.main(["compare", "nonexist", ".torchperf"]) == 2
    assert "baseline folder nonexist does not exist" in capsys.readouterr().err


def test_a_reader_that_goes_away_ends_the_command_without_a_traceback(tmp_path) -> None:
    """`torchperf show | head`: the pipe closes before the command is done writing."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # every write to the command's stdout now fails with EPIPE
    code = "import sys; from pytest_torchperf.cli import main; sys.exit(main(sys.argv[1:]))"
    with os.fdopen(write, "wb") as stdout:
        proc = subprocess.run(
            [sys.executable, "-c", code, "show", str(tmp_path)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, proc.stderr


def test_only_a_missing_pandas_is_told_to_install_pandas(monkeypatch, capsys) -> None:
    from types import SimpleNamespace

    from pytest_torchperf import cli

    for name, hint in (("pandas", True), ("torch", False)):

        def missing(args: object, name: str = name) -> int:
            raise ImportError(f"No module named {name!r}", name=name)

        monkeypatch.setattr(cli, "parse_args", lambda argv: SimpleNamespace(run=missing))
        assert cli.main(["show"]) == 2
        err = capsys.readouterr().err
        assert f"No module named '{name}'" in err and ("install pandas" in err) is hint, err


def test_a_folder_of_results_files_is_not_read_as_an_empty_baseline_folder(tmp_path, capsys):
    """`torchperf list rep` / `show rep` on a CI artifact folder of results files printed 'no
    baselines under rep' and exited 0."""
    from pytest_torchperf import cli

    (tmp_path / "shard1.json").write_text("{}")
    for argv in (["list", str(tmp_path)], ["show", "--storage", str(tmp_path)]):
        assert (
            f"error: {tmp_path} holds results files, not baselines (no <environment>/"
            f"environment.json in it): give one of them as a file, e.g. torchperf report "
            f"{tmp_path / 'shard1.json'}"
        ) in _usage_error(argv, capsys)
    # accept would write baselines among them.
    with pytest.raises(SystemExit):
        cli.main(["accept", str(tmp_path / "shard1.json"), "--storage", str(tmp_path)])
    assert (
        f"error: {tmp_path} holds results files, not baselines (no <environment>/environment.json "
        f"in it): point --storage at the baseline folder (pytest --torchperf-save wrote it)"
    ) in capsys.readouterr().err


def test_forget_matches_a_whole_test_id_or_name_never_a_part(tmp_path, capsys) -> None:
    from pytest_torchperf import cli
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.sessions import Session

    store = BaselineStore(tmp_path)
    env, stored = "cpu-x-t1-0", Session.from_json({"statistic": 1e-3, "times": [1e-3]})
    for nodeid, name in [
        ("t.py::test_mlp", "mlp"),
        ("t.py::test_mlp", "mlp-bs64"),
        ("t.py::test_mlp_fast", "mlp"),
        ("t.py::test_p[1]", "p"),
    ]:
        store.record(env, {}, nodeid, name, stored)
    storage = ["--storage", str(tmp_path)]
    assert cli.main(["forget", "mlp", *storage]) == 1  # a measurement's name is not a test
    assert "no stored measurement of mlp in" in capsys.readouterr().err
    assert cli.main(["forget", "test_mlp", "mlp-bs64", *storage]) == 0
    assert cli.main(["forget", "t.py::test_p[1]", *storage]) == 0
    left = sorted((t, n) for _, t, n, _ in BaselineStore(tmp_path).measurements())
    assert left == [("t.py::test_mlp", "mlp"), ("t.py::test_mlp_fast", "mlp")]
    # A misspelt test is told the stored one it is closest to.
    capsys.readouterr()
    assert cli.main(["forget", "test_mlp_fsat", *storage]) == 1
    assert "no stored measurement of test_mlp_fsat in " in capsys.readouterr().err
    assert cli.main(["forget", "t.py::test_mlp_fsat", *storage]) == 1
    assert "; did you mean t.py::test_mlp_fast? (torchperf show" in capsys.readouterr().err


def test_forget_suggests_a_stored_test_that_holds_the_given_name(tmp_path, capsys) -> None:
    """`forget test_mlp` where test_mlp_small and test_loop are stored suggested test_loop
    (spelt alike by difflib's measure), not test_mlp_small (a newcomer)."""
    from pytest_torchperf import cli
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.sessions import Session

    store = BaselineStore(tmp_path)
    stored = Session.from_json({"statistic": 1e-3, "times": [1e-3]})
    for nodeid in ("t.py::test_mlp_small", "t.py::test_loop"):
        store.record("cpu-x-t1-0", {}, nodeid, "m", stored)
    assert cli.main(["forget", "test_mlp", "--storage", str(tmp_path)]) == 1
    assert "; did you mean test_mlp_small? (torchperf show" in capsys.readouterr().err
    assert cli.main(["forget", "t.py::test_mlp", "--storage", str(tmp_path)]) == 1
    assert "; did you mean t.py::test_mlp_small? (torchperf show" in capsys.readouterr().err
    assert cli.main(["forget", "test_lop", "--storage", str(tmp_path)]) == 1
    assert "; did you mean test_loop? (torchperf show" in capsys.readouterr().err


def test_forget_of_a_parametrized_test_or_a_wrong_name_suggests_what_is_stored(
    tmp_path, capsys
) -> None:
    """`forget test_p` of a parametrized test said `did you mean test_mlp?`, and `forget
    test_mlp_speed nosuch` said `did you mean test_mlp_speed?`, the test it had given."""
    from pytest_torchperf import cli
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.sessions import Session

    store = BaselineStore(tmp_path)
    stored = Session.from_json({"statistic": 1e-3, "times": [1e-3]})
    for nodeid, name in [
        ("t.py::test_p[1]", "p"),
        ("t.py::test_p[2]", "p"),
        ("t.py::test_mlp", "mlp"),
        ("t.py::test_mlp_speed", "mlp-bs64"),
        ("t.py::test_mlp_speed", "mlp-bs32"),
    ]:
        store.record("cpu-x-t1-0", {}, nodeid, name, stored)
    storage = ["--storage", str(tmp_path)]
    show = " (torchperf show lists the stored test ids and names)\n"
    assert cli.main(["forget", "test_p", *storage]) == 1
    assert capsys.readouterr().err == (
        f"torchperf: no stored measurement of test_p in {tmp_path}; its parametrized ids are "
        f"test_p[1], test_p[2]: forget each one{show}"
    )
    assert cli.main(["forget", "t.py::test_p", *storage]) == 1
    assert "its parametrized ids are t.py::test_p[1], t.py::test_p[2]:" in capsys.readouterr().err
    assert cli.main(["forget", "test_mlp_speed", "nosuch", *storage]) == 1
    assert capsys.readouterr().err == (
        f"torchperf: no stored measurement of test_mlp_speed nosuch in {tmp_path}; "
        f"test_mlp_speed holds the measurements mlp-bs32, mlp-bs64{show}"
    )
    assert cli.main(["forget", "test_mlp", "nosuch", *storage]) == 1
    assert "; test_mlp holds the measurement mlp (" in capsys.readouterr().err
    # Several names: all of them or none (a misspelt one must not leave the others half done).
    assert cli.main(["forget", "test_mlp_speed", "mlp-bs32", "mlp-bs46", *storage]) == 1
    assert capsys.readouterr().err == (
        f"torchperf: no stored measurement of test_mlp_speed mlp-bs46 in {tmp_path}; "
        f"test_mlp_speed holds the measurements mlp-bs32, mlp-bs64{show[:-1]}; nothing was "
        f"removed\n"
    )
    assert len(list(store.measurements())) == 5
    assert cli.main(["forget", "test_mlp_speed", "mlp-bs32", "mlp-bs64", *storage]) == 0
    assert "2 measurements of test_mlp_speed mlp-bs32 mlp-bs64 removed" in capsys.readouterr().out
    assert len(list(store.measurements())) == 3


def test_bisect_names_a_missing_revision_or_test_selection_and_exits_2(capsys) -> None:
    """`bisect GOOD -k t` said 'the following arguments are required: bad, pytest_args' (the
    pytest arguments are optional), and a bisect without -k exited 1, not the 2 of one that
    cannot start."""
    from pytest_torchperf import cli

    with pytest.raises(SystemExit) as stop:
        parse_args(["bisect", "v1", "-k", "t"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "pytest_args" not in err.split("error:", 1)[1]
    assert "error: give GOOD and BAD: two revisions, e.g. torchperf bisect v1.4 main -k TEST" in err
    assert cli.main(["bisect", "v1", "main"]) == 2
    assert "select the perf tests to run at each revision with -k TEST" in capsys.readouterr().err


def test_graph_takes_the_baseline_folder_after_storage_as_the_other_commands_do(capsys) -> None:
    assert parse_args(["graph", "--storage", "gbase", "-k", "conv"]).results == "gbase"
    assert parse_args(["graph", "-k", "conv"]).results == ".torchperf"
    assert parse_args(["graph", "r.json"]).results == "r.json"
    with pytest.raises(SystemExit):
        parse_args(["graph", "r.json", "--storage", "gbase"])
    assert "give one of r.json and --storage gbase" in capsys.readouterr().err


def test_an_optional_word_after_the_options_is_still_read_as_itself() -> None:
    """`bisect v1 -k t main` parsed before BAD became optional to argparse; forget's NAME after
    --storage was refused as a second path."""
    assert parse_args(["bisect", "v1", "-k", "t", "main"]).bad == "main"
    args = parse_args(["bisect", "v1", "--mode", "counters", "main", "-k", "t"])
    assert (args.good, args.bad, args.k, args.pytest_args) == ("v1", "main", "t", [])
    assert parse_args(["forget", "test_a", "--storage", "d", "mlp"]).names == ["mlp"]
    assert parse_args(["forget", "test_a", "a", "--storage", "d", "b"]).names == ["a", "b"]


def test_forget_refuses_a_name_that_tests_of_several_files_share(tmp_path, capsys) -> None:
    from pytest_torchperf import cli
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.sessions import Session

    store = BaselineStore(tmp_path)
    stored = Session.from_json({"statistic": 1e-3, "times": [1e-3]})
    for nodeid in ("a.py::test_forward", "b.py::test_forward"):
        store.record("cpu-x-t1-0", {}, nodeid, "fwd", stored)
    assert cli.main(["forget", "test_forward", "--storage", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "torchperf: test_forward names tests in 2 files (a.py::test_forward b.py::test_forward): "
        "give the whole test id of the one to forget\n"
    )
    assert cli.main(["forget", "a.py::test_forward", "--storage", str(tmp_path)]) == 0
    # Not in a git repository: no git checkout to offer.
    out = capsys.readouterr().out
    assert out.endswith("removed; not in a git repository, so nothing can undo it\n"), out
    assert [t for _, t, _, _ in store.measurements()] == ["b.py::test_forward"]


def _git(folder: Path, *args: str) -> None:
    import subprocess

    ident = ["-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", *ident, *args], cwd=folder, check=True, capture_output=True)


def test_forget_across_a_clean_file_and_a_changed_one_says_how_to_undo_each(
    tmp_path, capsys
) -> None:
    """A test stored in two environments, one file as committed and one with other changes:
    the message offered `git show` for the changed file only, and nothing for the other."""
    from pytest_torchperf import cli
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.sessions import Session

    _git(tmp_path, "init", "-q")
    store = BaselineStore(tmp_path / "tp")
    stored = Session.from_json({"statistic": 1e-3, "times": [1e-3]})
    for env in ("cpu-x-t1-0", "instructions-cpu-x-t1-0"):
        store.record(env, {}, "a.py::test_m", "fwd", stored)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "baselines")
    store.record("cpu-x-t1-0", {}, "a.py::test_m", "new", stored)  # saved, not committed
    capsys.readouterr()
    assert cli.main(["forget", "a.py::test_m", "fwd", "--storage", str(tmp_path / "tp")]) == 0
    timing = tmp_path / "tp" / "cpu-x-t1-0" / "a.py.json"
    counts = tmp_path / "tp" / "instructions-cpu-x-t1-0" / "a.py.json"
    assert (
        f"commit the baseline folder (git checkout -- {counts} undoes it there; what it removed "
        f"from {timing} is as git's last commit holds it: git show "
        "HEAD:tp/cpu-x-t1-0/a.py.json shows it; the file's other changes are not committed yet)"
    ) in capsys.readouterr().out
    # Both files with other changes: two commands, not run together (a newcomer).
    for env in ("cpu-x-t1-0", "instructions-cpu-x-t1-0"):
        store.record(env, {}, "a.py::test_m", "old", stored)
    _git(tmp_path, "add", "-A")  # the forget removed the emptied file of counts
    _git(tmp_path, "commit", "-q", "-m", "old")
    for env in ("cpu-x-t1-0", "instructions-cpu-x-t1-0"):
        store.record(env, {}, "a.py::test_m", "newer", stored)  # saved, not committed
    assert cli.main(["forget", "a.py::test_m", "old", "--storage", str(tmp_path / "tp")]) == 0
    assert (
        "git show HEAD:tp/cpu-x-t1-0/a.py.json and git show "
        "HEAD:tp/instructions-cpu-x-t1-0/a.py.json show them; the files' other changes are not "
        "committed yet)"
    ) in capsys.readouterr().out


def test_forget_offers_git_checkout_only_where_it_brings_the_file_back(
    tmp_path, capsys, monkeypatch
) -> None:
    """`forget` said `git checkout -- FILE undoes it` of a file holding a session accepted and
    not committed: the checkout brought back one session of two, and the other was lost."""
    from pytest_torchperf import cli
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.sessions import Session

    _git(tmp_path, "init", "-q")
    store = BaselineStore(tmp_path / "tp")
    stored = Session.from_json({"statistic": 1e-3, "times": [1e-3]})
    for nodeid in ("a.py::test_m", "b.py::test_m2"):
        store.record("cpu-x-t1-0", {}, nodeid, "fwd", stored)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "baselines")
    path = tmp_path / "tp" / "cpu-x-t1-0" / "a.py.json"
    store.record("cpu-x-t1-0", {}, "a.py::test_m", "fwd", stored)  # accepted, not committed
    before = path.read_bytes()
    forget = ["forget", "a.py::test_m", "--storage", str(tmp_path / "tp")]
    capsys.readouterr()
    assert cli.main(forget) == 2
    err = capsys.readouterr().err
    assert (
        f"torchperf: not forgotten: {path} holds changes git has not committed to what it would "
        "forget" in err
    ), err
    assert "commit the folder first (then git checkout undoes the forget), or pass --force" in err
    assert path.read_bytes() == before
    # Committed: the checkout brings it back whole. Another file's changes do not count.
    _git(tmp_path, "commit", "-q", "-am", "accepted")
    store.record("cpu-x-t1-0", {}, "b.py::test_m2", "fwd", stored)
    assert cli.main(forget) == 0
    assert f"removed; commit the baseline folder (git checkout -- {path} undoes it)" in (
        capsys.readouterr().out
    )
    _git(tmp_path, "checkout", "--", str(path))
    assert path.read_bytes() == before
    # Changes not committed elsewhere in the file (a forget, a save of another measurement):
    # what it removes is as committed, so git still has it (two forgets in a row were refused).
    _git(tmp_path, "commit", "-q", "-am", "forgotten")
    store.record("cpu-x-t1-0", {}, "a.py::test_m", "fwd", stored)
    store.record("cpu-x-t1-0", {}, "a.py::test_m", "old", stored)
    store.record("cpu-x-t1-0", {}, "a.py::test_m", "older", stored)
    _git(tmp_path, "commit", "-q", "-am", "two names")
    store.record("cpu-x-t1-0", {}, "a.py::test_m", "fwd", stored)  # saved, not committed
    assert cli.main([*forget[:2], "old", *forget[2:]]) == 0
    assert cli.main([*forget[:2], "older", *forget[2:]]) == 0
    out = capsys.readouterr().out
    assert (
        f"removed; commit the baseline folder (what it removed from {path} is as git's last "
        "commit holds it: git show HEAD:tp/cpu-x-t1-0/a.py.json shows it; the file's other "
        "changes are not committed yet)" in out
    ), out
    assert cli.main(forget) == 2  # fwd itself holds a session git does not
    assert "not forgotten" in capsys.readouterr().err
    # A git status that fails (a damaged index) is no licence to forget (review: it was).
    index = tmp_path / ".git" / "index"
    kept = index.read_bytes()
    index.write_bytes(b"garbage")
    assert cli.main(forget) == 2
    assert "git status failed" in capsys.readouterr().err
    assert cli.main([*forget[:2], "fwd", *forget[2:]]) == 2
    index.write_bytes(kept)
    capsys.readouterr()
    # --force forgets anyway, and says nothing brings it back (no refusal printed).
    store.record("cpu-x-t1-0", {}, "a.py::test_m", "fwd", stored)
    assert cli.main([*forget, "--force"]) == 0
    captured = capsys.readouterr()
    assert "removed; git could not bring it back (--force)" in captured.out
    assert "not forgotten" not in captured.err
    # A relative --storage (the default .torchperf is one): git asked of the right files
    # (review: relative to the folder git ran in, they matched nothing and read as clean).
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "forgotten")
    store.record("cpu-x-t1-0", {}, "b.py::test_m2", "fwd", stored)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["forget", "b.py::test_m2", "--storage", "tp"]) == 2
    assert "holds changes git has not committed to what" in capsys.readouterr().err
    # An ignored file: git add -f commits it.
    (tmp_path / ".gitignore").write_text("tp/\n")
    _git(tmp_path, "rm", "-r", "-q", "--cached", "tp")
    _git(tmp_path, "commit", "-q", "-m", "ignore the baselines")
    assert cli.main(["forget", "b.py::test_m2", "--storage", "tp"]) == 2
    assert "is ignored by git, which could not bring it back; commit it first (git add -f)" in (
        capsys.readouterr().err
    )


def test_graph_picks_the_measurement_a_whole_name_names_among_those_containing_it() -> None:
    """A failure's hint says `torchperf graph r.json -k mlp`; mlp[int8] and mlp-bs64 have
    graphs too, and -k matches a part of a name."""
    from pytest_torchperf.cli.graph import pick
    from pytest_torchperf.store.record import Record

    records = [
        Record(nodeid=f"t.py::test_{n}", name=n, graph={"nodes": []})
        for n in ("mlp", "mlp[int8]", "mlp-bs64")
    ]
    chosen = pick(records, "mlp", "r.json")
    assert isinstance(chosen, Record) and chosen.name == "mlp"
    assert isinstance(pick(records, "mlp-", "r.json"), Record)  # one contains it: as before
    many = pick(records, "ml", "r.json")
    assert isinstance(many, str) and many.startswith("3 measurements matching -k 'ml'")


def test_graph_without_a_path_or_baseline_folder_says_what_to_give(tmp_path, capsys, monkeypatch):
    from pytest_torchperf import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["graph", "-k", "x"]) == 2
    assert capsys.readouterr().err == (
        "torchperf: .torchperf does not exist: give a results file (pytest --torchperf-json PATH "
        "wrote it) or the baseline folder (--storage DIR; default .torchperf)\n"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["merge", "a.json", "-o", "{out}"],
            "-o {out} is a folder; give the file to write, e.g. -o {out}/merged.json",
        ),
        (
            ["merge", "a.json", "--html", "{out}"],
            "--html {out} is a folder; give the file to write, e.g. --html {out}/report.html",
        ),
        (["history", "a.json", "--html", "{out}"], "--html {out} is a folder"),
        (
            ["merge", "a.json", "--markdown", "{out}"],
            "--markdown {out} is a folder; give the "
            "file to write, e.g. --markdown {out}/summary.md",
        ),
    ],
)
def test_an_output_path_that_is_a_folder_is_refused_before_anything_is_read(
    argv, said, tmp_path, capsys
) -> None:
    """Written at the end, it failed with IsADirectoryError's traceback after the tables."""
    out = str(tmp_path)
    err = _usage_error([word.format(out=out) for word in argv], capsys)
    assert said.format(out=out) in err, err


def test_a_report_that_cannot_be_written_is_named_without_a_traceback(tmp_path) -> None:
    from pytest_torchperf.cli.common import PathError, write

    (tmp_path / "file").write_text("")
    with pytest.raises(PathError, match=r"cannot write the HTML report to .*/file/r\.html: "):
        write(str(tmp_path / "file" / "r.html"), "<html>", "HTML report")


def test_the_command_says_its_version_and_the_command_a_misspelt_one_meant(capsys) -> None:
    from pytest_torchperf import __version__, cli

    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"torchperf {__version__}\n"
    err = _usage_error(["lst"], capsys)
    assert "torchperf: error: unknown command 'lst' (did you mean 'list'?); commands: list, " in err
    assert "did you mean" not in _usage_error(["xyz"], capsys)
