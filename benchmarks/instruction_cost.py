"""What ``--torchperf-instructions`` costs on the example project: wall time of a save and a compare.

    python benchmarks/instruction_cost.py               # the non-variant perf tests (-k "not variants")
    python benchmarks/instruction_cost.py -k "mlp"      # any other selection
    python benchmarks/instruction_cost.py --jobs 1      # one counting process (default: auto)

Copies example_project/ to a temporary folder (its committed baselines are left alone), then runs
``pytest --torchperf-instructions --torchperf-save`` and ``--torchperf-compare`` there as a user
would, each in a fresh pytest process with the storage in the copy, and prints for each: the wall
time, pytest's own summary, and the plugin's split of each Valgrind child's time (start-up to the
first count, counting, the rest). Run it with nothing else busy on the machine: the figures are
wall times. The issue's target: at most 3 minutes each on a 2-vCPU VM.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "example_project"


def run(project: Path, *args: str) -> tuple[float, str, int]:
    env = {**os.environ, "COLUMNS": "200"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    out = done.stdout + done.stderr
    if done.returncode not in (0, 1):
        print(out[-4000:])
        raise SystemExit(f"pytest {' '.join(args)} exited with {done.returncode}")
    return wall, out, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="not variants", help="pytest -k selection")
    parser.add_argument(
        "--jobs",
        default="auto",
        help="--torchperf-instruction-jobs for both runs (auto: one counting process per core)",
    )
    parser.add_argument(
        "--results",
        metavar="DIR",
        default=None,
        help="also write each run's results file there (save.json, compare.json): the counts",
    )
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}; selection -k {args.k!r}, jobs {args.jobs}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="torchperf-instruction-cost-") as folder:
        project = Path(folder) / "example_project"
        shutil.copytree(
            EXAMPLE,
            project,
            ignore=shutil.ignore_patterns(
                ".torchperf", ".torchperf-report", "__pycache__", "*.egg-info", ".pytest_cache"
            ),
        )
        storage = Path(folder) / "baselines"
        for step in ("--torchperf-save", "--torchperf-compare"):
            wall, out, code = run(
                project,
                "--torchperf-instructions",
                step,
                f"--torchperf-storage={storage}",
                f"--torchperf-instruction-jobs={args.jobs}",
                *(
                    [f"--torchperf-json={Path(args.results).resolve() / (step[12:] + '.json')}"]
                    if args.results
                    else []
                ),
                "-k",
                args.k,
            )
            split = re.search(r"torchperf: \d+ instruction counts? in .*", out)
            # With several counting processes side by side, one line per process follows.
            processes = re.findall(r"^  process \d+ \(.*", out, flags=re.MULTILINE)
            tally = [line for line in out.splitlines() if re.match(r"torchperf: \d+ \w", line)]
            summary = [line for line in out.splitlines() if re.match(r"=+ .* in [\d.]+s", line)]
            # Exit code 1: a test failed (e.g. a count missing); the time is still the run's.
            print(f"{step}: {wall:.0f} s wall ({wall / 60:.1f} min), exit code {code}", flush=True)
            print(f"  {split.group(0) if split else 'no split line (older plugin?)'}")
            for line in processes:
                print(f"  {line}")
            print(f"  {tally[-1] if tally else ''}  {summary[-1] if summary else ''}", flush=True)
            # A verdict other than pass/new/measured in a run of unchanged code is a finding:
            # show its lines (the verdict, its "why", pytest's FAILED line).
            for line in out.splitlines():
                if re.search(r"FAIL|inconclusive|^E  ", line):
                    print(f"    {line.strip()[:300]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
