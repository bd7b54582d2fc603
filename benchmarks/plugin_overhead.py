#!/usr/bin/env python3
"""Overhead of having pytest-torchperf installed, for a suite that has no perf tests.

The plugin is registered through the ``pytest11`` entry point, so every pytest run in an
environment where pytest-torchperf is installed loads it. This script prints (it never asserts:
timings on shared machines are noisy):

1. the wall time of a generated suite of plain tests (default 300: 30 modules x 10 tests, some
   parametrized, some using ``tmp_path``) run in fresh subprocesses with the plugin and with
   ``-p no:torchperf``, interleaved ABAB..., as medians, minima and ratios (goal: <= 1.02);
2. the import cost of ``pytest_torchperf.pytest_plugin.hooks`` from ``python -X importtime``, the slowest
   imports under it, and whether torch gets imported (it must not be);
3. with ``--with-perf-test``: a run of the same suite plus one trivial perf test, to show the
   one-off cost of the first measurement (torch import) separately;
4. with ``--without-other-plugins``: the same comparison with plugin autoloading disabled
   (``-p pytest_torchperf.pytest_plugin.hooks`` vs nothing), where other plugins do not dilute the ratio;
5. with ``--profile``: cProfile of one run with the plugin, restricted to pytest_torchperf code.

Other installed plugins stay loaded in the main comparison (as a user would have them) and are
listed; ``PYTEST_ADDOPTS``/``PYTEST_PLUGINS``/``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` are removed, and the
generated suite has its own ``pytest.ini`` so the caller's configuration does not apply.

Usage::

    python3 benchmarks/plugin_overhead.py                 # ~1 minute on a 2-core VM
    python3 benchmarks/plugin_overhead.py --repeats 15 --with-perf-test --profile
    python3 benchmarks/plugin_overhead.py --pycache-prefix --without-other-plugins
"""

from __future__ import annotations

import argparse
import os
import platform
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

PLUGIN_NAME = "torchperf"  # the pytest11 entry point name
PLUGIN_MODULE = "pytest_torchperf.pytest_plugin.hooks"
PACKAGE = "pytest_torchperf"
GOAL_RATIO = 1.02

# Environment variables through which a user's pytest configuration would leak into the runs.
LEAKY_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")


# ------------------------------------------------------------------------------------------------
# The generated suite
# ------------------------------------------------------------------------------------------------

PYTEST_INI = """\
[pytest]
# Own config so the caller's pytest.ini / pyproject.toml / setup.cfg do not apply.
addopts =
testpaths = suite
python_files = test_*.py
"""

CONFTEST = """\
import pytest


@pytest.fixture
def numbers():
    return list(range(10))
"""

# 10 tests per module: 4 plain, 3 parametrized cases, 2 with tmp_path, 1 with a conftest fixture.
TESTS_PER_MODULE = 10
MODULE_TEMPLATE = """\
import pytest


def test_add_{i}():
    assert 1 + {i} == {i} + 1


def test_string_{i}():
    assert "module{i}".startswith("module")


def test_list_{i}():
    values = [x * x for x in range(20)]
    assert values[3] == 9


def test_dict_{i}():
    d = {{"a": {i}, "b": 2}}
    assert d["a"] == {i}


@pytest.mark.parametrize("n", [0, 1, 2])
def test_param_{i}(n):
    assert n * 2 == n + n


def test_tmp_write_{i}(tmp_path):
    p = tmp_path / "f.txt"
    p.write_text("x" * {i})
    assert p.read_text() == "x" * {i}


def test_tmp_dir_{i}(tmp_path):
    (tmp_path / "sub").mkdir()
    assert (tmp_path / "sub").is_dir()


def test_fixture_{i}(numbers):
    assert sum(numbers) == 45
"""

PERF_MODULE = """\
import pytest


@pytest.mark.torchperf(min_time="100ms", warmup="20ms")
def test_trivial_perf():
    sum(range(100))
"""


def write_suite(root: Path, modules: int) -> int:
    """Write pytest.ini, conftest.py, suite/ and perf/ under ``root``; return the suite's test count."""
    (root / "pytest.ini").write_text(PYTEST_INI)
    (root / "conftest.py").write_text(CONFTEST)
    suite = root / "suite"
    suite.mkdir()
    for i in range(modules):
        (suite / f"test_mod{i:03d}.py").write_text(MODULE_TEMPLATE.format(i=i))
    perf = root / "perf"
    perf.mkdir()
    (perf / "test_perf_trivial.py").write_text(PERF_MODULE)
    return modules * TESTS_PER_MODULE


