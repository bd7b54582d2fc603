"""The plugin's command-line options and ini keys: registration and reading (no torch).

Kept out of :mod:`.hooks` so each stays one job; the option *values* are parsed by
the table in :mod:`pytest_torchperf.options.measure_options`, shared with marker keywords.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_torchperf.core.errors import OptionError
from pytest_torchperf.kinds import parts
from pytest_torchperf.options.measure_options import OPTIONS, parse_layer
from pytest_torchperf.options.values import argparse_type, parse_bool, parse_device
from pytest_torchperf.pytest_plugin import child_runs
from pytest_torchperf.pytest_plugin.stash import ini_value

if TYPE_CHECKING:
    from pytest_torchperf.options.settings import RunSettings

#: Measurement options that also have a ``--torchperf-<name>`` option and a ``torchperf_<name>`` ini key.
CLI_OPTIONS = tuple(name for name, spec in OPTIONS.items() if spec.cli)


#: Metavars of the options that take a value; an option of the run's own without one is an on/off
#: flag, and a measurement option without one takes a ``VALUE``.
_METAVARS = {
    "storage": "DIR",
    "max_slowdown": "PCT",
    "min_time": "SECONDS",
    "warmup": "SECONDS",
    "threads": "N",
    "min_cpu_share": "SHARE",
    "max_spread": "PCT",
    "max_neighbour_load": "SHARE",
    "max_machine_slowdown": "PCT",
    "max_widening": "FACTOR",
    "min_gpu_clock": "SHARE",
    "max_kernel_slowdown": "PCT",
    "ignore_counters": "NAMES",
    "max_instruction_increase": "PCT",
    "variants": "NAMES",
    "device": "DEVICE",
    "report_dir": "DIR",
    "markdown": "PATH",
    "html": "PATH",
    "json": "PATH",
    "save_wait": "SECONDS",
}

#: ``--torchperf-<name>`` options, in ``--help`` order: name -> help (help style: capitalised, no
#: final period for single phrases). The measurement options' help is their table's, with ``%``
#: escaped for argparse's %-formatting of help strings.
_CLI_HELP = {
    "save": "Measure marked tests and record the results as baselines",
    "compare": "Measure marked tests and fail those slower than their stored baseline",
    "storage": "Baseline folder (default: .torchperf/ under the rootdir; ini torchperf_storage)",
    "reset": "With --torchperf-save: replace the stored history of each measured test "
    "instead of appending a session",
    **{name: OPTIONS[name].help.replace("%", "%%") for name in CLI_OPTIONS},
    "cross_machine": "With --torchperf-compare, where no baseline exists for this environment, "
    "compare with another environment's: times normalised by the calibration "
    "kernel (warn only), counters of the same torch build (gated)",
    "graph": "After each measurement's timed passes, export its call (torch.export) and "
    "measure each graph node's own time, FLOPs and output bytes: stored with a save, "
    "compared by a compare (the why line names the block that grew), shown on the "
    "model's graph by `torchperf graph` (docs/graph.md). Costs seconds per measurement",
    "variants": "Run only these variants, comma-separated: eager, compiled, fused, amp, "
    "int8 (ini torchperf_variants)",
    "device": "Device for the torchperf_device fixture: auto (default), cpu, cuda, cuda:1, mps",
    "report_dir": "Folder for profiler traces (default: .torchperf-report/ under the rootdir)",
    "markdown": "Write a markdown summary of the measurements (also appended to "
    "$GITHUB_STEP_SUMMARY when that is set)",
    "html": "Write a self-contained HTML report (table, distributions, trends, "
    "variant speedups, trace links)",
    "json": "Write the measurements as pytest-benchmark-compatible JSON",
    "disable": "Run each perf test once without timing (fast correctness CI)",
    "skip": "Skip perf tests (marked, or using the torchperf, torchperf_timer or "
    "torchperf_quantized_model fixture; not one that only profiles)",
    "only": "Run only perf tests (as --torchperf-skip defines them)",
    "save_wait": "With --torchperf-save: seconds the save may spend in all waiting for a busy "
    "machine to quiet down and measuring a refused pass again (default 60; 0: re-measure "
    "once; ini torchperf_save_wait)",
}

#: ``torchperf_<name>`` ini keys, in ``--help`` order: name -> help (the measurement options'
#: help is not %-formatted here).
_INI_HELP = {
    "storage": "Baseline folder, relative to the rootdir (default .torchperf)",
    "report_dir": "Trace/report folder, relative to the rootdir (default .torchperf-report)",
    "device": "Device for the torchperf_device fixture (default auto)",
    "variants": "Run only these variants, comma-separated",
    "save_wait": "Seconds a save may spend waiting for a busy machine to quiet down (default 60)",
    **{name: OPTIONS[name].help for name in CLI_OPTIONS},
}


def ini_layer(config: pytest.Config) -> dict[str, Any]:
    """The measurement options set in the ini file, parsed (a bad value is a UsageError)."""
    parsed: dict[str, Any] = {}
    for name in CLI_OPTIONS:
        value = ini_value(config, f"torchperf_{name}", names=_METAVARS.get(name) == "NAMES")
        if value in ("", []):
            continue
        try:
            parsed |= parse_layer({name: value}, "ini file")
        except OptionError as exc:
            raise pytest.UsageError(f"torchperf: {exc} (ini key torchperf_{name})") from None
    return parsed


def folder(config: pytest.Config, name: str, default: str) -> Path:
    """A folder option: CLI (relative to the invocation dir) > ini (relative to the ini file) > default."""
    cli = config.getoption(f"torchperf_{name}")
    if cli:
        return Path(cli).expanduser().resolve()
    ini = ini_value(config, f"torchperf_{name}")
    if ini:
        base = config.inipath.parent if config.inipath else config.rootpath
        return (base / Path(ini).expanduser()).resolve()
    return config.rootpath / default


def check_rootdir(config: pytest.Config) -> None:
    """Refuse a run whose rootdir pytest chose from an option's value.

    pytest picks its rootdir and ini file before it loads plugins, so it cannot tell a plugin
    option's value from a test path: ``--torchperf-storage /elsewhere/baselines`` (with a space)
    made ``/elsewhere`` the rootdir once that folder existed, so the compare after a save read
    ``p/tests/test_a.py::t`` where the save had stored ``tests/test_a.py::t``, saw no baseline,
    called every test "new" and ran without the project's ini settings. The rootdir pytest would
    have chosen from the real test paths is worked out again with its own function; where that
    function is missing or changed (a private API), nothing is checked.
    """
    # Only an option written with a space whose value is an existing path, not one of the
    # positional arguments, can have moved the rootdir: without one (nearly every run) pytest's
    # function is not called at all.
    args = [str(arg) for arg in config.invocation_params.args]
    # (absent under --help, which is never refused)
    positional = [str(arg) for arg in (getattr(config.option, "file_or_dir", None) or [])]
    culprits = [
        f"{option} {value}"
        for option, value in zip(args, args[1:], strict=False)
        if option.startswith("--")
        and "=" not in option
        and not value.startswith("-")
        and value not in positional
        and (config.invocation_params.dir / value).exists()
    ]
    if not culprits:
        return
    import inspect

    try:
        from _pytest.config.findpaths import determine_setup

        accepted = inspect.signature(determine_setup).parameters
        wanted = {
            "inifile": config.option.inifilename,
            "override_ini": config.option.override_ini,
            "args": positional,
            "rootdir_cmd_arg": config.option.rootdir or None,
            "invocation_dir": config.invocation_params.dir,
        }
        if not set(accepted) <= set(wanted):
            return
        expected = determine_setup(**{name: wanted[name] for name in accepted})[0]
    except Exception:  # noqa: BLE001 - a private API of pytest: no check rather than a crash
        return
    if Path(expected) == config.rootpath:
        return
    what = " and ".join(culprits)
    fixed = ", ".join(c.replace(" ", "=", 1) for c in culprits)
    raise pytest.UsageError(
        f"torchperf: pytest took the value of {what} for a test path when it chose its rootdir "
        f"({config.rootpath} instead of {expected}; pytest reads plugin options only after "
        f"that), so test ids would not match the stored baselines. Write the option with '=': "
        f"{fixed}"
    )


def _declared(table: str) -> dict[str, Any]:
    """One of the option tables the child runs and each kind's plugin part declare."""
    owners = (child_runs, *parts("plugin", having="CLI_HELP"))
    return {k: v for owner in owners for k, v in getattr(owner, table, {}).items()}


