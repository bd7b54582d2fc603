"""What the words of a ``torchperf`` command line are, once argparse has parsed them: a word
argparse left over (an optional positional after an option, a results file after accept's
options), a path told apart by what it is (a baseline folder, a results file, a folder of
results files), and a hint for a word no command takes. Errors are the command's own usage
errors (``command.error``)."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from pytest_torchperf.store.baselines import ENVIRONMENT_FILE

#: A command's positional that argparse may leave among the extras when it comes after an
#: option (``bisect v1 -k t main``): it fills them with None from the first words.
_LATE_POSITIONAL = {"bisect": "bad"}


def hint(command: argparse.ArgumentParser, word: str) -> str:
    """What an unrecognized ``word`` was likely meant as: a misspelt option, a measurement for
    ``-k``, a second path."""
    options = [o for action in command._actions for o in action.option_strings]
    if word.startswith("-"):
        near = difflib.get_close_matches(word.split("=", 1)[0], options, 1)
        return f"did you mean {near[0]}?" if near else f"{command.prog} -h lists its options"
    if "-k" in options and not Path(word).exists():
        return f"to select measurements by test or name, give -k {word}"
    return f"{command.prog} reads one path: run it once per path"


def placed(args: argparse.Namespace, extras: list[str]) -> list[str]:
    """Put the words argparse left over where they belong; return the rest (refused)."""
    extras = list(extras)
    late = _LATE_POSITIONAL.get(args.command)
    if late and getattr(args, late) is None:
        word = next((w for w in extras if w[:1] != "-"), None)
        if word is not None:
            setattr(args, late, word)
            extras.remove(word)
    if args.command == "forget":  # its names after the options (forget t --storage d mlp)
        more = [w for w in extras if w[:1] != "-"]
        args.names, extras = [*args.names, *more], [w for w in extras if w not in more]
    if args.command in ("accept", "merge"):  # results files after the options
        # merge has no -k, so every word is a file; accept's other words may be a measurement
        # meant for -k, unless they name a file (missing ones then fail as "cannot be read").
        more = [
            w
            for w in extras
            if w[:1] != "-" and (Path(w).exists() or w.endswith(".json") or not hasattr(args, "k"))
        ]
        args.results, extras = args.results + more, [w for w in extras if w not in more]
    return extras


def resolve_paths(args: argparse.Namespace) -> None:
    """Each command's baseline folder (``storage``) and results files (``results``) from the
    words and options that name them, refusing a path that is not what its place needs."""
    command = args.parser
    if args.command in ("list", "show", "report"):
        _paths(args, command)
    if args.command == "graph":
        if args.results and args.storage:
            command.error(f"give one of {args.results} and --storage {args.storage}")
        args.results = args.results or args.storage or ".torchperf"
    if args.command == "accept":  # it would write baselines among them
        remedy = "point --storage at the baseline folder (pytest --torchperf-save wrote it)"
        _not_results(command, Path(args.storage or ".torchperf"), remedy)
    for path in (args.results or []) if args.command in ("accept", "merge", "report") else []:
        if Path(path).is_dir():  # the store's own message names no option of ours
            baselines, found = _folder(Path(path))
            if baselines:  # a baseline folder: the flag
                where = f"a baseline folder goes after --storage: --storage {path}"
            elif found:  # e.g. a downloaded artifact folder of results files
                where = f"the results files in it: {' '.join(found[:3])}{' ...' * (len(found) > 3)}"
            else:
                where = "a baseline folder goes after --storage"
            command.error(
                f"results file {path} is a folder: give the file pytest --torchperf-json PATH "
                f"wrote ({where})"
            )


#: The files a command writes: option (its ``args`` name, its spelling) -> an example name.
OUTPUTS = (
    ("output", "-o", "merged.json"),
    ("html", "--html", "report.html"),
    ("markdown", "--markdown", "summary.md"),
)


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse an output path that is a folder before the command reads anything: written at the
    end, it failed with a traceback after the tables had printed."""
    for attr, option, example in OUTPUTS:
        path = getattr(args, attr, None)
        if path and Path(path).is_dir():
            args.parser.error(
                f"{option} {path} is a folder; give the file to write, e.g. "
                f"{option} {Path(path) / example}"
            )


def _folder(path: Path) -> tuple[bool, list[str]]:
    """Whether folder ``path`` holds baselines (an ``<environment>/environment.json``), and the
    results files (``*.json``) directly in it."""
    if not path.is_dir():
        return False, []
    return any(path.glob(f"*/{ENVIRONMENT_FILE}")), sorted(str(f) for f in path.glob("*.json"))


def _paths(args: argparse.Namespace, command: argparse.ArgumentParser) -> None:
    """The baseline folder and results files given as words (``show DIR``, ``report FILE DIR``),
    told apart by what each path is, into ``storage`` and ``results``."""
    folders = [args.folder] if getattr(args, "folder", None) else []
    word = folders[0] if folders else "/"
    if "/" not in word and not Path(word).exists() and Path(".torchperf").is_dir():
        if hasattr(args, "k"):  # a measurement's name (show mlp), not a folder
            command.error(f"baseline folder {word} does not exist; {hint(command, word)}")
    for path in getattr(args, "paths", None) or []:
        if not Path(path).exists():
            command.error(
                f"{path} does not exist: give a results file (pytest --torchperf-json PATH wrote "
                f"it) or the baseline folder (pytest --torchperf-save wrote it, default .torchperf)"
            )
        if Path(path).is_dir():
            folders.append(path)
        else:
            args.results = [*(args.results or []), path]
    named = [*folders, *([args.storage] if args.storage else [])]
    if len(named) > 1:
        command.error(f"give one baseline folder, not {' and '.join(named)}")
    args.storage = named[0] if named else ".torchperf"
    if not getattr(args, "results", None):
        _not_results(command, Path(args.storage))


def _not_results(command: argparse.ArgumentParser, storage: Path, remedy: str = "") -> None:
    """Refuse a folder of results files (e.g. a CI artifact) given as the baseline folder."""
    baselines, found = _folder(storage)
    if found and not baselines:
        command.error(
            f"{storage} holds results files, not baselines (no <environment>/{ENVIRONMENT_FILE} "
            f"in it): {remedy or f'give one of them as a file, e.g. torchperf report {found[0]}'}"
        )