# ------------------------------------------------------------------------------------------------
# Running pytest
# ------------------------------------------------------------------------------------------------


@dataclass
class Run:
    wall: float  # seconds, perf_counter around the subprocess
    cpu: float  # user + system CPU seconds of the subprocess (less sensitive to contention)
    reported: float | None  # pytest's own "in X.XXs" (session time, excludes startup/plugin load)
    counts: dict[str, int]
    returncode: int
    output: str


SUMMARY_COUNT_RE = re.compile(
    r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)"
)
SUMMARY_TIME_RE = re.compile(r" in ([0-9.]+)s")


def parse_summary(output: str) -> tuple[dict[str, int], float | None]:
    """Counts and duration from pytest's final summary line ("300 passed in 1.23s")."""
    lines = [ln.strip("= ").strip() for ln in output.splitlines() if ln.strip()]
    for line in reversed(lines):
        if SUMMARY_TIME_RE.search(line) and SUMMARY_COUNT_RE.search(line):
            counts: dict[str, int] = {}
            for number, kind in SUMMARY_COUNT_RE.findall(line):
                kind = {"error": "errors", "warning": "warnings"}.get(kind, kind)
                counts[kind] = counts.get(kind, 0) + int(number)
            match = SUMMARY_TIME_RE.search(line)
            return counts, float(match.group(1)) if match else None
    return {}, None


def run_pytest(python: str, cwd: Path, env: dict[str, str], args: list[str]) -> Run:
    cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    counts, reported = parse_summary(proc.stdout)
    return Run(wall, cpu, reported, counts, proc.returncode, proc.stdout)


def plugins_line(output: str) -> str | None:
    for line in output.splitlines():
        if line.startswith("plugins:"):
            return line[len("plugins:") :].strip()
    return None


def check_run(label: str, run: Run, expected: int) -> str | None:
    """A problem description if the run did not collect and pass exactly ``expected`` tests."""
    bad = {
        k: v
        for k, v in run.counts.items()
        if k in ("failed", "errors", "skipped", "xfailed", "xpassed", "deselected")
    }
    if run.returncode != 0 or run.counts.get("passed") != expected or bad:
        tail = "\n".join(run.output.splitlines()[-15:])
        return (
            f"{label}: expected {expected} passed, got {run.counts or 'no summary line'} "
            f"(exit code {run.returncode})\n{textwrap.indent(tail, '    | ')}"
        )
    return None


# ------------------------------------------------------------------------------------------------
# -X importtime
# ------------------------------------------------------------------------------------------------


@dataclass
class ImportLine:
    self_us: int
    cumulative_us: int
    depth: int
    name: str


IMPORTTIME_RE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S.*)$")


def parse_importtime(stderr: str) -> list[ImportLine]:
    """Lines of ``-X importtime`` in their printed (post-order) order."""
    result = []
    for line in stderr.splitlines():
        match = IMPORTTIME_RE.match(line)
        if match:
            indent = len(match.group(3)) - 1  # one space after "|" at depth 0, then 2 per level
            result.append(
                ImportLine(
                    int(match.group(1)), int(match.group(2)), indent // 2, match.group(4).strip()
                )
            )
    return result


def subtree(lines: list[ImportLine], name: str) -> tuple[ImportLine | None, list[ImportLine]]:
    """The import line of ``name`` and its descendants (children are printed before the parent)."""
    for index, line in enumerate(lines):
        if line.name == name:
            descendants = []
            j = index - 1
            while j >= 0 and lines[j].depth > line.depth:
                descendants.append(lines[j])
                j -= 1
            return line, descendants
    return None, []


@dataclass
class ImportProfile:
    cumulative_ms: float
    own_ms: float  # self time of pytest_torchperf.* modules
    descendants: list[ImportLine]
    torch_modules: list[str]
    new_modules: int  # modules imported in the subtree (first time in the process)