def ini_keys() -> dict[str, str]:
    """Every ``torchperf_<name>`` ini key: name -> help."""
    return _declared("INI_HELP") | _INI_HELP


def _cli_help() -> dict[str, str]:
    """Every ``--torchperf-<name>`` option: name -> help."""
    return _CLI_HELP | _declared("CLI_HELP")


def flag(name: str) -> str:
    """The command-line spelling of option ``name``: ``max_slowdown`` -> ``--torchperf-max-slowdown``."""
    return f"--torchperf-{name.replace('_', '-')}"


def flags() -> list[str]:
    """Every ``--torchperf-*`` option :func:`add_options` registers, in ``--help`` order."""
    return [flag(name) for name in _cli_help()]


def add_options(parser: pytest.Parser) -> None:
    """Register ``--torchperf-*`` options and ``torchperf_*`` ini keys: this module's, then those
    the child runs and each kind's plugin part declare where they read them (``CLI_HELP``,
    ``METAVARS``, ``INI_HELP``, ``CHOICES``)."""
    group = parser.getgroup(
        "torchperf", "performance regressions of PyTorch models (pytest-torchperf)"
    )
    cli = _cli_help()
    metavars = _METAVARS | _declared("METAVARS")
    ini = ini_keys()
    choices = _declared("CHOICES")
    for name, text in cli.items():
        spelt = flag(name)
        if name not in CLI_OPTIONS and name not in metavars:
            # An on/off switch; one an ini key sets too is None where not given.
            default = None if name in ini else False
            group.addoption(spelt, action="store_true", default=default, help=text)
        elif name not in CLI_OPTIONS:
            metavar, allowed = metavars[name], choices.get(name)
            convert = argparse_type(parse_device) if name == "device" else None
            group.addoption(
                spelt, metavar=metavar, type=convert, default=None, choices=allowed, help=text
            )
        elif OPTIONS[name].parse is parse_bool:
            group.addoption(spelt, action="store_const", const=True, default=None, help=text)
        else:
            metavar = metavars.get(name, "VALUE")
            convert = argparse_type(OPTIONS[name].parse)
            group.addoption(spelt, metavar=metavar, type=convert, default=None, help=text)
    for name, text in ini.items():
        parser.addini(f"torchperf_{name}", text)


