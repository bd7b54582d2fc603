"""The ``torchperf`` command: the plugin's gate and reports over files it already wrote.

    torchperf list    [DIR]                                environments and what they hold
    torchperf show    [DIR] [-k TEXT]                      stored measurements, one line each
    torchperf compare BASELINE CANDIDATE [options]         exit 1 when a measurement regressed
    torchperf report  [RESULTS...] [DIR] [--html PATH] [--markdown PATH]
    torchperf accept  RESULTS... [--storage DIR] [-k TEXT] [--reset]
    torchperf forget  TEST [NAME ...] [--storage DIR] [--force] drop a renamed test's baselines
    torchperf merge   RESULTS... [-o FILE] [--storage DIR] [--html PATH] [--markdown PATH]
    torchperf history RESULTS_OR_DIR... [-k TEXT] [--html PATH] [--fail-on-slowdown]
    torchperf bisect  GOOD BAD -k TEST [--mode instructions|ab|counters] [-- PYTEST_ARGS]
    torchperf graph   [RESULTS|DIR] [--storage DIR] [-k TEXT] [--out DIR] [--no-browser]

DIR and BASELINE are a baseline folder (``.torchperf``, the default; ``--storage DIR`` also
names it); CANDIDATE a results file written by ``pytest --torchperf-json`` or another baseline
folder (its latest sessions). ``compare`` uses
the same judge, counter diff and drift checks as ``pytest --torchperf-compare`` (without the
confirming re-measure, which needs the model: the candidate's samples are final). Tables are
printed with pandas (``show``'s as the run's summary prints long test ids).

Where ``compare``, ``report``, ``accept`` or ``merge`` take several results files (the shards of
one run split over runners), they read them as ``merge`` joins them
(``pytest_torchperf.report.merge``): a measurement in two shards counts once, shards of
different commits are refused. ``history`` reads many runs: the files of one commit are one run
(``pytest_torchperf.report.history``).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence

from pytest_torchperf.cli.accept import cmd_accept
from pytest_torchperf.cli.common import PathError
from pytest_torchperf.cli.forget import cmd_forget
from pytest_torchperf.cli.graph import cmd_graph
from pytest_torchperf.cli.runs import cmd_compare, cmd_list, cmd_report, cmd_show
from pytest_torchperf.cli.suites import cmd_bisect, cmd_history, cmd_merge
from pytest_torchperf.cli.words import check_outputs, hint, placed, resolve_paths
from pytest_torchperf.judge.change_points import MIN_STEP, THRESHOLD
from pytest_torchperf.options.values import (
    argparse_type,
    parse_factor,
    parse_fraction,
    parse_share,
)
from pytest_torchperf.store.baselines import BaselineFileError

_K = "only tests/measurements containing this text"
_ANY_COMMIT = "with several results files: read files written at different commits"
_STORAGE = "baseline folder (default .torchperf)"
_FOLDER = "baseline folder (default .torchperf), as --storage DIR names it too"


def _flag(p: argparse.ArgumentParser, name: str, help: str) -> None:
    p.add_argument(name, action="store_true", help=help)


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The command's parser, and each command's by name."""
    from pytest_torchperf.run.revision_probe import modes  # bisect's: the kinds' and the counters

    fraction, share = argparse_type(parse_fraction), argparse_type(parse_share)
    parser = argparse.ArgumentParser(
        prog="torchperf", description=__doc__.split("\n\n")[0].replace("``", "")
    )
    from pytest_torchperf import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="environments in a baseline folder and what they hold")
    p.add_argument("folder", nargs="?", metavar="DIR", help=_FOLDER)
    p.add_argument("--storage", help=_STORAGE)
    p.set_defaults(run=cmd_list)
    p = sub.add_parser("show", help="stored measurements, one line each")
    p.add_argument("folder", nargs="?", metavar="DIR", help=_FOLDER)
    p.add_argument("--storage", help=_STORAGE)
    p.add_argument("-k", help=_K)
    p.add_argument("--env", help="only this environment id")
    p.set_defaults(run=cmd_show)
    p = sub.add_parser("compare", help="judge a candidate against baselines; exit 1 on regression")
    p.add_argument("baseline", help="baseline folder (.torchperf)")
    p.add_argument(
        "candidate",
        nargs="+",
        help="results file (pytest --torchperf-json), several (a run's shards), or a baseline "
        "folder",
    )
    for name, kind, help in (
        ("--max-slowdown", fraction, "override the limit each measurement ran with (e.g. 10%%)"),
        ("--min-cpu-share", share, "override the contention guard"),
        ("--max-spread", fraction, "override the spread guard"),
        ("--max-neighbour-load", share, "override the neighbour guard (e.g. 50%%; 100%% disables)"),
        ("--max-machine-slowdown", fraction, "override the machine guard (e.g. 25%%)"),
        ("--min-gpu-clock", share, "override the GPU clock guard (e.g. 0.75; 0 disables)"),
        (
            "--max-widening",
            argparse_type(parse_factor),
            "override how far the stored sessions' noise may widen the limit (e.g. 3x; off "
            "disables)",
        ),
        (
            "--max-instruction-increase",
            fraction,
            "override the instruction-count limit of --torchperf-instructions runs (e.g. 1%%)",
        ),
        ("--max-kernel-slowdown", fraction, "override the GPU kernel-time limit (e.g. 10%%)"),
    ):
        p.add_argument(name, type=kind, default=None, help=help)
    p.add_argument("-k", help=_K)
    _flag(p, "--any-commit", _ANY_COMMIT)
    p.set_defaults(run=cmd_compare)
    p = sub.add_parser("report", help="render HTML/markdown from baselines or a results file")
    p.add_argument(
        "paths",
        nargs="*",
        metavar="RESULTS_OR_DIR",
        help="results files (pytest --torchperf-json) and/or a baseline folder, told apart by "
        "what each path is",
    )
    p.add_argument("--storage", help=_STORAGE)
    p.add_argument(
        "--results",
        nargs="+",
        help="results file (pytest --torchperf-json), or several (a run's shards); default: "
        "latest stored sessions",
    )
    p.add_argument("--html", help="write the HTML report here")
    p.add_argument(
        "--markdown", help="write the markdown summary here (neither: printed to the terminal)"
    )
    _flag(p, "--any-commit", _ANY_COMMIT)
    p.set_defaults(run=cmd_report)
    p = sub.add_parser("accept", help="promote a run's results to baselines (intended slowdowns)")
    p.add_argument("results", nargs="+", help="results file(s) written by pytest --torchperf-json")
    p.add_argument(
        "--storage",
        help="baseline folder (default .torchperf; a run that read another folder on this "
        "machine must name it)",
    )
    p.add_argument("-k", help=_K)
    _flag(p, "--reset", "replace the history instead of appending")
    _flag(p, "--force", "accept measurements the save guard would refuse (contention, spread)")
    _flag(p, "--any-commit", _ANY_COMMIT)
    p.set_defaults(run=cmd_accept)
    p = sub.add_parser(
        "forget", help="remove a test's stored measurements (a test renamed or deleted)"
    )
    p.add_argument(
        "test",
        help="the test's id (tests/test_m.py::test_mlp) or its name (test_mlp), matched whole",
    )
    p.add_argument(
        "names", nargs="*", metavar="NAME", help="only these measurements of it (default: all)"
    )
    p.add_argument("--storage", default=".torchperf", help=_STORAGE)
    _flag(p, "--force", "forget even from a file with changes git has not committed")
    p.set_defaults(run=cmd_forget)
    p = sub.add_parser(
        "merge",
        help="one results file and report from a run's shards; exit 1 on a failure or a "
        "measurement no shard ran",
    )
    p.add_argument("results", nargs="+", help="the shards' results files (pytest --torchperf-json)")
    p.add_argument("-o", "--output", help="write the merged results file here")
    p.add_argument(
        "--storage",
        default=".torchperf",
        help="baseline folder the shards compared against (default .torchperf): "
        "its measurements that no shard ran are listed",
    )
    p.add_argument("--html", help="write the HTML report here")
    p.add_argument("--markdown", help="write the markdown summary here")
    _flag(
        p, "--allow-missing", "list measurements with a baseline that no shard ran without failing"
    )
    _flag(p, "--any-commit", "merge files written at different commits")
    p.set_defaults(run=cmd_merge)
    p = sub.add_parser(
        "history",
        help="each measurement over main's runs (results files): steps and their commits",
    )
    p.add_argument("paths", nargs="+", help="results files of main's runs, or folders holding them")
    p.add_argument("-k", help=_K)
    p.add_argument(
        "--threshold",
        type=float,
        default=THRESHOLD,
        help=f"standard errors a step needs (default {THRESHOLD:g}; lower finds smaller steps "
        f"and more false ones)",
    )
    p.add_argument(
        "--min-step",
        type=fraction,
        default=MIN_STEP,
        help=f"smallest step reported (default {MIN_STEP * 100:g}%%)",
    )
    _flag(
        p,
        "--raw",
        "judge times as measured (default: over the machine's speed, from the calibration "
        "kernel timed beside them on CPU)",
    )
    p.add_argument("--html", help="write the trend page here")
    _flag(
        p,
        "--fail-on-slowdown",
        "exit 1 when a measurement's latest level is still above its level before a slowdown step",
    )
    p.set_defaults(run=cmd_history)
    p = sub.add_parser(
        "bisect",
        help="the first commit between GOOD and BAD where the selected perf tests got slower",
    )
    p.add_argument("good", help="a revision where the tests were fast (older)")
    # Optional to argparse only: a missing BAD is named below (argparse named the optional
    # pytest_args "required" beside it).
    p.add_argument("bad", nargs="?", help="a revision where they are slow (newer)")
    p.add_argument("-k", help="the perf tests to run at each revision (pytest -k)")
    p.add_argument(
        "--mode",
        choices=tuple(mode.name for mode in modes()),
        help="how a revision is judged: instruction counts under Valgrind (the default where "
        "Valgrind is installed), A/B process pairs against GOOD (the default elsewhere), or the "
        "exact counters",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds one revision's pytest run may take (default 3600)",
    )
    p.add_argument(
        "pytest_args",
        nargs="*",
        help="more pytest arguments for each revision's run, after -- (e.g. -- tests/test_perf.py)",
    )
    p.set_defaults(run=cmd_bisect)
    p = sub.add_parser(
        "graph",
        help="a measurement's exported graph with its per-node figures, in Model Explorer "
        "(recorded by pytest --torchperf-graph)",
    )
    p.add_argument(
        "results",
        nargs="?",
        help="results file written by pytest --torchperf-json, or a baseline folder (the "
        "latest saved graph of each measurement; default .torchperf)",
    )
    p.add_argument("--storage", help="the baseline folder, as the other commands name it")
    p.add_argument("-k", help="the measurement: a part of its test id or name")
    p.add_argument(
        "--out",
        help="folder for the graph and overlay files (default .torchperf-graph/TEST-NAME/)",
    )
    _flag(p, "--no-browser", "write the files and print how to open them; start nothing (CI)")
    p.add_argument(
        "--port",
        type=int,
        default=8080,
        help="Model Explorer's port (default 8080: the first free one from there)",
    )
    p.set_defaults(run=cmd_graph)
    for p in sub.choices.values():
        p.set_defaults(parser=p)  # the command's own usage, for an error in its words
    return parser, dict(sub.choices)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line's arguments; what follows ``--`` is ``bisect``'s pytest arguments.

    Split off before argparse sees them: argparse matches GOOD, BAD and the ``*`` positional in
    one go, so the positional gets nothing and ``-- -p no:x`` (or ``-- tests/perf`` after
    ``-k``) would be refused as unrecognized."""
    parser, subparsers = _parser()
    words, passed = list(argv), []
    if words[:1] == ["bisect"] and "--" in words:  # other commands keep -- (a file named -x)
        cut = words.index("--")
        words, passed = words[:cut], words[cut + 1 :]
    commands = list(subparsers)
    if words and not words[0].startswith("-") and words[0] not in commands:
        # argparse lists every command: the one meant is named first.
        close = difflib.get_close_matches(words[0], commands, n=1)
        meant = f" (did you mean {close[0]!r}?)" if close else ""
        parser.error(f"unknown command {words[0]!r}{meant}; commands: {', '.join(commands)}")
    positional = [w for w in words[1:] if not w.startswith("-")]
    if words[:1] == ["compare"] and len(positional) == 1 and positional[0].endswith(".json"):
        # The likeliest slip: the results file alone, without the baseline folder first.
        subparsers["compare"].error(
            f"compare takes the baseline folder first, then the results file: torchperf "
            f"compare .torchperf {positional[0]}"
        )
    args, extras = parser.parse_known_args(words)
    extras = placed(args, extras)
    if args.command == "bisect" and args.bad is None:
        args.parser.error(
            "give GOOD and BAD: two revisions, e.g. torchperf bisect v1.4 main -k TEST"
        )
    if extras:  # in the command's usage, not the top level's (which names no option of it)
        args.parser.error(
            f"unrecognized arguments: {' '.join(extras)}; {hint(args.parser, extras[0])}"
        )
    check_outputs(args)
    resolve_paths(args)
    if passed:
        if any(w.split("=", 1)[0] == "--mode" for w in passed):
            parser.error(
                "--mode after -- would go to each revision's pytest run, which has no such "
                "option: put bisect's own options (--mode, --timeout) before --"
            )
        if any(w.split("=", 1)[0] == "--timeout" for w in passed):
            print(  # pytest-timeout has a --timeout: it may be meant for pytest
                "torchperf: warning: --timeout after -- goes to each revision's pytest run "
                "(pytest-timeout's option), not to bisect; bisect's --timeout goes before --",
                file=sys.stderr,
            )
        args.pytest_args = [*args.pytest_args, *passed]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``torchperf`` console script."""
    from pytest_torchperf.run.bisect_mode import BisectError
    from pytest_torchperf.store.results import ResultsFileError
    from pytest_torchperf.store.sessions import SessionError

    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(args.run(args))
    except (BaselineFileError, ResultsFileError, BisectError, PathError) as exc:
        print(f"torchperf: {exc}", file=sys.stderr)
        return 2
    except SessionError as exc:  # a results file's record carries a malformed session
        print(f"torchperf: a measurement's session in the results file: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        hint = "; install pandas (pip install pandas)" if exc.name == "pandas" else ""
        print(f"torchperf: {exc}{hint}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`torchperf show | head`): no traceback, and none either when
        # Python flushes stdout at exit. 141 is a shell's status for a process killed by SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