def extract_direct(lines: list[ImportLine]) -> tuple[float, list[ImportLine]]:
    """Cumulative µs and lines of ``import pytest_torchperf.pytest_plugin.hooks`` run by an ``import`` statement."""
    top, descendants = subtree(lines, PLUGIN_MODULE)
    if top is None:
        raise RuntimeError(f"{PLUGIN_MODULE} not found in -X importtime output")
    # The package __init__ is normally nested under the plugin module's line (parents are
    # imported while the child is being found); count it with the plugin if it is not.
    package, package_desc = subtree(lines, PACKAGE)
    cumulative = top.cumulative_us
    everything = [top, *descendants]
    if package is not None and package not in descendants:
        everything += [package, *package_desc]
        cumulative += package.cumulative_us
    return cumulative, everything


def extract_entry_point_block(lines: list[ImportLine]) -> tuple[float, list[ImportLine]]:
    """Cumulative µs and lines of the plugin's imports inside a pytest run.

    pytest loads the entry point with importlib.import_module, which -X importtime does not log:
    the lines of pytest_torchperf and pytest_torchperf.pytest_plugin.hooks themselves are missing, and what they
    import appears as top-level lines, in one block between the neighbouring plugins' imports. The
    block runs from the subtree of the first top-level pytest_torchperf.* line to the last one.
    """
    tops = [i for i, ln in enumerate(lines) if ln.depth == 0 and ln.name.startswith(PACKAGE + ".")]
    if not tops:
        raise RuntimeError(f"no {PACKAGE}.* import in the -X importtime output of the pytest run")
    first = tops[0]
    while first > 0 and lines[first - 1].depth > 0:
        first -= 1
    block = lines[first : tops[-1] + 1]
    return sum(ln.cumulative_us for ln in block if ln.depth == 0), block