def run_settings(config: pytest.Config) -> RunSettings:
    """The run's settings from the command line and ini file, option combinations checked
    (bad input is a UsageError naming the option and the fix)."""
    from pytest_torchperf.options.settings import RunSettings
    from pytest_torchperf.options.variant_options import parse_variant_filter

    opt = config.getoption
    if opt("torchperf_skip") and opt("torchperf_only"):
        raise pytest.UsageError(
            "--torchperf-skip and --torchperf-only exclude each other; pick one"
        )
    if opt("torchperf_disable") and (opt("torchperf_save") or opt("torchperf_compare")):
        raise pytest.UsageError(
            "--torchperf-disable runs perf tests without timing, so it cannot be "
            "combined with --torchperf-save or --torchperf-compare"
        )
    for name, needed in (("cross-machine", "compare"), ("reset", "save")):
        if opt(f"--torchperf-{name}") and not opt(f"--torchperf-{needed}"):
            raise pytest.UsageError(
                f"--torchperf-{name} only makes sense with --torchperf-{needed}"
            )
    for report, example in (
        ("json", "results.json"),
        ("html", "report.html"),
        ("markdown", "summary.md"),
    ):
        where = opt(f"torchperf_{report}")
        if where and Path(where).is_dir():  # found before the run, not after its measurements
            raise pytest.UsageError(
                f"--torchperf-{report} {where}: is a folder; give the file to write, e.g. "
                f"--torchperf-{report}={Path(where) / example}"
            )
    storage = folder(config, "storage", ".torchperf")
    if (
        (opt("torchperf_save") or opt("torchperf_compare"))
        and storage.exists()
        and not storage.is_dir()
    ):
        raise pytest.UsageError(
            f"torchperf: the storage path {storage} is a file, not a folder; "
            f"point --torchperf-storage (or ini torchperf_storage) at a folder"
        )

    on_cli = opt("torchperf_variants")
    raw_filter = on_cli or ini_value(config, "torchperf_variants", names=True) or None
    given = "--torchperf-variants" if on_cli else "ini key torchperf_variants"
    try:
        variant_filter = parse_variant_filter(raw_filter) if raw_filter else None
    except OptionError as exc:
        raise pytest.UsageError(f"torchperf: {given}: {exc}") from None
    processes = child_runs.processes_setting(
        config,
        # Asked of each kind before its settings exist: their checks come after the count's.
        any(module.repeats_exactly(config) for module in parts("plugin", having="repeats_exactly")),
    )
    return RunSettings(
        storage=storage,
        report_dir=folder(config, "report_dir", ".torchperf-report"),
        device=opt("torchperf_device") or _ini_device(config),
        save=opt("torchperf_save"),
        compare=opt("torchperf_compare"),
        disable=opt("torchperf_disable"),
        reset=opt("torchperf_reset"),
        appends=opt("torchperf_save")
        and not opt("torchperf_reset")
        and not opt("torchperf_compare"),
        cli={n: v for n in CLI_OPTIONS if (v := opt(f"torchperf_{n}")) is not None},
        ini=ini_layer(config),
        variant_filter=variant_filter,
        variant_filter_from=given,
        cross_machine=opt("torchperf_cross_machine"),
        ids_from_here=Path(config.invocation_params.dir).resolve() == config.rootpath.resolve(),
        graph=opt("torchperf_graph"),
        results_file=opt("torchperf_json"),
        processes=processes,
        confirm=child_runs.confirm_setting(config),
        child=child_runs.child_output(config) is not None,
        # Each process of a save gets its share (the children are started with theirs); under
        # xdist each worker.
        save_wait=save_wait_setting(config) / processes / _workers(config),
        # Each kind's own run settings, from its plugin part.
        sections=tuple(module.settings(config) for module in parts("plugin", having="settings")),
    )


