"""pytest glue of ``--torchperf-instructions``: the option, its checks, and the one child pytest
run under Valgrind that counts every perf test before this run's own test loop.

Why a child: Valgrind has to start the process (it cannot attach), and ``import torch`` under it
costs 30-60 s, so the counts are taken once per run, in one child started with the controller's
own arguments plus ``--torchperf-child FILE`` under ``valgrind --tool=callgrind`` with
instrumentation off (:func:`pytest_torchperf.measure.callgrind.valgrind_command`). The child
counts each measurement (:mod:`pytest_torchperf.run.counting`) and writes one line per count;
this run then measures as usual (counters, outputs, variants, a timed pass that is reported, not
gated) and judges the counts through the comparison engine.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_torchperf.pytest_plugin import child_runs
from pytest_torchperf.pytest_plugin.stash import context_of

#: The child is killed after this long (a stuck child would otherwise hold CI forever).
CHILD_TIMEOUT_S = 3 * 3600.0


def add_options(group: Any, parser: pytest.Parser) -> None:
    group.addoption(
        "--torchperf-instructions",
        action="store_true",
        default=None,
        help="Gate CPU perf tests on instructions per call counted under Valgrind "
        "(deterministic: for shared CI runners) instead of time; one extra pytest "
        "process under valgrind counts them first (ini torchperf_instructions)",
    )
    parser.addini(
        "torchperf_instructions", "Gate on instruction counts under Valgrind (true/false)"
    )


def instructions_setting(config: pytest.Config) -> bool:
    """Whether this run counts instructions; bad combinations are usage errors that say why."""
    from pytest_torchperf.options.values import parse_bool

    raw = config.getoption("torchperf_instructions")
    if raw is None:
        ini = config.getini("torchperf_instructions")
        try:
            raw = parse_bool(ini) if ini not in ("", None) else False
        except Exception:
            raise pytest.UsageError(
                f"torchperf: ini torchperf_instructions must be true or false, got {ini!r}"
            ) from None
    if not raw or config.getoption("torchperf_skip"):
        return False
    on_cli = config.getoption("torchperf_instructions") is not None
    # Set in the ini file, the mode is switched off for one run with -o: say so in each error.
    off = (
        ""
        if on_cli
        else " (set by ini torchperf_instructions: -o torchperf_instructions=false turns it off for this run)"
    )
    if config.getoption("torchperf_disable"):
        if not on_cli:
            return False  # the ini default gives way to a run that times nothing
        raise pytest.UsageError(
            "--torchperf-instructions counts instructions of each perf test; it cannot be "
            "combined with --torchperf-disable"
        )
    if child_runs.is_xdist(config) and not config.getoption("torchperf_child"):
        raise pytest.UsageError(
            "--torchperf-instructions counts every perf test in one pytest process under "
            "Valgrind; pytest-xdist (-n) would start one per worker. Drop -n for the "
            "instruction run (e.g. pytest -n 2 --torchperf-skip, then pytest --torchperf-only "
            "--torchperf-instructions --torchperf-compare)" + off
        )
    processes = config.getoption("torchperf_processes") or config.getini("torchperf_processes")
    if str(processes).strip() not in ("", "1"):
        raise pytest.UsageError(
            "--torchperf-processes measures time in several processes; instruction counts "
            "repeat exactly between processes, so --torchperf-instructions needs one. Drop "
            "--torchperf-processes or ini torchperf_processes from this run, or pass "
            "--torchperf-processes 1 (or run the timing gate as a separate job)" + off
        )
    if not config.getoption("torchperf_child") and shutil.which("valgrind") is None:
        raise pytest.UsageError(
            "--torchperf-instructions counts instructions under Valgrind, and valgrind is not "
            "on PATH. Install it (Debian/Ubuntu: sudo apt-get install valgrind; Fedora: sudo dnf "
            "install valgrind; not available on macOS or Windows), or drop the option to gate "
            "on time" + off
        )
    return True


def configure_counting_child(config: pytest.Config) -> None:
    """In the child under Valgrind: tell the run's context where the profiles go."""
    from pytest_torchperf.measure.callgrind import counted_process

    dump = counted_process()
    if dump is not None:
        context_of(config).counting = dump