def import_profile(
    python: str,
    env: dict[str, str],
    args: list[str],
    repeats: int,
    cwd: Path | None = None,
    in_pytest: bool = False,
    missing_self_us: int = 0,
) -> ImportProfile:
    """``python -X importtime *args``: the import of pytest_torchperf.pytest_plugin.hooks in it; median run.

    ``missing_self_us`` is added to the cumulative time of ``in_pytest`` runs (the self time of
    the modules that importtime does not log there, taken from a direct import).
    """
    profiles = []
    for _ in range(repeats):
        proc = subprocess.run(
            [python, "-X", "importtime", *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            cwd=cwd,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{args!r} failed:\n{proc.stdout[-1000:]}{proc.stderr[-2000:]}")
        lines = parse_importtime(proc.stderr)
        if in_pytest:
            cumulative, everything = extract_entry_point_block(lines)
            cumulative += missing_self_us
            scope = everything  # other plugins may import torch; only ours matters here
        else:
            cumulative, everything = extract_direct(lines)
            scope = lines  # the process does nothing but import the plugin
        own = (
            sum(
                ln.self_us
                for ln in everything
                if ln.name == PACKAGE or ln.name.startswith(PACKAGE + ".")
            )
            + missing_self_us
        )
        torch_modules = sorted(
            {ln.name for ln in scope if ln.name == "torch" or ln.name.startswith("torch.")}
        )
        profiles.append(
            ImportProfile(cumulative / 1000, own / 1000, everything, torch_modules, len(everything))
        )
    profiles.sort(key=lambda p: p.cumulative_ms)
    return profiles[len(profiles) // 2]


def unlogged_self_us(profile: ImportProfile) -> int:
    """Self time of the modules pytest imports via importlib (not logged by -X importtime)."""
    return sum(ln.self_us for ln in profile.descendants if ln.name in (PACKAGE, PLUGIN_MODULE))


def torch_in_sys_modules(python: str, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [python, "-c", f"import sys, {PLUGIN_MODULE}; print('torch' in sys.modules)"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or f"error: {proc.stderr.strip()[-300:]}"


def time_torch_import(python: str, env: dict[str, str], repeats: int) -> tuple[float, float]:
    """Median wall time of ``python -c 'import torch'`` and of ``python -c pass`` (seconds)."""

    def median_wall(code: str) -> float:
        walls = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([python, "-c", code], env=env, capture_output=True, check=False)
            walls.append(time.perf_counter() - start)
        return statistics.median(walls)

    return median_wall("import torch"), median_wall("pass")


# ------------------------------------------------------------------------------------------------
# cProfile of one run (--profile)
# ------------------------------------------------------------------------------------------------


def profile_plugin(python: str, cwd: Path, env: dict[str, str], top: int) -> list[str]:
    out = cwd / "pytest.prof"
    cmd = [python, "-m", "cProfile", "-o", str(out), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if not out.exists():
        return [
            f"cProfile run failed (exit {proc.returncode}): {proc.stdout[-500:]}{proc.stderr[-500:]}"
        ]
    stats = pstats.Stats(str(out))
    rows = []
    total_tt = 0.0
    total_all = 0.0
    for (filename, lineno, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        total_all += tt
        if PACKAGE in Path(filename).parts:
            total_tt += tt
            rows.append((ct, tt, nc, f"{Path(filename).name}:{lineno}({func})"))
    rows.sort(reverse=True)
    lines = [
        f"cProfile of one run with the plugin: {total_all:.3f} s profiled, "
        f"{total_tt * 1000:.1f} ms self time in {PACKAGE} code (profiler overhead inflates both)",
        f"  {'cumulative':>10} {'self':>9} {'calls':>7}  function",
    ]
    for ct, tt, nc, where in rows[:top]:
        lines.append(f"  {ct * 1000:8.2f}ms {tt * 1000:7.2f}ms {nc:7d}  {where}")
    return lines


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------


def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_lines() -> list[str]:
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    return [
        f"machine: {platform.platform()} ({platform.machine()}), cpus: {os.cpu_count()}"
        + (f" (usable: {affinity})" if affinity is not None else "")
        + f", load average: {load}",
        f"python {platform.python_version()} ({sys.executable}); pytest {version_of('pytest')}, "
        f"pytest-torchperf {version_of('pytest-torchperf')}, torch {version_of('torch')}",
    ]


def bytecode_note(env: dict[str, str], tmp: Path, use_prefix: bool) -> str:
    """Apply --pycache-prefix to ``env`` and describe how bytecode is cached in the runs."""
    if use_prefix:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        return (
            f"bytecode: cached under {tmp / 'pycache'} (--pycache-prefix; "
            f"PYTHONDONTWRITEBYTECODE unset for the runs)"
        )
    if env.get("PYTHONDONTWRITEBYTECODE"):
        return (
            "bytecode: PYTHONDONTWRITEBYTECODE is set, so modules without an existing .pyc (an "
            "editable install of pytest-torchperf, the generated tests) are compiled on every run; "
            "--pycache-prefix models a normal install"
        )
    return "bytecode: written and reused as usual"


def load1() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b > 0 else "n/a"


@dataclass
class Comparison:
    """Interleaved timed runs with (A) and without (B) the plugin."""

    label: str
    runs_a: list[Run]
    runs_b: list[Run]

    def _wall(self, runs: list[Run]) -> list[float]:
        return [r.wall for r in runs] or [float("nan")]

    @property
    def median_a(self) -> float:
        return statistics.median(self._wall(self.runs_a))

    @property
    def median_b(self) -> float:
        return statistics.median(self._wall(self.runs_b))

    @property
    def ratio(self) -> float:
        return self.median_a / self.median_b

    def lines(self, without_label: str) -> list[str]:
        if not self.runs_a:
            return [f"{self.label}: no timed runs (see PROBLEMS)"]
        wall_a, wall_b = self._wall(self.runs_a), self._wall(self.runs_b)
        min_a, min_b = min(wall_a), min(wall_b)
        paired = statistics.median(a / b for a, b in zip(wall_a, wall_b, strict=False))
        cpu_a = statistics.median(r.cpu for r in self.runs_a)
        cpu_b = statistics.median(r.cpu for r in self.runs_b)
        lines = [
            f"{self.label}:",
            f"  with plugin: median {self.median_a:.3f} s, min {min_a:.3f} s  | {without_label}: median "
            f"{self.median_b:.3f} s, min {min_b:.3f} s",
            f"  ratio (medians) {self.ratio:.3f} (goal <= {GOAL_RATIO}) | ratio (minima) "
            f"{fmt_ratio(min_a, min_b)} | median of paired ratios {paired:.3f} | difference of "
            f"medians {1000 * (self.median_a - self.median_b):+.0f} ms",
            f"  CPU time (user+sys of the pytest process): median {cpu_a:.3f} s with plugin vs "
            f"{cpu_b:.3f} s without, ratio {fmt_ratio(cpu_a, cpu_b)}",
        ]
        rep_a = [r.reported for r in self.runs_a if r.reported is not None]
        rep_b = [r.reported for r in self.runs_b if r.reported is not None]
        if rep_a and rep_b:
            lines.append(
                f'  pytest\'s own session time ("in X s", excludes startup and plugin loading): '
                f"median {statistics.median(rep_a):.3f} s with plugin vs "
                f"{statistics.median(rep_b):.3f} s without"
            )
        return lines


def plugin_active(python: str, cwd: Path, env: dict[str, str], args: list[str]) -> bool:
    """Whether a pytest run with ``args`` registers the plugin module (from ``--trace-config``)."""
    args = [a for a in args if a != "-q"]
    proc = subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *args,
            "--trace-config",
            "--collect-only",
            "-q",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return f"PLUGIN registered: <module '{PLUGIN_MODULE}'" in proc.stdout + proc.stderr


def compare(
    label: str,
    python: str,
    tmp: Path,
    env: dict[str, str],
    args_a: list[str],
    args_b: list[str],
    repeats: int,
    expected: int,
    problems: list[str],
) -> Comparison:
    """Warm up, check that A loads the plugin and B does not, then time A B A B ..."""
    found: list[str] = []
    if not plugin_active(python, tmp, env, args_a):
        found.append(
            f"{label}: the plugin is not loaded in the runs that should have it (is "
            f"pytest-torchperf installed for {python}?)"
        )
    if plugin_active(python, tmp, env, args_b):
        found.append(f"{label}: the plugin is loaded in the runs that should not have it")
    # Untimed warm-up runs; they also write the bytecode caches (if any) that the timed runs use.
    for name, run_args in (("with plugin", args_a), ("without plugin", args_b)):
        problem = check_run(
            f"{label}, warm-up {name}", run_pytest(python, tmp, env, run_args), expected
        )
        if problem:
            found.append(problem)
    problems.extend(found)
    result = Comparison(label, [], [])
    if found:
        print(f"{label}: sanity checks failed, skipping the timed runs (see PROBLEMS at the end)")
        return result
    print(f"{label}:")
    for i in range(repeats):
        result.runs_a.append(run_pytest(python, tmp, env, args_a))
        result.runs_b.append(run_pytest(python, tmp, env, args_b))
        print(
            f"  run {i + 1}/{repeats}: with plugin {result.runs_a[-1].wall:.3f} s, without "
            f"{result.runs_b[-1].wall:.3f} s",
            flush=True,
        )
    for name, runs in (("with plugin", result.runs_a), ("without plugin", result.runs_b)):
        for i, run in enumerate(runs):
            problem = check_run(f"{label}, {name} run {i + 1}", run, expected)
            if problem:
                problems.append(problem)
                break
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=7,
        help="Timed runs per configuration, interleaved ABAB (default 7)",
    )
    parser.add_argument(
        "--modules",
        type=int,
        default=30,
        help=f"Test modules in the generated suite, {TESTS_PER_MODULE} tests each (default 30)",
    )
    parser.add_argument(
        "--import-repeats",
        type=int,
        default=5,
        help="-X importtime runs; the median one is shown (default 5)",
    )
    parser.add_argument(
        "--with-perf-test",
        action="store_true",
        help="Also time the suite plus one trivial perf test (first-measurement cost)",
    )
    parser.add_argument(
        "--perf-repeats",
        type=int,
        default=3,
        help="Runs of the suite plus the perf test with --with-perf-test (default 3)",
    )
    parser.add_argument(
        "--without-other-plugins",
        action="store_true",
        help="Also compare with plugin autoloading disabled (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1, "
        "-p pytest_torchperf.pytest_plugin.hooks vs nothing): the ratio for a lean environment, "
        "where other plugins do not dilute it",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="Also cProfile one run with the plugin and list pytest_torchperf functions",
    )
    parser.add_argument(
        "--pycache-prefix",
        action="store_true",
        help="Cache compiled bytecode between runs even if PYTHONDONTWRITEBYTECODE is "
        "set: unset it and point PYTHONPYCACHEPREFIX at the temporary folder "
        "(models a normal pip install, writes nothing into the source tree)",
    )
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="Interpreter to run pytest with (default: this one)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="Keep the generated suite and print its path"
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.modules < 1 or args.import_repeats < 1 or args.perf_repeats < 1:
        parser.error("--repeats, --modules, --import-repeats and --perf-repeats must be >= 1")

    load_start = load1()
    env = dict(os.environ)
    dropped = [name for name in LEAKY_ENV if env.pop(name, None) is not None]

    print("== pytest-torchperf plugin overhead ==")
    for line in machine_lines():
        print(line)
    if dropped:
        print(f"note: removed {', '.join(dropped)} from the environment of the runs")

    tmp = Path(tempfile.mkdtemp(prefix="torchperf-overhead-"))
    bytecode_line = bytecode_note(env, tmp, args.pycache_prefix)
    print(bytecode_line)
    problems: list[str] = []
    started = time.perf_counter()
    try:
        expected = write_suite(tmp, args.modules)
        print(
            f"suite: {expected} tests in {args.modules} modules under {tmp} (own pytest.ini, conftest.py)"
        )

        # The loaded plugins, from the header of a run without -q.
        header_a = run_pytest(args.python, tmp, env, ["--collect-only", "suite"]).output
        header_b = run_pytest(
            args.python, tmp, env, ["-p", f"no:{PLUGIN_NAME}", "--collect-only", "suite"]
        ).output
        plugins_a, plugins_b = plugins_line(header_a), plugins_line(header_b)
        print(f"plugins loaded (with plugin):     {plugins_a or '(none)'}")
        print(f"plugins loaded (-p no:{PLUGIN_NAME}): {plugins_b or '(none)'}")

        main_cmp = compare(
            f"as installed (other plugins loaded), -p no:{PLUGIN_NAME} as baseline",
            args.python,
            tmp,
            env,
            ["-q", "suite"],
            ["-q", "-p", f"no:{PLUGIN_NAME}", "suite"],
            args.repeats,
            expected,
            problems,
        )
        lean_cmp = None
        if args.without_other_plugins:
            lean_env = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
            lean_cmp = compare(
                "no plugin autoloading (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1), "
                f"-p {PLUGIN_MODULE} vs nothing",
                args.python,
                tmp,
                lean_env,
                ["-q", "-p", PLUGIN_MODULE, "suite"],
                ["-q", "suite"],
                args.repeats,
                expected,
                problems,
            )

        # Import cost.
        import_code = ["-c", f"import {PLUGIN_MODULE}"]
        cold: ImportProfile | None = None
        in_run: ImportProfile | None = None
        try:
            import_profile(args.python, env, import_code, 1)  # warm the bytecode caches
            cold = import_profile(args.python, env, import_code, args.import_repeats)
            # The same import as it happens inside a real pytest run (entry point loading), where
            # pytest and its dependencies are already imported: what the plugin adds to startup.
            in_run = import_profile(
                args.python,
                env,
                ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only", "suite"],
                args.import_repeats,
                cwd=tmp,
                in_pytest=True,
                missing_self_us=unlogged_self_us(cold),
            )
        except RuntimeError as exc:
            problems.append(f"import profile: {str(exc)[-1500:]}")
        in_sys_modules = torch_in_sys_modules(args.python, env)

        perf_lines: list[str] = []
        if args.with_perf_test and main_cmp.runs_a:
            perf_args = ["-q", "--durations=3", "--durations-min=0", "suite", "perf"]
            run_pytest(args.python, tmp, env, perf_args)  # warm-up (bytecode of the perf module)
            runs_c = [
                run_pytest(args.python, tmp, env, perf_args) for _ in range(args.perf_repeats)
            ]
            for i, run in enumerate(runs_c):
                problem = check_run(f"with perf test run {i + 1}", run, expected + 1)
                if problem:
                    problems.append(problem)
                    break
            med_c = statistics.median(r.wall for r in runs_c)
            calls = []
            for run in runs_c:
                match = re.search(r"^([0-9.]+)s call\s+\S*test_trivial_perf", run.output, re.M)
                if match:
                    calls.append(float(match.group(1)))
            rep_a = [r.reported for r in main_cmp.runs_a if r.reported is not None]
            rep_c = [r.reported for r in runs_c if r.reported is not None]
            torch_wall, bare_wall = time_torch_import(args.python, env, 3)
            perf_lines = [
                f"with 1 trivial perf test (min_time=100ms, warmup=20ms): median {med_c:.3f} s over "
                f"{len(runs_c)} runs, +{med_c - main_cmp.median_a:.3f} s over the plain suite with plugin",
                "  perf test call phase (pytest --durations): median "
                + (f"{statistics.median(calls):.3f} s" if calls else "n/a")
                + " (torch import + output check + warm-up + 100 ms timed + fingerprint)",
                '  pytest\'s session time ("in X s"): median '
                + (
                    f"{statistics.median(rep_c):.3f} s vs {statistics.median(rep_a):.3f} s for the plain "
                    f"suite; the rest of the difference is startup/interpreter exit with torch loaded"
                    if rep_c and rep_a
                    else "n/a"
                ),
                f"  for scale: python -c 'import torch' {torch_wall:.3f} s vs python -c pass "
                f"{bare_wall:.3f} s -> torch import ~{torch_wall - bare_wall:.3f} s",
            ]

        profile_lines = profile_plugin(args.python, tmp, env, 15) if args.profile else []
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    def top_imports(profile: ImportProfile) -> list[str]:
        rows = sorted(
            (ln for ln in profile.descendants if ln.name != PLUGIN_MODULE),
            key=lambda ln: ln.self_us,
            reverse=True,
        )[:5]
        return [
            f"    {ln.self_us / 1000:6.1f} ms self, {ln.cumulative_us / 1000:6.1f} ms cumulative  "
            f"{ln.name}"
            for ln in rows
        ]

    print()
    print("== results ==")
    for line in machine_lines():
        print(line)
    print(
        f"suite: {expected} tests, {args.repeats} runs each, interleaved (ABAB), fresh subprocesses, "
        f"python -m pytest -q -p no:cacheprovider"
    )
    print(bytecode_line)
    print(f"plugins: {plugins_a or '(none)'}")
    for line in main_cmp.lines(f"-p no:{PLUGIN_NAME}"):
        print(line)
    if lean_cmp is not None:
        for line in lean_cmp.lines("no plugins"):
            print(line)
    if cold is None:
        print(f"import {PLUGIN_MODULE}: n/a (see PROBLEMS)")
    else:
        print(
            f"import {PLUGIN_MODULE} (cold interpreter): {cold.cumulative_ms:.1f} ms cumulative, of "
            f"which {cold.own_ms:.1f} ms self time in {PACKAGE} modules; torch imported: "
            f"{'yes (' + ', '.join(cold.torch_modules[:5]) + ')' if cold.torch_modules else 'no'}"
        )
        print("  slowest imports under it (by self time):")
        print("\n".join(top_imports(cold)))
    if in_run is not None:
        print(
            f"import {PLUGIN_MODULE} inside a pytest run (what the plugin adds to startup): "
            f"{in_run.cumulative_ms:.1f} ms cumulative, {in_run.new_modules} modules newly imported, "
            f"{in_run.own_ms:.1f} ms self time in {PACKAGE} modules (self time of {PACKAGE} and "
            f"{PLUGIN_MODULE}, not logged there, taken from the cold import)"
        )
        print("  slowest imports under it (by self time):")
        print("\n".join(top_imports(in_run)))
    print(
        f"python -c \"import sys, {PLUGIN_MODULE}; print('torch' in sys.modules)\" -> {in_sys_modules}"
    )
    for line in perf_lines:
        print(line)
    for line in profile_lines:
        print(line)
    load_end = load1()
    cpus = os.cpu_count() or 1
    # The benchmark itself keeps about one CPU busy, so the load at the end counts it too.
    if load_start >= 0.5 * cpus or load_end >= cpus:
        print(
            f"warning: 1-minute load average {load_start:.2f} at the start and {load_end:.2f} at the "
            f"end on {cpus} CPUs (this benchmark accounts for about 1): other processes "
            f"competed for the CPUs, wall-clock figures are unreliable (prefer the minima, the "
            f"paired ratio and the CPU-time ratio, or rerun on an idle machine with more --repeats)"
        )
    if problems:
        print()
        print("PROBLEMS (the figures above may not describe a working run):")
        for problem in problems:
            print(f"  - {problem}")
    if main_cmp.runs_a:
        ratio = main_cmp.ratio
        print(
            f"verdict: ratio {ratio:.3f} is {'within' if ratio <= GOAL_RATIO else 'ABOVE'} the goal of "
            f"{GOAL_RATIO} (informational only; noisy machines vary by several percent)"
        )
    print(f"benchmark took {time.perf_counter() - started:.0f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