def _ini_device(config: pytest.Config) -> str:
    """Ini ``torchperf_device``, checked as ``--torchperf-device`` is (default ``auto``)."""
    raw = ini_value(config, "torchperf_device")
    try:
        return parse_device(raw) if raw else "auto"
    except OptionError as exc:
        raise pytest.UsageError(f"torchperf: {exc} (ini key torchperf_device)") from None


def _workers(config: pytest.Config) -> int:
    """How many xdist workers share the run (1 outside xdist)."""
    workerinput = getattr(config, "workerinput", None) or {}
    try:
        return max(1, int(workerinput.get("workercount", 1)))
    except (TypeError, ValueError):
        return 1


def save_wait_setting(config: pytest.Config) -> float:
    """The save's waiting budget in seconds (``--torchperf-save-wait``, ini
    ``torchperf_save_wait``), validated."""
    from pytest_torchperf.run.quiet import DEFAULT_SAVE_WAIT

    raw = config.getoption("torchperf_save_wait")
    if raw is None:
        raw = ini_value(config, "torchperf_save_wait") or None
    if raw is None:
        return DEFAULT_SAVE_WAIT
    text = str(raw).strip().removesuffix("s").strip()
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:
        raise pytest.UsageError(
            f"torchperf: --torchperf-save-wait (ini torchperf_save_wait) takes seconds from 0 to "
            f"86400, got {raw!r}; e.g. --torchperf-save-wait=120 on a machine whose load comes "
            f"and goes, 0 to re-measure a refused pass only once"
        )
    return value