def run_counting_child(session: pytest.Session) -> None:
    """Count every perf test in one child pytest under Valgrind; hand the counts to the run."""
    from pytest_torchperf.measure.callgrind import (
        DUMP_DIR_ENV,
        kernel_caps,
        valgrind_command,
        valgrind_version,
    )
    from pytest_torchperf.run.counting import counted_time, read_counts

    config = session.config
    perf = child_runs.perf_items(session)
    ctx = context_of(config)
    if not perf or config.option.collectonly:
        return
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    folder = Path(tempfile.mkdtemp(prefix="torchperf-instructions-"))
    try:
        out, log = folder / "counts.jsonl", folder / "valgrind-child.log"
        (folder / "dumps").mkdir()
        args = valgrind_command(
            [
                *child_runs.python_command(),
                *config.invocation_params.args,
                f"--torchperf-child={out}",
                "--junitxml=",
                # A test failing under Valgrind must not stop the counting of the others (-x).
                "--maxfail=1000000000",
            ],
            folder / "dumps",
        )
        env = {
            **os.environ,
            DUMP_DIR_ENV: str(folder / "dumps"),
            child_runs.CHILD_PROCESS_ENV: "0",
            # Kernels cached by a native run were built for the host's ISA (AVX-512, AMX),
            # which Valgrind does not emulate: they gave wrong outputs under it.
            "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"),
            # CUDA does not run under Valgrind; this run skips non-CPU measurements anyway.
            "CUDA_VISIBLE_DEVICES": "",
            # str hashes decide dict layouts and so the instructions of every lookup.
            "PYTHONHASHSEED": "0",
        }
        # oneDNN's and MKL's kernels without FMA, which Valgrind runs ~10x faster (KERNEL_CAPS).
        caps = kernel_caps(os.environ, platform.machine())
        env.update(caps)
        if platform.machine() in ("x86_64", "AMD64") and "TORCHINDUCTOR_CPP_MARCH" not in env:
            # Inductor compiles its kernels natively with -march=native: on an AVX-512 host they
            # died with SIGILL under Valgrind 3.19, which emulates up to AVX2.
            env["TORCHINDUCTOR_CPP_MARCH"] = "x86-64-v3"
        child_runs.say(
            terminal,
            f"torchperf: counting instructions of {len(perf)} perf test(s) in a pytest "
            f"process under {valgrind_version()} (its start-up and imports alone take 30-60 s) ...",
        )
        # Epoch seconds as well as the monotonic clock: the child stamps its counts with
        # time.time(), the only clock both processes share (CountedTime).
        launched, start = time.time(), time.perf_counter()
        code = child_runs.run_child(args, config.invocation_params.dir, env, log, CHILD_TIMEOUT_S)
        took = time.perf_counter() - start
        counts, capability = read_counts(out)
        ctx.instruction_counts = counts
        ctx.counted_with = {
            "valgrind": valgrind_version(),
            "counted_capability": capability,
            "kernel_caps": " ".join(f"{name}={value}" for name, value in sorted(caps.items())),
        }
        split = counted_time(out, launched, launched + took)
        child_runs.say(
            terminal,
            f"torchperf: {len(counts)} instruction count(s) in {took:.1f} s under Valgrind"
            + (f": {split.describe()}" if split else ""),
        )
        if code not in (0, 1) or not counts:
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-20:]
            what = (
                f"the pytest process under Valgrind exited with code {code} after {took:.0f} s "
                f"and counted {len(counts)} measurement(s)"
            )
            # The command and the log once, at the top; each measurement's failure refers to it.
            child_runs.say(
                terminal,
                f"torchperf: {what}. Command: {shlex.join(args)}\n    " + "\n    ".join(tail),
                yellow=True,
            )
            ctx.instruction_problem = (
                f"{what} (its command and the end of its log are printed before the tests)"
            )
        else:
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-12:]
            ctx.instruction_problem = (
                f"the pytest process under Valgrind (exit code {code}) did not count it: its "
                f"test failed or was skipped there. The end of that process's output:\n    "
                + "\n    ".join(tail)
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
